#include "mpiddp/train/same_settings.hpp"

#include <cstdint>
#include <vector>

#include "mpiddp/common/error.hpp"
#include "mpiddp/dist/process_group.hpp"

namespace mpiddp {
namespace {

// FNV-1a, 64 bit: equal texts give equal digests, a difference almost surely shows.
std::uint64_t digest_of(const std::string& text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

// What rank 0 starts with, as one text: the resolved input file and how to start.
std::string settings_text(const Config& config, const std::string& resume) {
  return config.resolved_ini + "\n[command-line]\nresume = " + resume + "\n";
}

std::string first_difference(const std::string& root_text, const std::string& text, int rank) {
  const auto mine = resolved_values(text), root = resolved_values(root_text);
  const std::string absent = "(absent)";
  auto value_in = [&](const auto& values, const std::string& key) {
    const auto found = values.find(key);
    return found == values.end() ? absent : "'" + found->second + "'";
  };
  std::string key;  // the first differing key in name order, from either side
  for (const auto& [k, v] : root)
    if (value_in(mine, k) != "'" + v + "'") { key = k; break; }
  for (const auto& [k, v] : mine)
    if (value_in(root, k) != "'" + v + "'" && (key.empty() || k < key)) { key = k; break; }
  if (key.empty()) key = "(the input file text)";
  return "settings differ between ranks: " + key + " is " + value_in(root, key) + " on rank 0 but " +
         value_in(mine, key) + " on rank " + std::to_string(rank) +
         "; every rank must run the same input file, overrides and --resume";
}

}  // namespace

void check_same_settings(Communicator& comm, const Config& config, const std::string& resume) {
  const std::string text = settings_text(config, resume);
  std::uint64_t root_digest = digest_of(text);
  comm.broadcast(&root_digest, sizeof(root_digest), 0);
  if (comm.allreduce_max(root_digest != digest_of(text) ? 1 : 0) == 0) return;
  // Rare: rank 0's text travels, so the message can name the key.
  std::uint64_t size = text.size();
  comm.broadcast(&size, sizeof(size), 0);
  std::string root_text(static_cast<std::size_t>(size), '\0');
  if (comm.rank() == 0) root_text = text;
  comm.broadcast(root_text.data(), root_text.size(), 0);
  agree_or_fail(comm, [&] {
    if (root_text != text) throw InputError(first_difference(root_text, text, comm.rank()));
  });
}

}  // namespace mpiddp
