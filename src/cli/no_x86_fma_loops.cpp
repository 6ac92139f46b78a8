// A CPU other than x86-64: the portable loop is the only one (the compiler's
// baseline ISA for this target decides what it runs).
#include "fma_loops.hpp"

namespace mpiddp::bench {

std::vector<FmaLoop> fma_loops() { return {{"portable", kPortableLanes, false, portable_fma_loop}}; }

}  // namespace mpiddp::bench
