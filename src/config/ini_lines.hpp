#pragma once
// The lines of an input file as Boost's INI parser reads them, with two
// additions a long value needs (a ResNet's or a GPT's model.layers):
// - `#` starts a comment anywhere on a line (as Boost has it), and is dropped here;
// - a line that starts with blanks continues the value of the line before it
//   (Python's configparser rule), joined with one space.
// A comment between continuation lines cannot cut the value short this way.
#include <istream>
#include <string>

namespace mpiddp {

// `in`'s text with comments dropped and continuation lines joined. Throws
// InputError naming `where` and the line for a continuation with nothing before it.
std::string join_continuation_lines(std::istream& in, const std::string& where);

}  // namespace mpiddp
