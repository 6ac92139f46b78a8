// io::guard_mapped_reads on a real mapping of a real file that shrinks under it:
// a read past the new end (SIGBUS) becomes an InputError naming the file, the
// reads before it and after it work, and the guard holds again on the next call
// and on another thread (the loader's). Any other SIGBUS still ends the process
// (checked in a child process).
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "io/mapped_reads.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/data/token_shards.hpp"

namespace {

using mpiddp::InputError;
using mpiddp::io::guard_mapped_reads;

// A file of `pages` pages of the byte 7, mapped read-only, then cut to its first page.
struct ShrunkMapping {
  std::string path;
  int fd = -1;
  const volatile unsigned char* base = nullptr;
  std::size_t length = 0;
  explicit ShrunkMapping(std::size_t pages) {
    char name[] = "/tmp/mpiddp-mapped-XXXXXX";
    fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    path = name;
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    length = pages * page;
    const std::vector<unsigned char> bytes(length, 7);
    REQUIRE(::write(fd, bytes.data(), length) == static_cast<ssize_t>(length));
    void* mapped = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
    REQUIRE(mapped != MAP_FAILED);
    base = static_cast<const volatile unsigned char*>(mapped);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(page)) == 0);  // another process's truncate, as far as the mapping knows
  }
  ~ShrunkMapping() {
    ::munmap(const_cast<unsigned char*>(base), length);
    ::close(fd);
    ::unlink(path.c_str());
  }
};

}  // namespace

TEST_CASE("a read past the end of a mapped file that shrank is an InputError naming the file", "[io]") {
  ShrunkMapping file(3);
  const std::string* reading = &file.path;
  int sum = 0;
  // Inside the page that is left: read as usual.
  guard_mapped_reads([&] { sum += file.base[10]; }, reading, "cut short");
  CHECK(sum == 7);
  // Past it: the fault ends the read with the error, twice in a row (the handler
  // leaves SIGBUS unblocked behind it), and the reads after it still work.
  for (int attempt = 0; attempt < 2; ++attempt) {
    INFO("attempt " << attempt);
    CHECK_THROWS_WITH(guard_mapped_reads([&] { sum += file.base[file.length - 1]; }, reading, "cut short"),
                      file.path + ": cut short");
  }
  guard_mapped_reads([&] { sum += file.base[20]; }, reading, "cut short");
  CHECK(sum == 14);
  // The file being read is the one the pointer names at the fault.
  const std::string other = "/data/other.h5";
  CHECK_THROWS_WITH(guard_mapped_reads(
                        [&] {
                          reading = &other;
                          sum += file.base[file.length / 2];
                        },
                        reading, "gone"),
                    "/data/other.h5: gone");
  // An exception of the read's own passes through unchanged.
  CHECK_THROWS_WITH(guard_mapped_reads([] { throw InputError("row 3: label 12"); }, reading, "cut short"),
                    "row 3: label 12");
}

TEST_CASE("the SIGBUS guard holds on another thread", "[io]") {
  ShrunkMapping file(2);
  std::string error;
  std::thread loader([&] {
    const std::string* reading = &file.path;
    try {
      guard_mapped_reads([&] { (void)file.base[file.length - 1]; }, reading, "cut short");
    } catch (const InputError& e) {
      error = e.what();
    }
  });
  loader.join();
  CHECK(error == file.path + ": cut short");
}

namespace {
// Runs `work` in a child process: how it ended ("signal N" or "exit N").
std::string child_ending(const std::function<void()>& work) {
  const pid_t child = ::fork();
  if (child == 0) {
    work();
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status));
}
// The end of a process that SIGBUS's earlier action got: killed by it, or (under a
// sanitizer, whose handler that was) a report and a non-zero exit. Not an abort
// from an InputError nobody caught, as a wrongly guarded fault would give.
bool ended_by_sigbus(const std::string& ending) {
  return ending == "signal " + std::to_string(SIGBUS) || (ending.rfind("exit ", 0) == 0 && ending != "exit 0");
}
}  // namespace

TEST_CASE("a SIGBUS that is no shrunk file's still ends the process", "[io]") {
  ShrunkMapping file(2);
  const std::string* reading = &file.path;
  guard_mapped_reads([] {}, reading, "cut short");  // the handler is in place
  // A fault outside any guarded read: the action from before (by default, death by SIGBUS).
  const std::string unguarded = child_ending([&] { (void)file.base[file.length - 1]; });
  CHECK(ended_by_sigbus(unguarded));
  // A SIGBUS sent (not a fault), inside a guarded read: not taken for a shrunk file.
  const std::string sent = child_ending([&] { guard_mapped_reads([] { std::raise(SIGBUS); }, reading, "cut short"); });
  CHECK(ended_by_sigbus(sent));
}

// Shards read through HDF5 (token shards here) have no mapping to fault: HDF5
// reads zeros past a cut file's end, so each batch checks the file after reading.
TEST_CASE("a token shard cut under a reader: the next batch is refused, naming it", "[io]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("mpiddp-tokens-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string text = (dir / "text.txt").string();
  {
    std::ofstream out(text, std::ios::binary);
    for (int i = 0; i < 200000; ++i) out.put(static_cast<char>('a' + i % 26));
  }
  auto source = mpiddp::open_byte_source(text);
  mpiddp::write_token_shards(*source, (dir / "shards").string(), 1, "tokens");
  const std::string shard = (dir / "shards" / "tokens-00000-of-00001.h5").string();
  mpiddp::ShardedDataset windows((dir / "shards").string(), 16);
  mpiddp::Batch batch;
  const std::vector<std::int64_t> last{windows.size() - 1, 0};
  windows.read(last, batch);
  CHECK(batch.class_ids[0] == 'a' + (16 * (windows.size() - 1) + 1) % 26);
  std::filesystem::resize_file(shard, std::filesystem::file_size(shard) / 2);
  CHECK_THROWS_WITH(windows.read(last, batch), shard + ": shard was truncated while training");
  std::filesystem::remove_all(dir);
}
