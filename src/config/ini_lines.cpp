#include "ini_lines.hpp"

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"

namespace mpiddp {
namespace {

constexpr std::size_t kMaxLineBytes = 65536;

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string without_comment(const std::string& line) { return line.substr(0, line.find('#')); }

bool only_blanks(const std::string& text) {
  for (char c : text)
    if (!blank(c)) return false;
  return true;
}

}  // namespace

std::string join_continuation_lines(std::istream& in, const std::string& where) {
  std::string out, line, pending;  // pending: the logical line being built
  bool continuable = false;        // whether pending is a key = value line
  std::size_t number = 0;
  auto flush = [&] {
    out += pending + "\n";
    pending.clear();
  };
  while (std::getline(in, line)) {
    ++number;
    // A NUL would cut the value short wherever it is used as C text (a path: another file).
    if (line.find('\0') != std::string::npos)
      throw InputError(where + ": line " + std::to_string(number) +
                       " holds a NUL character (\\x00); an input file is text");
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a Windows line end
    // A physical line holds one setting: 64 KiB is far past any (a checkpoint stores all of them in 60,000 bytes).
    if (line.size() > kMaxLineBytes)
      throw InputError(where + ": line " + std::to_string(number) + " is " + std::to_string(line.size()) +
                       " bytes long, over the " + std::to_string(kMaxLineBytes) + " a line of settings may hold");
    std::string text = without_comment(line);
    // Control characters would go raw into messages, config.ini and paths (an escape sequence to the terminal,
    // a CR hiding what follows it); a tab is a blank. A comment may hold anything but a NUL.
    if (const std::string code = first_control_character(text); !code.empty())
      throw InputError(where + ": line " + std::to_string(number) + " holds a control character (" + code +
                       "); an input file is text");
    if (only_blanks(text)) {
      flush();  // a blank line ends a value, as in configparser
      continuable = false;
      continue;
    }
    if (blank(text.front())) {
      if (!continuable)
        throw InputError(where + ": line " + std::to_string(number) +
                         " is indented but continues no 'key = value' line before it");
      std::size_t start = 0;
      while (blank(text[start])) ++start;
      while (blank(text.back())) text.pop_back();
      pending += " " + text.substr(start);
      continue;
    }
    flush();
    pending = text;
    continuable = text.find('=') != std::string::npos && text.front() != '[';
  }
  flush();
  return out;
}

}  // namespace mpiddp
