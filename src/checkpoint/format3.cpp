#include "format3.hpp"

#include "mpiddp/common/error.hpp"
#include "mpiddp/config/config.hpp"

namespace mpiddp {

void read_format3_sample_order(TrainingState& state, const std::string& path) {
  const auto values = resolved_values(state.config_ini);
  auto text_of = [&](const char* key) {
    const auto found = values.find(key);
    if (found == values.end()) throw InputError(path + ": its stored input file has no " + key + " (damaged?)");
    return found->second;
  };
  auto integer = [&](const char* key) {
    const std::string text = text_of(key);
    std::size_t used = 0;
    std::int64_t value = 0;
    try {
      value = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size()) throw InputError(path + ": stored " + key + " '" + text + "' is no number");
    return value;
  };
  auto flag = [&](const char* key) {  // written as true / false
    const std::string text = text_of(key);
    if (text != "true" && text != "false") throw InputError(path + ": stored " + key + " '" + text + "' is no boolean");
    return text == "true";
  };
  state.batch_size = integer("train.batch_size");
  state.accumulate = integer("train.accumulate");
  state.shuffle = flag("data.shuffle");
  state.drop_last = flag("data.drop_last");
}

}  // namespace mpiddp
