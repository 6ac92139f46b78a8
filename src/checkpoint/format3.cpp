#include "format3.hpp"

#include <map>
#include <sstream>

#include "mpiddp/common/error.hpp"

namespace mpiddp {
namespace {

// "section.key" -> value of an INI text as load_config writes it.
std::map<std::string, std::string> ini_values(const std::string& text) {
  std::map<std::string, std::string> values;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (!line.empty() && line.front() == '[') {
      section = line.substr(1, line.find(']') - 1);
    } else if (const auto eq = line.find(" = "); eq != std::string::npos) {
      values[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
    }
  }
  return values;
}

}  // namespace

void read_format3_sample_order(TrainingState& state, const std::string& path) {
  const auto values = ini_values(state.config_ini);
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
