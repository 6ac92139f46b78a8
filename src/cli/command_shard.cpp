#include <boost/program_options.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "mpiddp/cli/commands.hpp"
#include "mpiddp/cli/options.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/config/choices.hpp"
#include "mpiddp/data/shard_writer.hpp"
#include "mpiddp/data/token_shards.hpp"
#include "mpiddp/train/run_output.hpp"

namespace po = boost::program_options;

namespace mpiddp {

namespace {
// A progress line (rows, rows/s, ETA) at most once every `every_s` seconds, so a
// large conversion shows it is moving and a small one prints nothing extra.
ShardProgress progress_lines(double every_s) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point last = start;
  return [=](std::int64_t done, std::int64_t total) mutable {
    const Clock::time_point now = Clock::now();
    if (done == total || std::chrono::duration<double>(now - last).count() < every_s) return;
    last = now;
    const double rate = static_cast<double>(done) / std::max(1e-9, std::chrono::duration<double>(now - start).count());
    std::printf("shard: %lld/%lld rows (%.0f%%), %.0f rows/s, ETA %s\n", static_cast<long long>(done),
                static_cast<long long>(total), 100.0 * static_cast<double>(done) / static_cast<double>(total), rate,
                format_duration(static_cast<double>(total - done) / std::max(1e-9, rate)).c_str());
    std::fflush(stdout);
  };
}
int shard_tokens(const std::string& format, const std::string& input, std::int64_t vocab, const std::string& out,
                 int shards, const std::string& prefix, double progress_every) {
  if (input.empty()) throw InputError("--format " + format + " needs --input");
  const std::unique_ptr<TokenSource> source = format == "bytes" ? open_byte_source(input) : open_llmc_source(input, vocab);
  const auto start = std::chrono::steady_clock::now();
  const ShardSummary summary = write_token_shards(*source, out, shards, prefix, progress_lines(progress_every));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %lld tokens (vocabulary %d) into %zu shard(s) in %s in %.2f s\n",
              static_cast<long long>(summary.rows), summary.classes, summary.files.size(), out.c_str(), seconds);
  return kExitOk;
}

}  // namespace

int command_shard(const std::vector<std::string>& args) {
  std::string format, images, labels, input, out, task = "classification", prefix = "shard";
  int shards = 4;
  double progress_every = 5.0;
  std::size_t targets = 1;
  std::int64_t vocab = 50257;
  po::options_description options("mpiddp shard");
  options.add_options()("help,h", "show this help")
      ("format", po::value(&format)->required(),
       "idx (MNIST/Fashion-MNIST .gz pair), csv, bytes (every byte of --input is a token) or llmc (llm.c's .bin "
       "token shards, --input a file or a quoted glob)")
      ("images", po::value(&images), "idx: the images file (e.g. train-images-idx3-ubyte.gz)")
      ("labels", po::value(&labels), "idx: the labels file")
      ("input", po::value(&input), "csv: the CSV file (plain or .gz), last column(s) = label; bytes, llmc: the tokens")
      ("vocab", po::value(&vocab)->default_value(vocab), "llmc: the vocabulary size (token ids must be below it)")
      ("task", po::value(&task)->default_value(task), "csv: classification (int labels) or regression")
      ("targets", po::value(&targets)->default_value(targets), "csv regression: number of target columns")
      ("out", po::value(&out)->required(), "output directory for the shards")
      ("shards", po::value(&shards)->default_value(shards), "number of shard files")
      ("prefix", po::value(&prefix)->default_value(prefix), "shard file name prefix")
      ("progress-every", po::value(&progress_every)->default_value(progress_every),
       "seconds between progress lines (rows, rows/s, ETA); 0 = after every block of 4096 rows");
  po::variables_map values;
  if (!parse_command_options(args, options, values)) return kExitOk;
  if (!(progress_every >= 0)) throw InputError("--progress-every must be a number of seconds >= 0");
  check_shard_output_dir(out);  // before reading any input: refused without work
  if (format == "bytes" || format == "llmc") return shard_tokens(format, input, vocab, out, shards, prefix, progress_every);
  std::unique_ptr<RowSource> source;
  if (format == "idx") {
    if (images.empty() || labels.empty()) throw InputError("--format idx needs --images and --labels");
    source = open_idx_source(images, labels);
  } else if (format == "csv") {
    if (input.empty()) throw InputError("--format csv needs --input");
    const std::optional<DataTask> kind = parse_choice<DataTask>(task);  // data.task's names
    if (!kind) throw InputError("--task must be classification or regression");
    source = open_csv_source(input, *kind == DataTask::classification, targets);
  } else {
    throw InputError("--format must be idx, csv, bytes or llmc, got '" + format + "'");
  }
  const auto start = std::chrono::steady_clock::now();
  const ShardSummary summary = write_shards(*source, out, shards, prefix, progress_lines(progress_every));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %lld rows (%zu features", static_cast<long long>(summary.rows), source->feature_dim());
  if (summary.classes > 0) std::printf(", %d classes", summary.classes);
  std::printf(") into %zu shard(s) in %s in %.2f s\n", summary.files.size(), out.c_str(), seconds);
  return kExitOk;
}

}  // namespace mpiddp
