#pragma once
// Implementation of agree_or_fail (header-only because it takes a callable).
#include <exception>
#include <limits>

#include "mpiddp/common/error.hpp"

namespace mpiddp {

template <class Fn>
void agree_or_fail(Communicator& comm, Fn&& step) {
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
  const std::int64_t none = std::numeric_limits<std::int64_t>::max();
  const std::int64_t first_failing = comm.allreduce_min(failure ? comm.rank() : none);
  if (first_failing == none) return;
  const std::int64_t job_code = comm.allreduce_max(code);
  if (comm.rank() == first_failing) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      report_error(comm.rank(), e.what());
    }
  }
  throw JobFailed(static_cast<int>(job_code));
}

}  // namespace mpiddp
