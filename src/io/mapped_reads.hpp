#pragma once
// Reads from a memory-mapped file that another process shrinks (truncates or
// rewrites) after its size was checked touch pages past its new end, and the
// kernel answers with SIGBUS: a crash with no message. Run such reads here and
// they end in an InputError naming the file instead.
#include <functional>
#include <string>

namespace mpiddp::io {

// Runs `read` on this thread with SIGBUS caught. `reading` must point at the
// path of the file whose pages `read` touches at that moment (it may move on as
// `read` goes from file to file). An access past a mapped file's end inside
// `read` (SIGBUS, BUS_ADRERR) ends it, and this throws InputError("<*reading>:
// <what>"); `read` must hold nothing that needs a destructor when it touches the
// mapping, since its frames are abandoned, not unwound. Any other SIGBUS (outside
// a guarded read, sent by another process, a hardware memory error) gets the
// action it had before the first call here (a core dump by default).
void guard_mapped_reads(const std::function<void()>& read, const std::string* const volatile& reading,
                        const char* what);

}  // namespace mpiddp::io
