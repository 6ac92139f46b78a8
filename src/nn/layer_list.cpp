// The grammar of model.layers: calls separated by whitespace outside
// parentheses; a call is `name` or `name(arg, ..., key=value, ...)`. Values are
// plain words. A container call, `residual(LAYERS)` or `residual(LAYERS ; SHORTCUT)`,
// holds layer lists instead of arguments: its inside is kept as written and
// parsed as lists of their own (split_branches), so nesting needs no new rule here.
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

// Residuals in residuals in ...: deeper than any real network, and a hostile
// list cannot recurse the builder off its stack.
constexpr int kMaxNesting = 32;

bool is_name(const std::string& s) {
  if (s.empty() || !std::islower(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::islower(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

LayerCall parse_call(const std::string& text, std::size_t index, const std::string& branch) {
  auto fail = [&](const std::string& why) {
    throw LayerError(list_position(branch, index) + " '" + text + "': " + why);
  };
  LayerCall call;
  call.text = text;
  const std::size_t open = text.find('(');
  call.name = text.substr(0, open);
  if (!is_name(call.name)) fail("'" + call.name + "' is not a layer name (lower-case letters, digits, _)");
  if (open == std::string::npos) return call;
  if (text.back() != ')') fail("text after the closing parenthesis");
  const std::string inside = text.substr(open + 1, text.size() - open - 2);
  if (is_container(call.name)) {
    call.nested = inside;
    return call;
  }
  if (inside.find_first_of("()") != std::string::npos) fail("nested parentheses are only for residual(...)");
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

bool is_container(const std::string& name) { return name == "residual"; }

std::vector<std::string> split_branches(const std::string& inside) {
  std::vector<std::string> branches(1);
  int depth = 0;
  for (char c : inside) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ';' && depth == 0) {
      branches.emplace_back();
      continue;
    }
    branches.back() += c;
  }
  if (branches.size() > 2)
    throw LayerError("takes one layer list, or two separated by ';' (body ; shortcut), not " +
                     std::to_string(branches.size()));
  for (std::string& branch : branches)
    if (trim(branch).empty())
      throw LayerError(branches.size() == 1 ? "needs a layer list inside its parentheses"
                                            : "an empty layer list beside ';'");
  return branches;
}

std::string list_position(const std::string& branch, std::size_t index) {
  if (branch.empty()) return layer_position(index);
  return branch + " layer " + std::to_string(index + 1) + " (" + branch + "." + std::to_string(index) + ")";
}

std::vector<LayerCall> parse_layer_list(const std::string& text, const std::string& branch) {
  std::vector<LayerCall> calls;
  std::string current;
  int depth = 0;
  auto flush = [&] {
    if (!current.empty()) calls.push_back(parse_call(current, calls.size(), branch));
    current.clear();
  };
  for (char c : text) {
    if (depth == 0 && std::isspace(static_cast<unsigned char>(c))) {
      flush();
      continue;
    }
    if (c == '(' && ++depth > kMaxNesting)
      throw LayerError(list_position(branch, calls.size()) + ": parentheses nested deeper than " +
                       std::to_string(kMaxNesting));
    if (c == ')' && --depth < 0)
      throw LayerError(list_position(branch, calls.size()) + " '" + current + ")': a ')' without its '('");
    current += c;
  }
  if (depth > 0) throw LayerError(list_position(branch, calls.size()) + " '" + current + "': a '(' without its ')'");
  flush();
  if (calls.empty()) throw LayerError("no layers");
  if (calls.size() > kMaxLayers)
    throw LayerError(std::to_string(calls.size()) + " layers; at most " + std::to_string(kMaxLayers));
  return calls;
}

}  // namespace mpiddp
