// Input files, overrides and their errors.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"
#include "mpiddp/config/config.hpp"

using namespace mpiddp;

namespace {
std::string write_ini(const std::string& text) {
  char name[] = "/tmp/mpiddp-config-XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(name) << text;
  return name;
}
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  const std::string path = write_ini(text);
  try {
    load_config(path, overrides);
  } catch (const InputError& e) {
    std::remove(path.c_str());
    return e.what();
  }
  std::remove(path.c_str());
  return "";
}
}  // namespace

TEST_CASE("INI values, defaults and command-line overrides", "[config]") {
  const std::string path = write_ini("[data]\ntrain = /d/train\n[optim]\nlr = 0.5 # comment\nname = adamw\n[model]\nhidden = 64, 32\n");
  const Config c = load_config(path, {"--optim.lr", "0.25", "--train.batch_size", "32"});
  std::remove(path.c_str());
  CHECK(c.data.train == "/d/train");
  CHECK(c.optim.lr == 0.25);  // the command line wins
  CHECK(c.optim.name == OptimizerKind::adamw);
  CHECK(c.train.batch_size == 32);
  CHECK(c.train.epochs == 10);  // default
  CHECK(c.model.hidden == std::vector<int>{64, 32});
  CHECK(c.resolved_ini.find("[optim]\nname = adamw\nlr = 0.25\n") != std::string::npos);
}

TEST_CASE("bad input files name the file and the key", "[config]") {
  const std::string base = "[data]\ntrain = x\n";
  CHECK_THAT(error_of(base + "[train]\nbogus = 1\n"), Catch::Contains("train.bogus"));
  CHECK_THAT(error_of(base + "[train]\nbatch_size = abc\n"), Catch::Contains("train.batch_size"));
  CHECK_THAT(error_of(base + "[train]\nbatch_size = 0\n"),
             Catch::Contains("'train.batch_size': must be at least 1, got 0"));
  CHECK_THAT(error_of(base + "[optim]\nname = rmsprop\n"), Catch::Contains("'optim.name'"));
  CHECK_THAT(error_of(base + "[model]\nhidden = 64,x\n"), Catch::Contains("'model.hidden'"));
  CHECK_THAT(error_of("[train]\nepochs = 1\n"), Catch::Contains("'data.train': is required"));
  CHECK_THAT(error_of(base, {"--optim.nope", "1"}), Catch::Contains("optim.nope"));
  CHECK_THAT(error_of(base + "[train]\nbatch_size = 0\n"), Catch::Contains("/tmp/mpiddp-config-"));
  CHECK_THROWS_WITH(load_config("/nonexistent.ini", {}), Catch::Contains("/nonexistent.ini: cannot open"));
}

namespace {
// Every value of an enum-valued key parses to its enum value, is written back
// under the same name in the resolved input file, and a wrong value is refused
// naming the key and every allowed value.
template <class E, class Field>
void check_choice_key(const std::string& key, Field field) {
  const std::string section = key.substr(0, key.find('.')), name = key.substr(key.find('.') + 1);
  for (const auto& choice : ChoiceNames<E>::table) {
    INFO(key << " = " << choice.name);
    const Config c = load_config("", {"--data.train", "x", "--" + key, choice.name});
    CHECK(field(c) == choice.value);
    CHECK(c.resolved_ini.find("[" + section + "]\n") != std::string::npos);
    CHECK(c.resolved_ini.find("\n" + name + " = " + choice.name + "\n") != std::string::npos);
    CHECK(load_config("", {"--data.train", "x", "--" + key, choice.name}).resolved_ini == c.resolved_ini);
  }
  const std::string error = error_of("[data]\ntrain = x\n[" + section + "]\n" + name + " = bogus\n");
  CHECK_THAT(error, Catch::Contains("/tmp/mpiddp-config-"));
  CHECK_THAT(error, Catch::Contains("key '" + key + "': 'bogus' is not one of " + choice_list<E>()));
}
}  // namespace

TEST_CASE("enum-valued keys round-trip and name the allowed values", "[config]") {
  check_choice_key<DataTask>("data.task", [](const Config& c) { return c.data.task; });
  check_choice_key<LoaderPlacement>("data.loader", [](const Config& c) { return c.data.loader; });
  check_choice_key<ActivationKind>("model.activation", [](const Config& c) { return c.model.activation; });
  check_choice_key<DeviceChoice>("train.device", [](const Config& c) { return c.train.device; });
  check_choice_key<NonfinitePolicy>("train.nonfinite", [](const Config& c) { return c.train.nonfinite; });
  check_choice_key<OptimizerKind>("optim.name", [](const Config& c) { return c.optim.name; });
  check_choice_key<ScheduleKind>("optim.schedule", [](const Config& c) { return c.optim.schedule; });
  check_choice_key<DistBackend>("dist.backend", [](const Config& c) { return c.dist.backend; });
  check_choice_key<FailMode>("debug.fail_mode", [](const Config& c) { return c.debug.fail_mode; });
  // These two have rules with other keys; their defaults (device auto, backend auto) let every value pass.
  check_choice_key<Precision>("train.precision", [](const Config& c) { return c.train.precision; });
  check_choice_key<AllreduceDtype>("ddp.allreduce_dtype", [](const Config& c) { return c.ddp.allreduce_dtype; });
}

TEST_CASE("the allowed values are listed as before", "[config]") {
  CHECK(choice_list<DeviceChoice>() == "auto | cpu | cuda");
  CHECK(choice_list<FailMode>() == "none | throw | exit | erred_exit | hang | nan | signal");
  CHECK(choice_list<Precision>() == "fp32 | tf32 | bf16");
  CHECK_THAT(error_of("[data]\ntrain = x\n[optim]\nname = rmsprop\n"),
             Catch::EndsWith(": key 'optim.name': 'rmsprop' is not one of sgd | adamw"));
  // An override is checked like a file value, and named as the command line.
  CHECK_THAT(error_of("[data]\ntrain = x\n", {"--train.device", "gpu"}),
             Catch::Contains("key 'train.device': 'gpu' is not one of auto | cpu | cuda"));
}

TEST_CASE("rules between keys, each refused with the file and the key", "[config]") {
  const std::string base = "[data]\ntrain = x\n";
  CHECK_THAT(error_of(base, {"--dist.backend", "mpi", "--ddp.allreduce_dtype", "bf16"}),
             Catch::EndsWith("key 'ddp.allreduce_dtype': bf16 needs dist.backend = nccl (MPI has no bf16 sum)"));
  CHECK_THAT(error_of(base, {"--train.device", "cpu", "--dist.backend", "nccl"}),
             Catch::EndsWith("key 'dist.backend': nccl needs train.device = cuda (or auto on a GPU node)"));
  CHECK_THAT(error_of(base, {"--train.device", "cpu", "--train.precision", "tf32"}),
             Catch::EndsWith("key 'train.precision': tf32 needs train.device = cuda (the CPU computes in fp32)"));
  // auto may still become the GPU and NCCL: refused later, at set-up, if it does not.
  CHECK(error_of(base, {"--train.precision", "bf16", "--ddp.allreduce_dtype", "bf16"}).empty());
  CHECK(error_of(base, {"--train.device", "cuda", "--dist.backend", "nccl"}).empty());
}

TEST_CASE("model.input_shape parses C,H,W and refuses what is not a shape; model.dropout is the MLP's", "[config]") {
  const std::string base = "[data]\ntrain = x\n";
  CHECK(load_config("", {"--data.train", "x", "--model.input_shape", "3, 32,32"}).model.input_shape ==
        std::vector<std::size_t>{3, 32, 32});
  CHECK_THAT(error_of(base, {"--model.input_shape", "1,x,28"}),
             Catch::EndsWith("key 'model.input_shape': 'x' is not a positive size (write C,H,W, e.g. 1,28,28)"));
  CHECK_THAT(error_of(base, {"--model.input_shape", "1,0,28"}), Catch::Contains("'0' is not a positive size"));
  CHECK_THAT(error_of(base, {"--model.input_shape", "1,2,3,4"}),
             Catch::EndsWith("key 'model.input_shape': has 4 sizes; at most 3 (C,H,W)"));
  CHECK_THAT(error_of(base, {"--model.layers", "flatten linear", "--model.dropout", "0.2"}),
             Catch::Contains("key 'model.dropout': applies to the model.hidden MLP only"));
}

TEST_CASE("the resolved input file reads back as section.key values", "[config]") {
  const std::string path = write_ini("[data]\ntrain = /x\n");
  const Config config = load_config(path, {"--optim.lr", "0.2"});
  std::remove(path.c_str());
  const auto values = resolved_values(config.resolved_ini);
  // What the ranks compare at start-up and format 3 checkpoints are read by.
  CHECK(values.at("data.train") == "/x");
  CHECK(values.at("optim.lr") == "0.2");
  CHECK(values.at("train.batch_size") == "64");
  CHECK(values.count("lr") == 0);
}

TEST_CASE("values that parse but cannot be meant are refused naming the key", "[config]") {
  const std::string base = "[data]\ntrain = x\n";
  struct Case {
    const char* key;
    const char* value;
    const char* expected;
  };
  const Case cases[] = {
      {"optim.lr", "inf", "key 'optim.lr': must be a finite number, got inf"},
      {"optim.lr", "nan", "key 'optim.lr': must be a finite number, got nan"},
      {"optim.lr", "-0.1", "key 'optim.lr': must be in (0, 1000], got -0.1"},
      {"optim.lr", "0", "key 'optim.lr': must be in (0, 1000], got 0"},
      {"optim.gamma", "-0.5", "key 'optim.gamma': must be in (0, 1], got -0.5"},
      {"optim.gamma", "0", "key 'optim.gamma': must be in (0, 1]"},
      {"optim.gamma", "1.5", "key 'optim.gamma': must be in (0, 1]"},
      {"optim.min_lr", "-1", "key 'optim.min_lr': must be at least 0, got -1"},
      {"optim.min_lr", "0.5", "key 'optim.min_lr': the final learning rate 0.5 is above optim.lr = 0.01"},
      {"optim.momentum", "1", "key 'optim.momentum': must be in [0, 1), got 1"},
      {"optim.momentum", "nan", "key 'optim.momentum': must be a finite number"},
      {"optim.beta1", "-0.1", "key 'optim.beta1': must be in [0, 1)"},
      {"optim.beta2", "1", "key 'optim.beta2': must be in [0, 1)"},
      {"optim.eps", "0", "key 'optim.eps': must be in (0, 1]"},
      {"optim.eps", "inf", "key 'optim.eps': must be a finite number"},
      {"optim.weight_decay", "-1e-4", "key 'optim.weight_decay': must be at least 0"},
      {"optim.weight_decay", "inf", "key 'optim.weight_decay': must be a finite number"},
      {"optim.warmup_steps", "-5", "key 'optim.warmup_steps': must be at least 0, got -5"},
      {"optim.step_epochs", "0", "key 'optim.step_epochs': must be at least 1, got 0"},
      {"model.dropout", "1", "key 'model.dropout': must be in [0, 1), got 1"},
      {"model.dropout", "nan", "key 'model.dropout': must be a finite number"},
      {"model.classes", "1", "key 'model.classes': 1 class cannot be told apart"},
      {"model.classes", "-3", "key 'model.classes': must be at least 0"},
      {"data.prefetch", "0", "key 'data.prefetch': must be in [1, 1000], got 0"},
      {"train.threads", "5000", "key 'train.threads': must be in [0, 1024], got 5000"},
      {"train.max_steps", "-1", "key 'train.max_steps': must be at least 0"},
      {"train.label_smoothing", "1.5", "key 'train.label_smoothing': must be in [0, 1], got 1.5"},
      {"train.label_smoothing", "-0.1", "key 'train.label_smoothing': must be in [0, 1], got -0.1"},
      {"ddp.bucket_mb", "0", "key 'ddp.bucket_mb': must be in (0, 65536], got 0"},
      {"ddp.first_bucket_mb", "1e300", "key 'ddp.first_bucket_mb': must be in (0, 65536]"},
      {"ddp.bucket_mb", "-inf", "key 'ddp.bucket_mb': must be a finite number, got -inf"},
      {"dist.timeout_s", "inf", "key 'dist.timeout_s': must be a finite number"},
      {"dist.timeout_s", "-1", "key 'dist.timeout_s': must be in [0, 1e+07], got -1"},
      {"checkpoint.every_minutes", "nan", "key 'checkpoint.every_minutes': must be a finite number"},
      {"checkpoint.keep", "-1", "key 'checkpoint.keep': must be at least 0"},
      {"debug.fail_rank", "-2", "key 'debug.fail_rank': must be at least -1"},
  };
  for (const Case& c : cases) {
    INFO(c.key << " = " << c.value);
    const std::string key(c.key), section = key.substr(0, key.find('.')), name = key.substr(key.find('.') + 1);
    const std::string in_file = error_of(base + "[" + section + "]\n" + name + " = " + c.value + "\n");
    CHECK_THAT(in_file, Catch::StartsWith("/tmp/mpiddp-config-") && Catch::Contains(c.expected));
    // The same value on the command line names the command line, although a file was given.
    CHECK_THAT(error_of(base, {"--" + key, c.value}),
               Catch::StartsWith("command line: ") && Catch::Contains(c.expected));
  }
  CHECK_THAT(error_of(base + "task = regression\n[train]\nlabel_smoothing = 0.1\n"),
             Catch::Contains("key 'train.label_smoothing': smooths class labels; data.task = regression has none"));
  // AdamW scales the weights by 1 - lr x weight_decay every step.
  CHECK_THAT(error_of(base + "[optim]\nname = adamw\nlr = 0.5\nweight_decay = 2\n"),
             Catch::Contains("key 'optim.weight_decay': optim.lr x optim.weight_decay = 1 must be below 1"));
}

TEST_CASE("the edges of the ranges are accepted", "[config]") {
  const Config c = load_config("", {"--data.train", "x", "--optim.gamma", "1", "--optim.lr", "0.5", "--optim.min_lr",
                                    "0.5", "--model.dropout", "0.99", "--optim.momentum", "0.999", "--dist.timeout_s",
                                    "0", "--model.classes", "2", "--train.threads", "1024"});
  CHECK(c.optim.gamma == 1.0);
  CHECK(c.optim.min_lr == c.optim.lr);
  CHECK(load_config("", {"--data.train", "x", "--optim.name", "adamw", "--optim.weight_decay", "0.5"}).optim.weight_decay == 0.5);
}

TEST_CASE("a directory as the input file is refused", "[config]") {
  CHECK_THROWS_WITH(load_config("/tmp", {}), "/tmp: is a directory, not an input file");
}

TEST_CASE("error text from files is made printable and short", "[config]") {
  CHECK(printable("plain text, 42%") == "plain text, 42%");
  CHECK(printable(std::string("a\x1b[2Jb\0c\x7f", 9)) == "a\\x1b[2Jb\\x00c\\x7f");
  CHECK(printable("caf\xc3\xa9 \xff\xc3") == "caf\xc3\xa9 \\xff\\xc3");  // UTF-8 kept, stray bytes escaped
  CHECK(printable("\xc2\x9b" "2J") == "\\xc2\\x9b" "2J");  // C1 control (CSI) in UTF-8 form
  CHECK(printable("\xff\x80\x81 \xf5\x80\x80\x80") == "\\xff\\x80\\x81 \\xf5\\x80\\x80\\x80");  // never UTF-8 leads
  const std::string long_text(5000, 'x');
  CHECK_THAT(printable(long_text), Catch::StartsWith(std::string(kMaxMessageBytes, 'x') + " ... (4000 more bytes)"));
  CHECK(printable(long_text).size() < kMaxMessageBytes + 40);
}

TEST_CASE("data.augment parses into its steps, and refuses what it cannot mean", "[config][augment]") {
  const std::string base = "[data]\ntrain = x\n";
  const std::string path = write_ini(base + "augment = hflip  crop(4)\thflip\n");
  const Config c = load_config(path, {});
  std::remove(path.c_str());
  CHECK(c.data.augment ==
        std::vector<AugmentStep>{{AugmentKind::hflip, 0}, {AugmentKind::crop, 4}, {AugmentKind::hflip, 0}});
  CHECK(load_config("", {"--data.train", "x"}).data.augment.empty());
  CHECK(load_config("", {"--data.train", "x", "--data.augment", "crop(2) hflip"}).data.augment ==
        std::vector<AugmentStep>{{AugmentKind::crop, 2}, {AugmentKind::hflip, 0}});
  CHECK(load_config("", {"--data.train", "x", "--data.augment", "erase erase(0.25) erase(1)"}).data.augment ==
        std::vector<AugmentStep>{{AugmentKind::erase, 0, 0.5}, {AugmentKind::erase, 0, 0.25}, {AugmentKind::erase, 0, 1.0}});
  CHECK(written_form(std::vector<AugmentStep>{{AugmentKind::erase, 0, 0.5}, {AugmentKind::hflip, 0, 0.0}}) ==
        "erase(0.5) hflip");
  for (const char* wrong : {"vflip", "crop(0)", "crop(x)", "crop", "crop()", "crop(-1)", "crop(2", "crop(2)x",
                            "hflip(1)", "crop(99999999999)", "hflip,crop(2)", "erase(0)", "erase(1.5)", "erase()",
                            "erase(nan)", "erase(-0.5)", "erase(0.5", "erase(p)", "erase(inf)"}) {
    INFO(wrong);
    CHECK_THAT(error_of(base, {"--data.augment", wrong}), Catch::Contains("command line: key 'data.augment': '"));
  }
  CHECK_THAT(error_of(base + "augment = crop(0)\n"), Catch::Contains("key 'data.augment'") &&
                                                         Catch::Contains("at least 1 pixel"));
}

TEST_CASE("ddp.zero_stage: 0 by default, 0 or 1, anything else refused by name", "[config]") {
  const std::string base = "[data]\ntrain = x\n";
  const std::string path = write_ini(base + "[ddp]\nzero_stage = 1\n");
  CHECK(load_config(path, {}).ddp.zero_stage == 1);
  CHECK(load_config(path, {"--ddp.zero_stage", "0"}).ddp.zero_stage == 0);
  std::remove(path.c_str());
  const std::string defaults = write_ini(base);
  CHECK(load_config(defaults, {}).ddp.zero_stage == 0);
  std::remove(defaults.c_str());
  for (const char* bad : {"2", "-1", "3", "1.5", "one"})
    CHECK_THAT(error_of(base + "[ddp]\nzero_stage = " + bad + "\n"), Catch::Contains("ddp.zero_stage"));
}

TEST_CASE("model.input_shape sizes multiplying past 64 bits and model.activation with model.layers are refused",
          "[config]") {
  const std::string base = "[data]\ntrain = x\n";
  // Each size is allowed; their product wraps around 2^64 to 784.
  CHECK_THAT(error_of(base, {"--model.input_shape", "3498256,1954213,26983373"}),
             Catch::EndsWith("key 'model.input_shape': 3498256 x 1954213 x 26983373 elements per sample overflow 64 bits"));
  CHECK_THAT(error_of(base, {"--model.input_shape", "1073741824,1073741824,16"}), Catch::Contains("overflow 64 bits"));
  CHECK(error_of(base, {"--model.input_shape", "1073741824,1073741824,15"}).empty());
  CHECK_THAT(error_of(base, {"--model.layers", "flatten linear", "--model.activation", "gelu"}),
             Catch::EndsWith("key 'model.activation': 'gelu' applies to the model.hidden MLP only; with model.layers, "
                             "write the activation (relu | gelu | tanh) in the list"));
  // The default, as <run.dir>/config.ini writes it, goes with a layer list (as model.dropout = 0 does).
  CHECK(error_of(base + "[model]\nlayers = flatten linear\nactivation = relu\ndropout = 0\n").empty());
  CHECK(error_of(base, {"--model.activation", "tanh"}).empty());
}

TEST_CASE("list settings are stored once, parsed, and dumped in their written form", "[config]") {
  const Config c = load_config("", {"--data.train", "x", "--model.hidden", " 64 , 32 ", "--model.input_shape",
                                    "3, 32,32", "--data.augment", "crop(2)   hflip"});
  CHECK(c.model.hidden == std::vector<int>{64, 32});
  CHECK(c.model.input_shape == std::vector<std::size_t>{3, 32, 32});
  CHECK(c.resolved_ini.find("\nhidden = 64,32\n") != std::string::npos);
  CHECK(c.resolved_ini.find("\ninput_shape = 3,32,32\n") != std::string::npos);
  CHECK(c.resolved_ini.find("\naugment = crop(2) hflip\n") != std::string::npos);
  // The dump reads back to the same values (a resumed run's settings compare equal).
  const Config defaults = load_config("", {"--data.train", "x"});
  CHECK(defaults.model.hidden == std::vector<int>{256, 128});
  CHECK(defaults.model.input_shape.empty());
  CHECK(defaults.resolved_ini.find("\nhidden = 256,128\n") != std::string::npos);
  CHECK(written_form(c.data.augment) == "crop(2) hflip");
  CHECK(load_config("", {"--data.train", "x", "--model.hidden", ""}).model.hidden.empty());
}
