#pragma once
// Error lines quote file names, keys and values that came from the user's files.
// A damaged or binary file must not put raw bytes (terminal escapes, NULs, pages
// of garbage) on the terminal: `printable` keeps text and valid UTF-8, writes any
// other byte as \xNN, and caps the length.
#include <cstddef>
#include <string>

namespace mpiddp {

constexpr std::size_t kMaxMessageBytes = 1000;

std::string printable(const std::string& text, std::size_t max_bytes = kMaxMessageBytes);

// The first control character in `text` (a tab aside), written "\x1b" for a
// message; "" where there is none. A setting is one line of text: such a byte
// would go raw into config.ini, paths and the terminal.
std::string first_control_character(const std::string& text);

}  // namespace mpiddp
