#include "mpiddp/dist/mpi_communicator.hpp"

#include <algorithm>
#include <climits>
#include <vector>

#include "mpiddp/common/error.hpp"
#include "mpiddp/dist/watchdog.hpp"

namespace mpiddp {

void check_mpi(int rc, const char* op) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string what = std::string(op) + " failed: " + std::string(text, length);
  Watchdog::instance().end_if_peers_lost(what, rank);  // a peer's death, told as such
  throw RuntimeError("rank " + std::to_string(rank) + ": " + what);
}

namespace {

// MPI counts are int: large buffers go in slices.
constexpr std::size_t kMaxSlice = std::size_t{1} << 30;

class MpiPendingReduction final : public PendingReduction {
 public:
  std::vector<MPI_Request> requests;
  void wait() override {
    if (requests.empty()) return;
    Watchdog::Scope watch("MPI_Waitall(gradient all-reduce)");
    check_mpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
              "MPI_Waitall(all-reduce)");
    requests.clear();
  }
  void progress() override {
    if (requests.empty()) return;
    int complete = 0;
    check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &complete, MPI_STATUSES_IGNORE),
              "MPI_Testall(all-reduce)");
    if (complete) requests.clear();
  }
  ~MpiPendingReduction() override {
    // A reduction abandoned by an exception must not be left in flight, nor wait
    // forever for peers that abandoned it too: the watchdog bounds it.
    if (requests.empty()) return;
    Watchdog::Scope watch("MPI_Waitall(abandoned gradient all-reduce)");
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  }
};

template <class T>
void allreduce_in_slices(MPI_Comm comm, T* data, std::size_t count, MPI_Datatype type, MPI_Op op, const char* name) {
  for (std::size_t done = 0; done < count; done += kMaxSlice) {
    const int n = static_cast<int>(std::min(kMaxSlice, count - done));
    Watchdog::Scope watch(name);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, data + done, n, type, op, comm), name);
  }
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm) {
  check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::allreduce_sum(float* data, std::size_t count) {
  allreduce_in_slices(comm_, data, count, MPI_FLOAT, MPI_SUM, "MPI_Allreduce(float sum)");
}

void MpiCommunicator::allreduce_sum(double* data, std::size_t count) {
  allreduce_in_slices(comm_, data, count, MPI_DOUBLE, MPI_SUM, "MPI_Allreduce(double sum)");
}

std::unique_ptr<PendingReduction> MpiCommunicator::start_allreduce_sum(float* data, std::size_t count) {
  auto pending = std::make_unique<MpiPendingReduction>();
  for (std::size_t done = 0; done < count; done += kMaxSlice) {
    const int n = static_cast<int>(std::min(kMaxSlice, count - done));
    MPI_Request request;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data + done, n, MPI_FLOAT, MPI_SUM, comm_, &request),
              "MPI_Iallreduce(gradient bucket)");
    pending->requests.push_back(request);
  }
  return pending;
}

std::int64_t MpiCommunicator::allreduce_max(std::int64_t value) {
  allreduce_max(&value, 1);
  return value;
}

void MpiCommunicator::allreduce_max(std::int64_t* values, std::size_t count) {
  allreduce_in_slices(comm_, values, count, MPI_INT64_T, MPI_MAX, "MPI_Allreduce(step agreement)");
}

std::int64_t MpiCommunicator::allreduce_min(std::int64_t value) {
  allreduce_in_slices(comm_, &value, 1, MPI_INT64_T, MPI_MIN, "MPI_Allreduce(min)");
  return value;
}

void MpiCommunicator::broadcast(void* data, std::size_t bytes, int root) {
  auto* p = static_cast<char*>(data);
  for (std::size_t done = 0; done < bytes; done += kMaxSlice) {
    const int n = static_cast<int>(std::min(kMaxSlice, bytes - done));
    Watchdog::Scope watch("MPI_Bcast");
    check_mpi(MPI_Bcast(p + done, n, MPI_BYTE, root, comm_), "MPI_Bcast");
  }
}

void MpiCommunicator::allgather(const void* send, std::size_t bytes, void* recv) {
  if (bytes > kMaxSlice) throw RuntimeError("allgather: block too large");
  Watchdog::Scope watch("MPI_Allgather");
  check_mpi(MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, comm_),
            "MPI_Allgather");
}

void MpiCommunicator::barrier() {
  Watchdog::Scope watch("MPI_Barrier");
  check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
}

}  // namespace mpiddp
