// The loader, on its thread and inline, and the mapped row reads it calls: every
// batch arrives, in order, with the bytes of the rows it names, for every
// read-ahead depth, across shard boundaries, with repeated rows; a loader dropped
// half-way stops; where data.loader = auto puts the reads.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "mpiddp/data/dataset.hpp"
#include "mpiddp/data/loader.hpp"
#include "mpiddp/data/shard_writer.hpp"
#include "mpiddp/train/loader_placement.hpp"

namespace {

using namespace mpiddp;

constexpr std::size_t kFeatures = 131;  // not a multiple of any vector width: every copy has a tail
constexpr std::int64_t kRows = 203;

// Row r: feature j is the byte (r * 7 + j) % 256, label r % 10.
std::uint8_t byte_of(std::int64_t row, std::size_t j) { return static_cast<std::uint8_t>((row * 7 + j) % 256); }

class CountingRows final : public RowSource {
 public:
  std::int64_t rows() const override { return kRows; }
  std::size_t feature_dim() const override { return kFeatures; }
  std::size_t target_dim() const override { return 1; }
  bool class_labels() const override { return true; }
  bool uint8_features() const override { return true; }
  std::vector<std::int64_t> sample_shape() const override { return {static_cast<std::int64_t>(kFeatures)}; }
  std::size_t read(std::size_t max_rows, std::vector<unsigned char>& u8, std::vector<float>&,
                   std::vector<std::int32_t>& ids, std::vector<float>&) override {
    const std::size_t count = std::min<std::size_t>(max_rows, static_cast<std::size_t>(kRows - next_));
    u8.resize(count * kFeatures);
    ids.resize(count);
    for (std::size_t i = 0; i < count; ++i, ++next_) {
      for (std::size_t j = 0; j < kFeatures; ++j) u8[i * kFeatures + j] = byte_of(next_, j);
      ids[i] = static_cast<std::int32_t>(next_ % 10);
    }
    return count;
  }

 private:
  std::int64_t next_ = 0;
};

// Three shards of the rows above in a fresh directory, removed at the end.
struct ThreeShards {
  std::filesystem::path dir;
  ThreeShards() {
    char name[] = "/tmp/mpiddp-loader-XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    dir = name;
    CountingRows rows;
    write_shards(rows, (dir / "shards").string(), 3, "shard");
  }
  ~ThreeShards() { std::filesystem::remove_all(dir); }
};

// Every value of `batch` is its row's byte times the shards' scale, every label its row's.
void check_batch(const Batch& batch, const std::vector<std::int64_t>& rows, float scale) {
  REQUIRE(batch.size() == rows.size());
  for (std::size_t p = 0; p < rows.size(); ++p) {
    INFO("sample " << p << " = row " << rows[p]);
    CHECK(batch.class_ids[p] == rows[p] % 10);
    const float* values = batch.features.row(p);
    for (std::size_t j = 0; j < kFeatures; ++j)
      if (values[j] != static_cast<float>(byte_of(rows[p], j)) * scale) FAIL("feature " << j << " is " << values[j]);
  }
}

}  // namespace

TEST_CASE("the loader delivers every batch in order, exactly, at every read-ahead depth, on its thread or inline",
          "[loader]") {
  ThreeShards shards;
  ShardedDataset data((shards.dir / "shards").string(), "features", "labels", LabelKind::class_id);
  REQUIRE(data.size() == kRows);
  // The scale the shards store for uint8 features, read back through one known row.
  Batch first;
  data.read({0, 1}, first);
  const float scale = first.features.row(1)[0] / static_cast<float>(byte_of(1, 0));
  REQUIRE(scale > 0.0f);

  // MPIDDP_TEST_SEED=N replays an order; the seed is printed either way.
  const char* fixed = std::getenv("MPIDDP_TEST_SEED");
  const unsigned seed = fixed ? static_cast<unsigned>(std::strtoul(fixed, nullptr, 10))
                              : static_cast<unsigned>(std::random_device{}());
  std::printf("loader test: order seed %u (MPIDDP_TEST_SEED=%u replays it)\n", seed, seed);
  INFO("order seed " << seed);
  std::mt19937 random(seed);
  std::vector<std::int64_t> order;  // a shuffled epoch with repeats, jumping between shards
  for (std::int64_t r = 0; r < kRows; ++r) order.push_back(r);
  std::shuffle(order.begin(), order.end(), random);
  for (int i = 0; i < 40; ++i) order.push_back(order[static_cast<std::size_t>(i) * 3]);

  const bool background = GENERATE(true, false);
  INFO((background ? "loader thread" : "inline"));
  for (const std::size_t prefetch : {1, 2, 3, 4, 7, 100})
    for (const std::size_t batch_size : {1, 16, 64}) {
      INFO("prefetch " << prefetch << ", batch " << batch_size);
      BatchLoader loader(data, order, batch_size, prefetch, nullptr, 0, background);
      const std::size_t batches = (order.size() + batch_size - 1) / batch_size;
      CHECK(loader.batch_count() == batches);
      for (std::size_t b = 0; b < batches; ++b) {
        const auto batch = loader.next();
        REQUIRE(batch.has_value());
        const std::size_t begin = b * batch_size, end = std::min(order.size(), begin + batch_size);
        check_batch(*batch, std::vector<std::int64_t>(order.begin() + begin, order.begin() + end), scale);
      }
      CHECK_FALSE(loader.next().has_value());
    }
}

TEST_CASE("a loader dropped while its queue is full or half-read stops its thread", "[loader]") {
  ThreeShards shards;
  ShardedDataset data((shards.dir / "shards").string(), "features", "labels", LabelKind::class_id);
  std::vector<std::int64_t> order(kRows);
  for (std::int64_t r = 0; r < kRows; ++r) order[static_cast<std::size_t>(r)] = kRows - 1 - r;
  for (int taken = 0; taken < 6; ++taken) {
    BatchLoader loader(data, order, 8, 4);
    for (int b = 0; b < taken; ++b) REQUIRE(loader.next().has_value());
  }  // each destructor joins the thread: a hang here fails the test by its timeout
  SUCCEED();
}

TEST_CASE("a sample outside the data set reaches next() as an error, on the thread or inline", "[loader]") {
  ThreeShards shards;
  ShardedDataset data((shards.dir / "shards").string(), "features", "labels", LabelKind::class_id);
  const bool background = GENERATE(true, false);
  INFO((background ? "loader thread" : "inline"));
  BatchLoader loader(data, {0, 1, 2, kRows}, 2, 4, nullptr, 0, background);
  REQUIRE(loader.next().has_value());
  CHECK_THROWS_WITH(loader.next(), Catch::Contains("outside the data set"));
  // The error stays: a later call does not read past it, on either side.
  CHECK_THROWS_WITH(loader.next(), Catch::Contains("outside the data set"));
}

TEST_CASE("data.loader = auto reads on a thread only where it has a CPU to spare or the rank trains on a GPU",
          "[loader]") {
  // CPU ranks: a thread needs more usable CPUs than BLAS threads.
  CHECK_FALSE(place_loader(LoaderPlacement::automatic, false, 1, 1).background);
  CHECK_FALSE(place_loader(LoaderPlacement::automatic, false, 4, 4).background);
  CHECK_FALSE(place_loader(LoaderPlacement::automatic, false, 4, 2).background);
  CHECK(place_loader(LoaderPlacement::automatic, false, 1, 2).background);
  CHECK(place_loader(LoaderPlacement::automatic, false, 3, 4).background);
  // A GPU rank's CPU mostly waits for the device: always a thread.
  CHECK(place_loader(LoaderPlacement::automatic, true, 1, 1).background);
  // An explicit setting wins either way.
  CHECK(place_loader(LoaderPlacement::thread, false, 1, 1).background);
  CHECK_FALSE(place_loader(LoaderPlacement::inline_reads, true, 1, 8).background);
  // The banner says what decided it.
  CHECK_THAT(place_loader(LoaderPlacement::automatic, false, 1, 1).reason,
             Catch::Contains("1 CPU(s) for 1 BLAS thread(s)") && Catch::Contains("inline"));
}

TEST_CASE("the mapped reads report a batch's errors in sample order", "[loader]") {
  ThreeShards shards;
  ShardedDataset data((shards.dir / "shards").string(), "features", "labels", LabelKind::class_id);
  data.set_classes(5);  // row 5's label (5) is now out of range
  Batch batch;
  // Sample 0 is bad, and so is sample 1: sample 0's error is the one reported.
  CHECK_THROWS_WITH(data.read({5, kRows}, batch), Catch::Contains("row 5: label 5 outside [0, 5)"));
  CHECK_THROWS_WITH(data.read({kRows, 5}, batch), Catch::Contains("sample index 203 outside the data set"));
  CHECK_NOTHROW(data.read({0, 1, 4}, batch));
}
