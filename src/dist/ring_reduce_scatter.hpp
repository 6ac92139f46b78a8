#pragma once
// ZeRO stage 1's gradient reduce-scatter over MPI, as a ring of point-to-point
// messages (private to dist). Why not MPI_Ireduce_scatter: Open MPI's (libnbc)
// reduces the whole bucket onto rank 0 through temporaries of twice the bucket,
// and its blocking one allocates about 1.5 buckets on every rank, per bucket in
// flight; measured on the 50 M-parameter MLP at world 4, that ate 200 to 400 MB
// per rank, more than the sharded optimizer state saved. The ring needs one
// receive buffer of the largest piece, shared by all buckets: they run one at a
// time, in launch order, each advanced whenever the reducer calls in (a launch
// or a wait), as MPI advances its own non-blocking collectives.
//
// Ring over W ranks, pieces p_0..p_{W-1} of a bucket (p_r owned by rank r): at
// step s = 0..W-2 rank i sends its partial sum of piece (i-s-1) mod W to rank
// i+1 and receives piece (i-s-2) mod W from rank i-1, adding it to its own. After
// W-1 steps rank i holds the sum of piece i over all ranks. With two ranks each
// piece is a + b: the same bits as an all-reduce.
#include <mpi.h>

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "mpiddp/dist/communicator.hpp"

namespace mpiddp {

class RingReduceScatter : public std::enable_shared_from_this<RingReduceScatter> {
 public:
  RingReduceScatter(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  ~RingReduceScatter();
  // Queues the reduce-scatter of data[sum(counts)] (see Communicator) and advances the queue.
  std::unique_ptr<PendingReduction> start(float* data, const std::vector<std::size_t>& counts);

 private:
  struct Op {
    float* data;
    std::vector<std::size_t> counts, offsets;
    std::uint64_t id;
  };
  class Handle;

  // Advances as far as possible without blocking (or, `block`, until op `until` is done).
  void advance(bool block, std::uint64_t until);
  bool done(std::uint64_t id) const { return id < next_done_; }
  void post_step();   // the current op's sends and receives of step_
  void finish_step(); // adds the received piece

  MPI_Comm comm_;
  int rank_, size_;
  std::deque<Op> queue_;   // front: in progress
  int step_ = -1;          // of the front op; -1: not started
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  std::vector<float> received_;  // the largest piece seen so far
  std::uint64_t next_id_ = 0, next_done_ = 0;
};

}  // namespace mpiddp
