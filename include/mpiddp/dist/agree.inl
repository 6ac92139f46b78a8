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
  // One all-reduce (MAX) carries the lowest failing rank with its exit code, packed
  // as (size - rank) * 256 + code so the maximum picks both from the same rank,
  // and the caller's flags.
  std::vector<std::int64_t> slots(1 + flags.size());
  slots[0] = failure ? (comm.size() - comm.rank()) * std::int64_t{256} + code : 0;
  for (std::size_t i = 0; i < flags.size(); ++i) slots[1 + i] = flags[i];
  comm.allreduce_max(slots.data(), slots.size());
  if (slots[0] != 0) {
    if (comm.rank() == comm.size() - slots[0] / 256) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        report_error(comm.rank(), error_text(e));
      }
    }
    throw JobFailed(static_cast<int>(slots[0] % 256));
  }
  return {slots.begin() + 1, slots.end()};
}

template <class Fn>
void agree_or_fail(Communicator& comm, Fn&& step) {
  agree_step(comm, std::forward<Fn>(step), {});
}

}  // namespace mpiddp
