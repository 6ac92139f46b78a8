// Input files, overrides and their errors.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "mpiddp/common/error.hpp"
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
  CHECK(c.model.hidden_sizes == std::vector<int>{64, 32});
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
  CHECK(choice_list<FailMode>() == "none | throw | exit | hang | nan | signal");
  CHECK(choice_list<Precision>() == "fp32 | tf32 | bf16");
  CHECK_THAT(error_of("[data]\ntrain = x\n[optim]\nname = rmsprop\n"),
             Catch::EndsWith(": key 'optim.name': 'rmsprop' is not one of sgd | adamw"));
  // An override is checked like a file value, and the file is still named.
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
