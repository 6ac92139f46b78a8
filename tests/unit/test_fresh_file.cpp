// fresh_file (common/fresh_file.hpp): what stands at the name (a symlink planted
// there, a FIFO, a stale file) is replaced by a new regular file and never
// written through; appending refuses a link or a FIFO.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "mpiddp/common/fresh_file.hpp"

namespace {
std::string contents(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/mpiddp-fresh.XXXXXX";
    path = ::mkdtemp(name);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

void write_through(std::FILE* f, const char* text) {
  REQUIRE(f);
  std::fputs(text, f);
  REQUIRE(std::fclose(f) == 0);
}
}  // namespace

TEST_CASE("fresh file: a planted symlink or FIFO is replaced, its target untouched", "[common]") {
  TempDir dir;
  const std::string victim = dir.path + "/victim", name = dir.path + "/out.tmp", fifo = dir.path + "/fifo.tmp";
  { std::ofstream(victim) << "PRECIOUS"; }
  REQUIRE(::symlink(victim.c_str(), name.c_str()) == 0);
  write_through(mpiddp::create_fresh_file(name), "new");
  CHECK(contents(victim) == "PRECIOUS");
  CHECK(contents(name) == "new");
  struct stat st {};
  REQUIRE(::lstat(name.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  write_through(mpiddp::create_fresh_file(fifo), "x");  // would block on open without the unlink
  CHECK(contents(fifo) == "x");
}

TEST_CASE("fresh file: appending refuses a symlink and a FIFO, extends a regular file", "[common]") {
  TempDir dir;
  const std::string victim = dir.path + "/victim", link = dir.path + "/log", fifo = dir.path + "/fifo",
                    plain = dir.path + "/plain";
  { std::ofstream(victim) << "PRECIOUS"; }
  REQUIRE(::symlink(victim.c_str(), link.c_str()) == 0);
  CHECK(mpiddp::open_to_append(link) == nullptr);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(mpiddp::open_to_append(fifo) == nullptr);  // never blocks
  CHECK(contents(victim) == "PRECIOUS");
  write_through(mpiddp::open_to_append(plain), "a");
  write_through(mpiddp::open_to_append(plain), "b");
  CHECK(contents(plain) == "ab");
}

TEST_CASE("fresh file: an atomic write replaces the name, never writes through a link", "[common]") {
  TempDir dir;
  const std::string victim = dir.path + "/victim", name = dir.path + "/latest";
  { std::ofstream(victim) << "PRECIOUS"; }
  for (bool durable : {false, true}) {
    // A link at the temporary's name and one at the name itself: both replaced.
    REQUIRE(::symlink(victim.c_str(), (name + ".tmp").c_str()) == 0);
    REQUIRE(::symlink(victim.c_str(), name.c_str()) == 0);
    mpiddp::write_file_atomically(name, durable ? "durable\n" : "plain\n", durable);
    CHECK(contents(victim) == "PRECIOUS");
    CHECK(contents(name) == (durable ? "durable\n" : "plain\n"));
    struct stat st {};
    REQUIRE(::lstat(name.c_str(), &st) == 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK(::access((name + ".tmp").c_str(), F_OK) != 0);
    REQUIRE(::unlink(name.c_str()) == 0);
  }
  CHECK_THROWS_WITH(mpiddp::write_file_atomically(dir.path + "/no-such-dir/x", "x", false),
                    Catch::Contains("no-such-dir/x.tmp: cannot write"));
}
