// The MPI communicator: every collective's result checked on every rank.
#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

#include "mpiddp/dist/mpi_communicator.hpp"

using namespace mpiddp;

TEST_CASE("all-reduce, broadcast, all-gather, min/max", "[mpi]") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int rank = comm.rank(), world = comm.size();
  REQUIRE(world >= 2);

  std::vector<float> f(1000);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(rank + 1) * static_cast<float>(i);
  comm.allreduce_sum(f.data(), f.size());
  const float ranks_sum = static_cast<float>(world * (world + 1) / 2);
  for (std::size_t i = 0; i < f.size(); ++i) REQUIRE(f[i] == ranks_sum * static_cast<float>(i));

  std::vector<float> g(300000, static_cast<float>(rank));  // several buckets' worth, non-blocking
  auto pending = comm.start_allreduce_sum(g.data(), g.size());
  pending->wait();
  const float expected = static_cast<float>(world * (world - 1) / 2);
  CHECK(std::all_of(g.begin(), g.end(), [&](float v) { return v == expected; }));

  double d[2] = {0.5 * rank, 1.0};
  comm.allreduce_sum(d, 2);
  CHECK(d[1] == world);

  std::vector<int> payload(17, rank == world - 1 ? 42 : -1);
  comm.broadcast(payload.data(), payload.size() * sizeof(int), world - 1);
  CHECK(std::all_of(payload.begin(), payload.end(), [](int v) { return v == 42; }));

  std::vector<int> everyone(static_cast<std::size_t>(world));
  const int mine = rank * 10;
  comm.allgather(&mine, sizeof(int), everyone.data());
  for (int r = 0; r < world; ++r) CHECK(everyone[static_cast<std::size_t>(r)] == r * 10);

  CHECK(comm.allreduce_max(rank) == world - 1);
  CHECK(comm.allreduce_min(rank + 5) == 5);
}
