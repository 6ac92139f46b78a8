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
  CHECK(c.optim.name == "adamw");
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
