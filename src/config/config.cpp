// Input-file parsing on top of Boost.Program_options: one schema describes every
// key once (type, target field, default, help) and serves the INI file, the
// command-line overrides, the resolved-config dump and the --help reference.
#include "mpiddp/config/config.hpp"

#include <boost/program_options.hpp>
#include <charconv>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <type_traits>

#include "mpiddp/common/error.hpp"
#include "mpiddp/config/rules.hpp"

namespace po = boost::program_options;

namespace mpiddp {
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
    } else {
      options_.add_options()(key.c_str(), po::value<T>(target)->default_value(*target, format_value(*target)),
                             help.c_str());
      add_entry(key, [target] { return format_value(*target); });
    }
  }

  // Parses every enum-valued key's text, in schema order.
  void resolve_choices(const std::string& where) const {
    for (const auto& resolve : resolvers_) resolve(where);
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
    resolvers_.push_back([key, target, text](const std::string& where) {
      const std::optional<E> value = parse_choice<E>(*text);
      if (!value) bad(where, key, "'" + *text + "' is not one of " + choice_list<E>());
      *target = *value;
    });
  }

  void add_entry(const std::string& key, std::function<std::string()> value) {
    const auto dot = key.find('.');
    entries_.push_back({key.substr(0, dot), key.substr(dot + 1), std::move(value)});
  }

  po::options_description options_;
  std::vector<Entry> entries_;
  std::deque<std::string> texts_;  // enum keys' text as read (a deque: addresses stay put)
  std::vector<std::function<void(const std::string&)>> resolvers_;
};

void describe(Schema& s, Config& c) {
  s.add("data.train", &c.data.train, "training shards: directory, glob or .h5 file");
  s.add("data.test", &c.data.test, "test shards, evaluated after each epoch (empty = none)");
  s.add("data.features", &c.data.features, "features dataset name in each shard");
  s.add("data.labels", &c.data.labels, "labels dataset name in each shard");
  s.add("data.task", &c.data.task, "{}");
  s.add("data.prefetch", &c.data.prefetch, "batches read ahead by the loader thread");
  s.add("data.shuffle", &c.data.shuffle, "shuffle each epoch (seed + epoch)");
  s.add("data.drop_last", &c.data.drop_last, "drop the tail instead of padding (DistributedSampler)");
  s.add("model.hidden", &c.model.hidden, "hidden layer widths, comma separated");
  s.add("model.activation", &c.model.activation, "{}");
  s.add("model.dropout", &c.model.dropout, "dropout probability after hidden activations");
  s.add("model.classes", &c.model.classes, "output classes, 0 = shards' num_classes attribute");
  s.add("train.batch_size", &c.train.batch_size, "samples per rank per micro-batch");
  s.add("train.accumulate", &c.train.accumulate, "micro-batches per optimizer step");
  s.add("train.epochs", &c.train.epochs, "epochs to train");
  s.add("train.seed", &c.train.seed, "seed of weights, sampler and dropout");
  s.add("train.log_every", &c.train.log_every, "optimizer steps between progress lines");
  s.add("train.eval", &c.train.eval, "evaluate data.test after each epoch");
  s.add("train.threads", &c.train.threads, "BLAS threads per rank, 0 = cores / local ranks");
  s.add("train.device", &c.train.device, "{} (auto: a usable GPU, else the CPU)");
  s.add("train.precision", &c.train.precision, "{} matrix products (tf32, bf16: cuda)");
  s.add("train.share_device", &c.train.share_device, "allow more ranks than GPUs per node (dist.backend = mpi)");
  s.add("train.max_steps", &c.train.max_steps, "stop after this many optimizer steps, 0 = none");
  s.add("train.nonfinite", &c.train.nonfinite, "NaN/Inf loss or gradient: {}");
  s.add("optim.name", &c.optim.name, "{}");
  s.add("optim.lr", &c.optim.lr, "peak learning rate");
  s.add("optim.momentum", &c.optim.momentum, "SGD momentum");
  s.add("optim.nesterov", &c.optim.nesterov, "SGD Nesterov momentum");
  s.add("optim.weight_decay", &c.optim.weight_decay, "L2 (sgd) or decoupled (adamw) weight decay");
  s.add("optim.beta1", &c.optim.beta1, "AdamW beta1");
  s.add("optim.beta2", &c.optim.beta2, "AdamW beta2");
  s.add("optim.eps", &c.optim.eps, "AdamW epsilon");
  s.add("optim.schedule", &c.optim.schedule, "{}");
  s.add("optim.warmup_steps", &c.optim.warmup_steps, "linear warm-up steps");
  s.add("optim.step_epochs", &c.optim.step_epochs, "step schedule: epochs between decays");
  s.add("optim.gamma", &c.optim.gamma, "step schedule: decay factor");
  s.add("optim.min_lr", &c.optim.min_lr, "cosine schedule: final learning rate");
  s.add("ddp.first_bucket_mb", &c.ddp.first_bucket_mb, "first gradient bucket cap (MiB)");
  s.add("ddp.bucket_mb", &c.ddp.bucket_mb, "later gradient bucket cap (MiB)");
  s.add("ddp.allreduce_dtype", &c.ddp.allreduce_dtype, "{} (bf16: dist.backend = nccl)");
  s.add("dist.backend", &c.dist.backend, "{} (auto: nccl on GPUs when built with it)");
  s.add("dist.timeout_s", &c.dist.timeout_s, "collective timeout in seconds, 0 = none");
  s.add("run.dir", &c.run.dir, "output directory");
  s.add("checkpoint.every_epochs", &c.checkpoint.every_epochs, "checkpoint every N epochs, 0 = not by epochs");
  s.add("checkpoint.every_steps", &c.checkpoint.every_steps, "checkpoint every N steps, 0 = not by steps");
  s.add("checkpoint.every_minutes", &c.checkpoint.every_minutes, "checkpoint every N minutes, 0 = not by time");
  s.add("checkpoint.keep", &c.checkpoint.keep, "newest checkpoints kept, 0 = all");
  s.add("checkpoint.keep_every_epochs", &c.checkpoint.keep_every_epochs, "also keep every N-th epoch's, 0 = none");
  s.add("debug.fail_rank", &c.debug.fail_rank, "test hook: rank that fails");
  s.add("debug.fail_step", &c.debug.fail_step, "test hook: global step at which it fails");
  s.add("debug.fail_mode", &c.debug.fail_mode, "test hook: {}");
  s.add("debug.emulate_device", &c.debug.emulate_device,
        "test hook: train on an emulated GPU (CPU arithmetic, separate memory, host-staged MPI)");
}

template <class T>
void require_at_least(const std::string& where, const std::string& key, T value, T min) {
  if (value < min) bad(where, key, "must be at least " + format_value(min) + ", got " + format_value(value));
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

void validate(Config& c, const std::string& where) {
  require_at_least(where, "data.prefetch", c.data.prefetch, 1);
  c.model.hidden_sizes = parse_widths(where, c.model.hidden);
  if (!(c.model.dropout >= 0.0 && c.model.dropout < 1.0)) bad(where, "model.dropout", "must be in [0, 1)");
  require_at_least(where, "model.classes", c.model.classes, 0);
  require_at_least(where, "train.batch_size", c.train.batch_size, 1);
  require_at_least(where, "train.accumulate", c.train.accumulate, 1);
  require_at_least(where, "train.epochs", c.train.epochs, 1);
  require_at_least(where, "train.log_every", c.train.log_every, 1);
  require_at_least(where, "train.threads", c.train.threads, 0);
  require_at_least<std::int64_t>(where, "train.max_steps", c.train.max_steps, 0);
  if (!(c.optim.lr > 0.0)) bad(where, "optim.lr", "must be positive");
  if (!(c.optim.momentum >= 0.0 && c.optim.momentum < 1.0)) bad(where, "optim.momentum", "must be in [0, 1)");
  require_at_least(where, "optim.weight_decay", c.optim.weight_decay, 0.0);
  if (!(c.optim.beta1 >= 0.0 && c.optim.beta1 < 1.0)) bad(where, "optim.beta1", "must be in [0, 1)");
  if (!(c.optim.beta2 >= 0.0 && c.optim.beta2 < 1.0)) bad(where, "optim.beta2", "must be in [0, 1)");
  if (!(c.optim.eps > 0.0)) bad(where, "optim.eps", "must be positive");
  require_at_least<std::int64_t>(where, "optim.warmup_steps", c.optim.warmup_steps, 0);
  require_at_least(where, "optim.step_epochs", c.optim.step_epochs, 1);
  require_at_least(where, "optim.min_lr", c.optim.min_lr, 0.0);
  if (!(c.ddp.first_bucket_mb > 0.0)) bad(where, "ddp.first_bucket_mb", "must be positive");
  if (!(c.ddp.bucket_mb > 0.0)) bad(where, "ddp.bucket_mb", "must be positive");
  check_stated_rules(c, where);
  if (c.run.dir.empty()) bad(where, "run.dir", "must not be empty");
  require_at_least(where, "checkpoint.every_epochs", c.checkpoint.every_epochs, 0);
  require_at_least<std::int64_t>(where, "checkpoint.every_steps", c.checkpoint.every_steps, 0);
  require_at_least(where, "checkpoint.every_minutes", c.checkpoint.every_minutes, 0.0);
  require_at_least(where, "checkpoint.keep", c.checkpoint.keep, 0);
  require_at_least(where, "checkpoint.keep_every_epochs", c.checkpoint.keep_every_epochs, 0);
  require_at_least(where, "dist.timeout_s", c.dist.timeout_s, 0.0);
  if (c.data.train.empty()) bad(where, "data.train", "is required (shard directory, glob or file)");
}

}  // namespace

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  Config config;
  Schema schema;
  describe(schema, config);
  po::variables_map values;
  const std::string where = path.empty() ? "command line" : path;
  try {
    // Stored first, so the command line wins over the file.
    po::store(po::command_line_parser(overrides).options(schema.options()).style(
                  po::command_line_style::unix_style & ~po::command_line_style::allow_guessing).run(),
              values);
  } catch (const po::error& e) {
    throw InputError(std::string("command line: ") + e.what());
  }
  if (!path.empty()) {
    std::ifstream file(path);
    if (!file) throw InputError(path + ": cannot open input file");
    try {
      po::store(po::parse_config_file(file, schema.options(), false), values);
    } catch (const po::error& e) {
      throw InputError(path + ": " + e.what());
    }
  }
  try {
    po::notify(values);
  } catch (const po::error& e) {
    throw InputError(where + ": " + e.what());
  }
  schema.resolve_choices(where);
  validate(config, where);
  config.source = path;
  config.resolved_ini = schema.to_ini();
  return config;
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
