// Input-file parsing on top of Boost.Program_options: one schema describes every
// key once (type, target field, default, help) and serves the INI file, the
// command-line overrides, the resolved-config dump and the --help reference.
#include "mpiddp/config/config.hpp"

#include <boost/program_options.hpp>
#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"
#include "mpiddp/config/rules.hpp"
#include "ini_lines.hpp"

namespace po = boost::program_options;

namespace mpiddp {

std::optional<std::uint64_t> parse_whole_number(const std::string& text) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || at != end) return std::nullopt;
  return value;
}

namespace {

std::string format_value(const std::string& v) { return v; }
std::string format_value(bool v) { return v ? "true" : "false"; }
std::string format_value(double v) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof(text), v).ptr;  // shortest exact form
  return std::string(text, end);
}
template <class T>
std::string format_value(T v) { return std::to_string(v); }

[[noreturn]] void bad(const std::string& where, const std::string& key, const std::string& why) {
  throw InputError(where + ": key '" + key + "': " + why);
}

// Where each key's value came from: the command line wins over the input file,
// and an error names the one the value was read from.
class Origin {
 public:
  Origin(std::string file, std::set<std::string> from_command_line)
      : file_(std::move(file)), command_line_(std::move(from_command_line)) {}
  std::string of(const std::string& key) const {
    return file_.empty() || command_line_.count(key) ? "command line" : file_;
  }

 private:
  std::string file_;
  std::set<std::string> command_line_;
};

// The values a numeric key accepts: from min to max, either end open or closed.
// Floating-point keys must also be finite (inf and nan parse, but cannot be meant).
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false, max_open = false;

  bool holds(double v) const {
    return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max);
  }
  // "at least 1", "in (0, 1]": for errors ("must be ...") and --help.
  std::string text() const {
    if (std::isinf(max) && !min_open) return "at least " + format_value(min);
    if (std::isinf(max)) return "above " + format_value(min);
    return std::string("in ") + (min_open ? "(" : "[") + format_value(min) + ", " + format_value(max) +
           (max_open ? ")" : "]");
  }
};
Range at_least(double min) { return {min}; }
Range between(double min, double max) { return {min, max}; }
Range above_up_to(double min, double max) { return {min, max, true, false}; }
Range from_below(double min, double max) { return {min, max, false, true}; }  // [min, max)

class Schema {
 public:
  Schema() : options_("input-file keys") {}

  // Plain keys are read straight into their field. An enum-valued key is read as
  // text and parsed by resolve_choices() with its enum's name table; "{}" in its
  // help stands for the allowed values.
  template <class T>
  void add(const std::string& key, T* target, const std::string& help) {
    if constexpr (std::is_enum_v<T>) {
      add_choice(key, target, help);
    } else if constexpr (std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
      add_unsigned(key, target, help);
    } else {
      options_.add_options()(key.c_str(), po::value<T>(target)->default_value(*target, format_value(*target)),
                             help.c_str());
      add_entry(key, [target] { return format_value(*target); });
      if constexpr (std::is_floating_point_v<T>) add_range(key, target, Range{});  // any finite value
    }
  }
  // A numeric key with the values it accepts (the table of ranges is describe()).
  template <class T>
  void add(const std::string& key, T* target, const std::string& help, Range range) {
    static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, "ranges are for numbers");
    const std::string described = help + " (" + range.text() + ")";
    options_.add_options()(key.c_str(), po::value<T>(target)->default_value(*target, format_value(*target)),
                           described.c_str());
    add_entry(key, [target] { return format_value(*target); });
    add_range(key, target, range);
  }

  // An unsigned key is read as text: Boost's conversion takes "-1" as the largest
  // value (a seed of 18446744073709551615 for --train.seed -1), silently.
  template <class T>
  void add_unsigned(const std::string& key, T* target, const std::string& help) {
    std::string* text = &texts_.emplace_back(format_value(*target));
    options_.add_options()(key.c_str(), po::value<std::string>(text)->default_value(*text), help.c_str());
    add_entry(key, [target] { return format_value(*target); });
    resolvers_.push_back([key, target, text](const Origin& origin) {
      const std::optional<std::uint64_t> value = parse_whole_number(*text);
      if (!value || *value > std::numeric_limits<T>::max())
        bad(origin.of(key), key, "'" + *text + "' is not a whole number from 0 to " +
                                     std::to_string(std::numeric_limits<T>::max()));
      *target = static_cast<T>(*value);
    });
  }

  // A list-valued key is read as text and parsed once, by resolve_choices(), into
  // its typed field: the only copy of the setting. The dump and --help show it in
  // its canonical written form.
  template <class T>
  void add_list(const std::string& key, std::vector<T>* target, const std::string& help,
                std::vector<T> (*parse)(const std::string& where, const std::string& text),
                std::string (*format)(const std::vector<T>&)) {
    std::string* text = &texts_.emplace_back(format(*target));
    options_.add_options()(key.c_str(), po::value<std::string>(text)->default_value(*text), help.c_str());
    add_entry(key, [target, format] { return format(*target); });
    resolvers_.push_back(
        [key, target, text, parse](const Origin& origin) { *target = parse(origin.of(key), *text); });
  }

  // Parses every enum-valued and list-valued key's text, in schema order.
  void resolve_choices(const Origin& origin) const {
    for (const auto& resolve : resolvers_) resolve(origin);
  }
  // Checks every numeric key against its range, in schema order.
  void check_ranges(const Origin& origin) const {
    for (const auto& check : range_checks_) check(origin);
  }

  const po::options_description& options() const { return options_; }

  std::string to_ini() const {
    std::ostringstream out;
    std::string section;
    for (const auto& e : entries_) {
      if (e.section != section) {
        out << (section.empty() ? "" : "\n") << "[" << e.section << "]\n";
        section = e.section;
      }
      out << e.key << " = " << e.value() << "\n";
    }
    return out.str();
  }

 private:
  struct Entry {
    std::string section, key;
    std::function<std::string()> value;
  };

  template <class E>
  void add_choice(const std::string& key, E* target, std::string help) {
    std::string* text = &texts_.emplace_back(name_of(*target));
    if (const auto at = help.find("{}"); at != std::string::npos) help.replace(at, 2, choice_list<E>());
    options_.add_options()(key.c_str(), po::value<std::string>(text)->default_value(*text), help.c_str());
    add_entry(key, [target] { return std::string(name_of(*target)); });
    resolvers_.push_back([key, target, text](const Origin& origin) {
      const std::optional<E> value = parse_choice<E>(*text);
      if (!value) bad(origin.of(key), key, "'" + *text + "' is not one of " + choice_list<E>());
      *target = *value;
    });
  }

  template <class T>
  void add_range(const std::string& key, T* target, Range range) {
    range_checks_.push_back([key, target, range](const Origin& origin) {
      const T value = *target;
      if constexpr (std::is_floating_point_v<T>) {
        if (!std::isfinite(value)) bad(origin.of(key), key, "must be a finite number, got " + format_value(value));
      }
      if (!range.holds(static_cast<double>(value)))
        bad(origin.of(key), key, "must be " + range.text() + ", got " + format_value(value));
    });
  }

  void add_entry(const std::string& key, std::function<std::string()> value) {
    const auto dot = key.find('.');
    entries_.push_back({key.substr(0, dot), key.substr(dot + 1), std::move(value)});
  }

  po::options_description options_;
  std::vector<Entry> entries_;
  std::deque<std::string> texts_;  // enum keys' text as read (a deque: addresses stay put)
  std::vector<std::function<void(const Origin&)>> resolvers_;
  std::vector<std::function<void(const Origin&)>> range_checks_;
};

// Upper ends of the ranges below, where a larger value can only be a typo: they
// keep every later conversion (seconds to clock ticks, MiB to bytes) in range.
constexpr double kMaxLearningRate = 1000.0;
constexpr double kMaxBucketMiB = 65536.0;     // 64 GiB in one gradient bucket
constexpr double kMaxSeconds = 1e7;           // about 115 days
constexpr int kMaxThreads = 1024;

// The list-valued keys' parsers (below) and written forms.
std::vector<int> parse_widths(const std::string& where, const std::string& text);
std::vector<std::size_t> parse_input_shape(const std::string& where, const std::string& text);
std::vector<AugmentStep> parse_augment(const std::string& where, const std::string& text);
// Every key once: where it is stored, its help text and, for numbers, the values
// it accepts. This is the one table of ranges; validate() adds the rules between keys.
void describe(Schema& s, Config& c) {
  s.add("data.train", &c.data.train, "training shards: directory, glob or .h5 file");
  s.add("data.test", &c.data.test, "test shards, evaluated after each epoch (empty = none)");
  s.add("data.features", &c.data.features, "features dataset name in each shard");
  s.add("data.labels", &c.data.labels, "labels dataset name in each shard");
  s.add("data.task", &c.data.task, "{}");
  s.add("data.prefetch", &c.data.prefetch, "batches read ahead by the loader thread (not used when reading inline)",
        between(1, 1000));
  s.add("data.loader", &c.data.loader,
        "{}: where batches are read (auto: on a loader thread when the rank trains on a GPU or may run on more "
        "CPUs than its BLAS threads, else inline, in the training thread when a step needs the batch)");
  s.add("data.context", &c.data.context,
        "token shards (mpiddp shard --format bytes|llmc): a sample is a window of context + 1 consecutive tokens "
        "(input: the first context, targets: the last); 0 = row shards (features, labels)",
        between(0, 1 << 20));
  s.add("data.shuffle", &c.data.shuffle, "shuffle each epoch (seed + epoch)");
  s.add("data.drop_last", &c.data.drop_last, "drop the tail instead of padding (DistributedSampler)");
  s.add_list("data.augment", &c.data.augment,
             "training-sample transforms in order, space separated: hflip (flip, p = 0.5), crop(P) (random crop "
             "after zero padding by P pixels), erase(P) (with probability P, default 0.5, zeros over a random box "
             "of 2-33% of the image, aspect 0.3-3.3: RandomErasing); empty = none",
             parse_augment, written_form);
  s.add("model.layers", &c.model.layers,
        "layer list, e.g. 'conv2d(32,3,padding=1) batchnorm2d relu maxpool2d(2) flatten linear(128) relu linear' "
        "(empty = the MLP of model.hidden)");
  s.add_list("model.input_shape", &c.model.input_shape,
             "shape of one sample, C,H,W (or H,W); empty = the shards' sample_shape attribute", parse_input_shape,
             written_form);
  s.add("model.sync_batchnorm", &c.model.sync_batchnorm,
        "BatchNorm statistics over the global batch of all ranks (PyTorch's SyncBatchNorm)");
  s.add_list("model.hidden", &c.model.hidden, "hidden layer widths, comma separated (when model.layers is empty)",
             parse_widths, written_form);
  s.add("model.activation", &c.model.activation, "{}");
  s.add("model.dropout", &c.model.dropout, "dropout probability after hidden activations", from_below(0, 1));
  s.add("model.classes", &c.model.classes, "output classes, 0 = shards' num_classes attribute", at_least(0));
  s.add("model.init", &c.model.init,
        "initial weights: an HDF5 file with /params (scripts/from-torch, or a checkpoint); empty = seeded init");
  s.add("train.batch_size", &c.train.batch_size, "samples per rank per micro-batch", at_least(1));
  s.add("train.accumulate", &c.train.accumulate, "micro-batches per optimizer step", at_least(1));
  s.add("train.epochs", &c.train.epochs, "epochs to train", at_least(1));
  s.add("train.seed", &c.train.seed, "seed of weights, sampler and dropout");
  s.add("train.log_every", &c.train.log_every, "optimizer steps between progress lines", at_least(1));
  s.add("train.trace_steps", &c.train.trace_steps,
        "steps traced to <run.dir>/trace/rank-R.json after train.trace_after warm-up steps, 0 = off", at_least(0));
  s.add("train.trace_after", &c.train.trace_after,
        "steps this process runs before the traced ones (first-touch memory, kernel set-up)", at_least(0));
  s.add("train.eval", &c.train.eval, "evaluate data.test after each epoch");
  s.add("train.threads", &c.train.threads, "BLAS threads per rank, 0 = cores / local ranks", between(0, kMaxThreads));
  s.add("train.cpu_kernels", &c.train.cpu_kernels, "{}: the library of the CPU's matrix products (auto: oneDNN "
        "where this build has it, else OpenBLAS, with own kernels where they suit and oneDNN's Winograd "
        "convolutions where they suit and every rank's CPU has them (AVX-512); onednn: its direct convolutions "
        "for every Conv2d; own: own kernels for every Conv2d that has them; winograd: as auto, refused where a "
        "rank's CPU lacks them, weight gradients direct; winograd_all: as winograd, with Winograd's weight "
        "gradient wherever oneDNN has it (auto: on planes of at most 8x8 outputs, 48 channels or more); "
        "own_winograd: mpiddp's own Winograd convolutions F(2x2,3x3) for every 3x3 stride-1 Conv2d with "
        "channels in multiples of 8, the others as auto; own_winograd4: the same with F(4x4,3x3), which auto "
        "gives such layers (with 1 thread per rank) where some rank's CPU lacks "
        "oneDNN's Winograd convolutions; "
        "tune: the faster per Linear and Conv2d, timed at start-up)");
  s.add("train.blocked_layout", &c.train.blocked_layout,
        "CPU: keep the activations between oneDNN's convolutions, through BatchNorm2d, activations, residual "
        "adds and average pooling, in oneDNN's blocked layout nChw16c (channels in multiples of 16) instead of "
        "changing layout around every convolution; the same bits as false, which keeps NCHW everywhere");
  s.add("train.device", &c.train.device, "{} (auto: a usable GPU, else the CPU)");
  s.add("train.precision", &c.train.precision, "{} matrix products (tf32, bf16: cuda)");
  s.add("train.share_device", &c.train.share_device, "allow more ranks than GPUs per node (dist.backend = mpi)");
  s.add("train.max_steps", &c.train.max_steps, "stop after this many optimizer steps, 0 = none", at_least(0));
  s.add("train.nonfinite", &c.train.nonfinite, "NaN/Inf loss or gradient: {}");
  s.add("train.label_smoothing", &c.train.label_smoothing,
        "training loss: the target is 1 - S on the label plus S / classes on every class (PyTorch's "
        "CrossEntropyLoss(label_smoothing=S)); evaluation reports the plain cross-entropy", between(0, 1));
  s.add("optim.name", &c.optim.name, "{}");
  s.add("optim.lr", &c.optim.lr, "peak learning rate", above_up_to(0, kMaxLearningRate));
  s.add("optim.momentum", &c.optim.momentum, "SGD momentum", from_below(0, 1));
  s.add("optim.nesterov", &c.optim.nesterov, "SGD Nesterov momentum");
  s.add("optim.weight_decay", &c.optim.weight_decay, "L2 (sgd) or decoupled (adamw) weight decay", at_least(0));
  s.add("optim.beta1", &c.optim.beta1, "AdamW beta1", from_below(0, 1));
  s.add("optim.beta2", &c.optim.beta2, "AdamW beta2", from_below(0, 1));
  s.add("optim.eps", &c.optim.eps, "AdamW epsilon", above_up_to(0, 1));
  s.add("optim.schedule", &c.optim.schedule, "{}");
  s.add("optim.warmup_steps", &c.optim.warmup_steps, "linear warm-up steps", at_least(0));
  s.add("optim.step_epochs", &c.optim.step_epochs, "step schedule: epochs between decays", at_least(1));
  s.add("optim.gamma", &c.optim.gamma, "step schedule: decay factor", above_up_to(0, 1));
  s.add("optim.min_lr", &c.optim.min_lr, "cosine schedule: final learning rate, at most optim.lr", at_least(0));
  s.add("ddp.first_bucket_mb", &c.ddp.first_bucket_mb, "first gradient bucket cap (MiB)", above_up_to(0, kMaxBucketMiB));
  s.add("ddp.bucket_mb", &c.ddp.bucket_mb, "later gradient bucket cap (MiB)", above_up_to(0, kMaxBucketMiB));
  s.add("ddp.allreduce_dtype", &c.ddp.allreduce_dtype, "{} (bf16: dist.backend = nccl)");
  s.add("ddp.zero_stage", &c.ddp.zero_stage,
        "0 = every rank keeps the full optimizer state, 1 = each rank keeps 1/world of it (ZeRO stage 1)", between(0, 1));
  s.add("dist.backend", &c.dist.backend, "{} (auto: nccl on GPUs when built with it)");
  s.add("dist.timeout_s", &c.dist.timeout_s, "collective timeout in seconds, 0 = none", between(0, kMaxSeconds));
  s.add("run.dir", &c.run.dir, "output directory");
  s.add("checkpoint.every_epochs", &c.checkpoint.every_epochs, "checkpoint every N epochs, 0 = not by epochs", at_least(0));
  s.add("checkpoint.every_steps", &c.checkpoint.every_steps, "checkpoint every N steps, 0 = not by steps", at_least(0));
  s.add("checkpoint.every_minutes", &c.checkpoint.every_minutes, "checkpoint every N minutes, 0 = not by time",
        between(0, kMaxSeconds / 60));
  s.add("checkpoint.keep", &c.checkpoint.keep, "newest checkpoints kept, 0 = all", at_least(0));
  s.add("checkpoint.keep_every_epochs", &c.checkpoint.keep_every_epochs, "also keep every N-th epoch's, 0 = none",
        at_least(0));
  s.add("debug.fail_rank", &c.debug.fail_rank, "test hook: rank that fails", at_least(-1));
  s.add("debug.fail_step", &c.debug.fail_step, "test hook: global step at which it fails", at_least(-1));
  s.add("debug.fail_mode", &c.debug.fail_mode, "test hook: {}");
  s.add("debug.emulate_device", &c.debug.emulate_device,
        "test hook: train on an emulated GPU (CPU arithmetic, separate memory, host-staged MPI)");
  s.add("debug.sample_log", &c.debug.sample_log,
        "test hook: every rank appends 'epoch global_step rank index padding' per training sample to this path "
        "(%r: the rank; without %r, .rank-R is appended); empty = off");
}

std::vector<int> parse_widths(const std::string& where, const std::string& text) {
  std::vector<int> widths;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto first = item.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    item = item.substr(first, item.find_last_not_of(" \t") - first + 1);
    std::size_t used = 0;
    int width = 0;
    try {
      width = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || width < 1)
      bad(where, "model.hidden", "'" + item + "' is not a positive layer width");
    widths.push_back(width);
  }
  return widths;
}

// "1,28,28" -> {1, 28, 28}: one to three positive sizes.
std::vector<std::size_t> parse_input_shape(const std::string& where, const std::string& text) {
  std::vector<std::size_t> dims;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long value = 0;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && (item[used] == ' ' || item[used] == '\t')) ++used;
    if (used != item.size() || value < 1 || value > (1L << 30))
      bad(where, "model.input_shape", "'" + item + "' is not a positive size (write C,H,W, e.g. 1,28,28)");
    dims.push_back(static_cast<std::size_t>(value));
  }
  if (dims.size() > 3) bad(where, "model.input_shape", "has " + std::to_string(dims.size()) + " sizes; at most 3 (C,H,W)");
  // Each size is below 2^31, their product may still wrap around 64 bits to a plausible count.
  std::size_t count = 1;
  std::string product;
  for (std::size_t d : dims) product += (product.empty() ? "" : " x ") + std::to_string(d);
  for (std::size_t d : dims)
    if (__builtin_mul_overflow(count, d, &count))
      bad(where, "model.input_shape", product + " elements per sample overflow 64 bits");
  return dims;
}

// data.augment: "hflip crop(4) erase(0.5)" -> its steps. Whether crop's padding
// fits the images is known only when the data set is open (augment_image_shape).
std::vector<AugmentStep> parse_augment(const std::string& where, const std::string& text) {
  const std::string key = "data.augment";
  std::vector<AugmentStep> steps;
  std::istringstream in(text);
  std::string item;
  while (in >> item) {
    const auto open = item.find('(');
    const std::string name = item.substr(0, open);
    const std::optional<AugmentKind> kind = parse_choice<AugmentKind>(name);
    if (!kind)
      bad(where, key,
          "'" + item + "' is not a transform (" + choice_list<AugmentKind>() + ", as hflip, crop(P) or erase(P))");
    const bool has_argument = open != std::string::npos;
    if (has_argument && item.back() != ')') bad(where, key, "'" + item + "': no closing ')'");
    const std::string arg = has_argument ? item.substr(open + 1, item.size() - open - 2) : "";
    AugmentStep step;
    step.kind = *kind;
    switch (*kind) {
      case AugmentKind::hflip:
        if (has_argument) bad(where, key, "'" + item + "': hflip takes no argument");
        break;
      case AugmentKind::crop: {
        if (!has_argument) bad(where, key, "'" + item + "': crop needs its padding in pixels, as crop(4)");
        const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), step.padding);
        if (ec != std::errc() || end != arg.data() + arg.size() || arg.empty())
          bad(where, key, "'" + item + "': the padding '" + arg + "' is not a whole number of pixels");
        if (step.padding < 1) bad(where, key, "'" + item + "': the padding must be at least 1 pixel");
        break;
      }
      case AugmentKind::erase: {
        step.probability = 0.5;  // RandomErasing's default
        if (!has_argument) break;
        const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), step.probability);
        if (ec != std::errc() || end != arg.data() + arg.size() || arg.empty() || !(step.probability > 0.0) ||
            step.probability > 1.0)
          bad(where, key, "'" + item + "': the probability '" + arg + "' is not a number in (0, 1]");
        break;
      }
    }
    steps.push_back(step);
  }
  return steps;
}

// The rules between keys, after every key passed its own range.
void validate(Config& c, const Origin& origin) {
  if (!c.model.layers.empty() && c.model.dropout > 0.0)
    bad(origin.of("model.dropout"), "model.dropout",
        "applies to the model.hidden MLP only; with model.layers, write dropout(p) in the list");
  // As model.dropout: a value other than the default would be ignored by a layer list.
  if (!c.model.layers.empty() && c.model.activation != ModelConfig{}.activation)
    bad(origin.of("model.activation"), "model.activation",
        std::string("'") + name_of(c.model.activation) +
            "' applies to the model.hidden MLP only; with model.layers, write the activation (" +
            choice_list<ActivationKind>() + ") in the list");
  if (c.model.classes == 1)
    bad(origin.of("model.classes"), "model.classes",
        "1 class cannot be told apart from anything; use at least 2, or 0 for the shards' num_classes");
  if (c.train.label_smoothing > 0.0 && c.data.task != DataTask::classification)
    bad(origin.of("train.label_smoothing"), "train.label_smoothing",
        "smooths class labels; data.task = " + std::string(name_of(c.data.task)) + " has none (use 0)");
  if (c.optim.min_lr > c.optim.lr)
    bad(origin.of("optim.min_lr"), "optim.min_lr",
        "the final learning rate " + format_value(c.optim.min_lr) + " is above optim.lr = " + format_value(c.optim.lr));
  // AdamW multiplies every weight by (1 - lr * weight_decay) each step: at 1 or more it zeroes or flips them.
  if (c.optim.name == OptimizerKind::adamw && c.optim.lr * c.optim.weight_decay >= 1.0)
    bad(origin.of("optim.weight_decay"), "optim.weight_decay",
        "optim.lr x optim.weight_decay = " + format_value(c.optim.lr * c.optim.weight_decay) +
            " must be below 1 for adamw (each step scales the weights by 1 - lr x weight_decay)");
  check_stated_rules(c, [&origin](const std::string& key) { return origin.of(key); });
  if (c.run.dir.empty()) bad(origin.of("run.dir"), "run.dir", "must not be empty");
  if (c.data.train.empty()) bad(origin.of("data.train"), "data.train", "is required (shard directory, glob or file)");
}

}  // namespace

namespace {
template <class T>
std::string comma_list(const std::vector<T>& values) {
  std::string text;
  for (const T& v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}
}  // namespace

std::string written_form(const std::vector<int>& values) { return comma_list(values); }
std::string written_form(const std::vector<std::size_t>& values) { return comma_list(values); }
std::string written_form(const std::vector<AugmentStep>& steps) {
  std::string text;
  for (const AugmentStep& step : steps) {
    text += (text.empty() ? "" : " ") + std::string(name_of(step.kind));
    if (step.kind == AugmentKind::crop) text += "(" + std::to_string(step.padding) + ")";
    if (step.kind == AugmentKind::erase) text += "(" + format_value(step.probability) + ")";
  }
  return text;
}

namespace {

// A setting is one line of config.ini and of the checkpoint's stored input: a
// newline in a command-line value would add lines (keys, sections) there that a
// resume then reads as settings. Other control characters are refused with it,
// except in model.layers, a list whose layers any blanks separate (a list read
// from a multi-line file): there a newline, CR or tab is a space, as the input
// file's continuation lines are.
std::vector<std::string> one_line_settings(std::vector<std::string> overrides) {
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    const bool layers = overrides[i].rfind("--model.layers=", 0) == 0 || (i > 0 && overrides[i - 1] == "--model.layers");
    if (!layers) continue;
    for (char& c : overrides[i])
      if (c == '\n' || c == '\r') c = ' ';
  }
  refuse_control_characters(overrides);
  return overrides;
}

}  // namespace

void refuse_control_characters(const std::vector<std::string>& args, const std::string& free_text_option) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool is_value = i > 0 && args[i - 1].rfind("--", 0) == 0 && args[i].rfind("--", 0) != 0;
    if (!free_text_option.empty() &&
        ((is_value && args[i - 1] == free_text_option) || args[i].rfind(free_text_option + "=", 0) == 0))
      continue;
    const std::string code = first_control_character(args[i]);
    if (code.empty()) continue;
    const std::string what =
        is_value ? "the value of " + printable(args[i - 1]) : "argument '" + printable(args[i]) + "'";
    throw InputError("command line: " + what + " holds a control character (" + code + "); a setting is one line of text");
  }
}

namespace {

// Stores `in` (when not null: the input file's text, named `path`) after the
// overrides, so the command line wins, then checks everything.
Config parse_config(std::istream* in, const std::string& path, const std::vector<std::string>& overrides) {
  Config config;
  Schema schema;
  describe(schema, config);
  po::variables_map values;
  const std::string where = path.empty() ? "command line" : path;
  const std::vector<std::string> arguments = one_line_settings(overrides);
  try {
    po::store(po::command_line_parser(arguments).options(schema.options()).style(
                  po::command_line_style::unix_style & ~po::command_line_style::allow_guessing).run(),
              values);
  } catch (const po::error& e) {
    throw InputError(std::string("command line: ") + e.what());
  }
  std::set<std::string> from_command_line;
  for (const auto& [key, value] : values)
    if (!value.defaulted()) from_command_line.insert(key);
  const Origin origin(path, from_command_line);
  if (in) {
    std::istringstream joined(join_continuation_lines(*in, path));
    try {
      po::store(po::parse_config_file(joined, schema.options(), false), values);
    } catch (const po::error& e) {
      throw InputError(path + ": " + e.what());
    }
  }
  try {
    po::notify(values);
  } catch (const po::error& e) {
    throw InputError(where + ": " + e.what());
  }
  schema.resolve_choices(origin);
  schema.check_ranges(origin);
  validate(config, origin);
  config.source = path;
  config.resolved_ini = schema.to_ini();
  return config;
}

}  // namespace

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return parse_config(nullptr, path, overrides);
  // A directory opens as an empty stream on Linux: it would train on all defaults.
  // A FIFO would block every rank's open for good (each rank reads the file), a
  // device such as /dev/zero read without end; /dev/null is the usual empty input
  // file (every setting from the command line).
  struct stat info {}, null_device {};
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) throw InputError(path + ": is a directory, not an input file");
    const bool is_null = S_ISCHR(info.st_mode) && ::stat("/dev/null", &null_device) == 0 &&
                         info.st_rdev == null_device.st_rdev;
    if (!S_ISREG(info.st_mode) && !is_null)
      throw InputError(path + ": not a regular file (" + (S_ISFIFO(info.st_mode) ? "a FIFO" : "a device or socket") +
                       "); every rank reads the input file, so it must be a file");
    // Read whole by every rank: a file of settings is kilobytes.
    constexpr off_t kMaxInputBytes = off_t{16} << 20;
    if (S_ISREG(info.st_mode) && info.st_size > kMaxInputBytes)
      throw InputError(path + ": is " + std::to_string(info.st_size) + " bytes; an input file of settings holds at most " +
                       std::to_string(kMaxInputBytes));
  }
  std::ifstream file(path);
  if (!file) throw InputError(path + ": cannot open input file (" + std::strerror(errno) + ")");
  return parse_config(&file, path, overrides);
}

Config load_config_text(const std::string& text, const std::string& where) {
  std::istringstream in(text);
  return parse_config(&in, where, {});
}

std::string config_reference() {
  Config defaults;
  Schema schema;
  describe(schema, defaults);
  std::ostringstream out;
  out << schema.options();
  return out.str();
}

std::map<std::string, std::string> resolved_values(const std::string& resolved_ini) {
  std::map<std::string, std::string> values;
  std::istringstream in(resolved_ini);
  std::string line, section;
  while (std::getline(in, line)) {
    if (!line.empty() && line.front() == '[') {
      section = line.substr(1, line.find(']') - 1);
    } else if (const auto eq = line.find(" = "); eq != std::string::npos) {
      values[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
    }
  }
  return values;
}

}  // namespace mpiddp
