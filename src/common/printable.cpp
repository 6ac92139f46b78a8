#include "mpiddp/common/printable.hpp"

#include <cstdio>

namespace mpiddp {
namespace {

// Length of the valid UTF-8 sequence of two to four bytes at `at`, 0 if none.
std::size_t utf8_length(const std::string& s, std::size_t at) {
  const auto lead = static_cast<unsigned char>(s[at]);
  const std::size_t n = lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
  if (n == 0 || at + n > s.size()) return 0;
  // U+0080..U+009F are C1 control codes (0x9b is CSI, a terminal escape).
  if (lead == 0xc2 && static_cast<unsigned char>(s[at + 1]) < 0xa0) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[at + k]) & 0xc0) != 0x80) return 0;
  return n;
}

}  // namespace

std::string printable(const std::string& text, std::size_t max_bytes) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size() && out.size() < max_bytes) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (const std::size_t n = c >= 0x80 ? utf8_length(text, i) : 0; n > 0) {
      out.append(text, i, n);
      i += n;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      out += escaped;
      ++i;
    }
  }
  if (i < text.size()) out += " ... (" + std::to_string(text.size() - i) + " more bytes)";
  return out;
}

std::string first_control_character(const std::string& text) {
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if ((c >= 0x20 && c != 0x7f) || c == '\t') continue;
    char code[8];
    std::snprintf(code, sizeof(code), "\\x%02x", c);
    return code;
  }
  return "";
}

}  // namespace mpiddp
