#pragma once
// Implementation of agree_or_fail / agree_step (header-only: they take a callable).
#include <exception>
#include <vector>

#include "mpiddp/common/error.hpp"

namespace mpiddp {

template <class Fn>
std::vector<std::int64_t> agree_step(Communicator& comm, Fn&& step, const std::vector<std::int64_t>& flags) {
  std::exception_ptr failure;
  int code = kExitOk;
  try {
    step();
  } catch (const JobFailed&) {
    throw;
  } catch (const std::exception& e) {
    failure = std::current_exception();
    code = exit_code_of(e);
  }
  // One all-reduce (MAX) carries: the lowest failing rank (as size - rank), its
  // exit code, and the caller's flags.
  std::vector<std::int64_t> slots(2 + flags.size());
  slots[0] = failure ? comm.size() - comm.rank() : 0;
  slots[1] = code;
  for (std::size_t i = 0; i < flags.size(); ++i) slots[2 + i] = flags[i];
  comm.allreduce_max(slots.data(), slots.size());
  if (slots[0] != 0) {
    if (comm.rank() == comm.size() - slots[0]) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        report_error(comm.rank(), e.what());
      }
    }
    throw JobFailed(static_cast<int>(slots[1]));
  }
  return {slots.begin() + 2, slots.end()};
}

template <class Fn>
void agree_or_fail(Communicator& comm, Fn&& step) {
  agree_step(comm, std::forward<Fn>(step), {});
}

}  // namespace mpiddp
