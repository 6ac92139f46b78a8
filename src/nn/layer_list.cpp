// The grammar of model.layers: calls separated by whitespace outside
// parentheses; a call is `name` or `name(arg, ..., key=value, ...)`. Values are
// plain words for now; a later nested list (a residual block's layers) fits as a
// parenthesised value without changing how calls are split.
#include <cctype>

#include "mpiddp/nn/model_builder.hpp"

namespace mpiddp {
namespace {

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

bool is_name(const std::string& s) {
  if (s.empty() || !std::islower(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::islower(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

LayerCall parse_call(const std::string& text, std::size_t index) {
  auto fail = [&](const std::string& why) {
    throw LayerError(layer_position(index) + " '" + text + "': " + why);
  };
  LayerCall call;
  call.text = text;
  const std::size_t open = text.find('(');
  call.name = text.substr(0, open);
  if (!is_name(call.name)) fail("'" + call.name + "' is not a layer name (lower-case letters, digits, _)");
  if (open == std::string::npos) return call;
  if (text.back() != ')') fail("text after the closing parenthesis");
  const std::string inside = text.substr(open + 1, text.size() - open - 2);
  if (inside.find_first_of("()") != std::string::npos) fail("nested parentheses are not supported here");
  if (trim(inside).empty()) return call;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = inside.find(',', start);
    const std::string item = trim(inside.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) fail("an empty argument");
    const std::size_t equals = item.find('=');
    if (equals == std::string::npos) {
      if (!call.keywords.empty()) fail("positional argument '" + item + "' after a key=value argument");
      call.positional.push_back(item);
    } else {
      const std::string key = trim(item.substr(0, equals)), value = trim(item.substr(equals + 1));
      if (!is_name(key) || value.empty()) fail("'" + item + "' is not key=value");
      for (const auto& [seen, unused] : call.keywords)
        if (seen == key) fail("argument '" + key + "' given twice");
      call.keywords.emplace_back(key, value);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return call;
}

}  // namespace

std::vector<LayerCall> parse_layer_list(const std::string& text) {
  std::vector<LayerCall> calls;
  std::string current;
  int depth = 0;
  auto flush = [&] {
    if (!current.empty()) calls.push_back(parse_call(current, calls.size()));
    current.clear();
  };
  for (char c : text) {
    if (depth == 0 && std::isspace(static_cast<unsigned char>(c))) {
      flush();
      continue;
    }
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0)
      throw LayerError(layer_position(calls.size()) + " '" + current + ")': a ')' without its '('");
    current += c;
  }
  if (depth > 0) throw LayerError(layer_position(calls.size()) + " '" + current + "': a '(' without its ')'");
  flush();
  if (calls.empty()) throw LayerError("no layers");
  if (calls.size() > kMaxLayers)
    throw LayerError(std::to_string(calls.size()) + " layers; at most " + std::to_string(kMaxLayers));
  return calls;
}

}  // namespace mpiddp
