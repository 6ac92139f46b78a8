#include "io/filtered_chunks.hpp"

#include <zlib.h>

#include <cstdint>
#include <vector>

#include "io/hdf5_util.hpp"
#include "io/stored_extent.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"

namespace mpiddp::h5 {
namespace {

// HDF5's own advice is chunks of 10 KiB to 1 MiB; h5py's automatic ones stay below 1 MiB.
constexpr std::size_t kMaxChunkBytes = std::size_t{64} << 20;

const char* const kRewrite = "; rewrite the file plain (h5repack -f NONE IN OUT) or make it with mpiddp shard";

struct Pipeline {
  std::vector<H5Z_filter_t> filters;  // in the order they were applied on writing
};

// The filters, refused unless each is one whose effect on a chunk's size is
// known: deflate (bounded inflation below), shuffle (none) and fletcher32 (4
// bytes). Only fletcher32 may follow deflate, so every step before the inflation
// is a strip of 4 bytes and the inflated stream never needs keeping.
Pipeline read_pipeline(hid_t plist, const std::string& where) {
  Pipeline p;
  const int count = H5Pget_nfilters(plist);
  if (count < 0) throw InputError(where + ": unreadable filter pipeline");
  bool deflated = false;
  for (int i = 0; i < count; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t values = 0;
    char name[64] = {0};
    const H5Z_filter_t id = H5Pget_filter2(plist, static_cast<unsigned>(i), &flags, &values, nullptr, sizeof(name),
                                           name, &config);
    const bool known = id == H5Z_FILTER_DEFLATE || id == H5Z_FILTER_SHUFFLE || id == H5Z_FILTER_FLETCHER32;
    if (!known)
      throw InputError(where + " is stored through HDF5 filter " + std::to_string(id) + " (" +
                       printable(name) + "), whose output mpiddp cannot bound or check" + kRewrite);
    if (deflated && id != H5Z_FILTER_FLETCHER32)
      throw InputError(where + ": a second deflate or a shuffle after deflate in its filter pipeline" + kRewrite);
    deflated = deflated || id == H5Z_FILTER_DEFLATE;
    p.filters.push_back(id);
  }
  return p;
}

std::string position_text(const std::vector<hsize_t>& offset) {
  std::string text;
  for (const hsize_t o : offset) text += (text.empty() ? "" : ", ") + std::to_string(o);
  return "(" + text + ")";
}

// Inflates `in` without keeping the output; its length, or `limit` + 1 where it
// would pass `limit`; -1 for a stream that is damaged or ends early.
long long inflated_length(const unsigned char* in, std::size_t size, std::size_t limit) {
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return -1;
  static thread_local std::vector<unsigned char> scratch(1 << 20);
  z.next_in = const_cast<unsigned char*>(in);
  z.avail_in = static_cast<uInt>(size);
  std::size_t total = 0;
  int rc = Z_OK;
  while (rc == Z_OK && total <= limit) {
    z.next_out = scratch.data();
    z.avail_out = static_cast<uInt>(scratch.size());
    rc = inflate(&z, Z_NO_FLUSH);
    total += scratch.size() - z.avail_out;
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // input used up before the stream's end
  }
  inflateEnd(&z);
  if (total > limit) return static_cast<long long>(limit) + 1;
  return rc == Z_STREAM_END ? static_cast<long long>(total) : -1;
}

// The chunk grid of a dataset, and what sizes its chunks are checked against.
struct ChunkGrid {
  std::vector<hsize_t> dims, chunk;
  std::size_t chunk_bytes = 0;
  bool partial_unfiltered = false;  // H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS: edge chunks stored raw
  hsize_t file_bytes = 0;
};

// A chunk and its stored size, as the chunk index says.
struct StoredChunk {
  std::vector<hsize_t> offset;
  hsize_t bytes = 0;
};

// The most a chunk's writer can have stored: deflate's worst case over the chunk
// and the checksums before it, plus those after it.
hsize_t most_stored_bytes(const Pipeline& p, std::size_t chunk_bytes) {
  std::size_t checksums = 0;
  for (const H5Z_filter_t f : p.filters) checksums += f == H5Z_FILTER_FLETCHER32 ? 4 : 0;
  return compressBound(static_cast<uLong>(chunk_bytes + checksums)) + checksums;
}

// Every chunk's stored size, checked before any is read: no larger than its writer
// could have made it, and all of them together no larger than the file. Chunks
// that share bytes (an index pointing many chunks at one small stream, each then
// inflated: hours for a 2 MB file) claim more than the file holds; within the
// file, inflating them all costs at most deflate's best ratio (1032) times its size.
std::vector<StoredChunk> locate_chunks(hid_t dataset, const Pipeline& p, const ChunkGrid& grid,
                                       const std::string& where) {
  std::vector<StoredChunk> chunks;
  const hsize_t most = most_stored_bytes(p, grid.chunk_bytes);
  hsize_t total = 0;
  std::vector<hsize_t> offset(grid.dims.size(), 0);
  for (;;) {  // every chunk of the grid, in row-major order (check_stored_extent found them all written)
    StoredChunk c{offset, 0};
    const std::string at = where + ": the chunk at " + position_text(offset);
    if (H5Dget_chunk_storage_size(dataset, offset.data(), &c.bytes) < 0) throw InputError(at + " is unreadable");
    if (c.bytes > most || c.bytes > grid.file_bytes)
      throw InputError(at + " claims " + std::to_string(c.bytes) + " stored bytes, more than the file's " +
                       std::to_string(grid.file_bytes) + " or its chunk's " + std::to_string(most) +
                       " at most (damaged or hostile)" + kRewrite);
    total += c.bytes;
    if (total > grid.file_bytes)
      throw InputError(where + ": its chunks claim more stored bytes than the file's " +
                       std::to_string(grid.file_bytes) + " (chunks sharing bytes: a damaged or crafted chunk index)" +
                       kRewrite);
    chunks.push_back(std::move(c));
    std::size_t d = grid.dims.size();
    while (d-- > 0) {
      offset[d] += grid.chunk[d];
      if (offset[d] < grid.dims[d]) break;
      offset[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) return chunks;
  }
}

// One stored chunk undone step by step, in sizes: it must yield its chunk's bytes.
void check_chunk(hid_t dataset, const Pipeline& p, const ChunkGrid& grid, const StoredChunk& chunk,
                 const std::string& where) {
  const std::string at = where + ": the chunk at " + position_text(chunk.offset);
  const std::size_t chunk_bytes = grid.chunk_bytes;
  bool partial = false;
  for (std::size_t d = 0; d < chunk.offset.size(); ++d)
    partial = partial || chunk.offset[d] + grid.chunk[d] > grid.dims[d];
  std::vector<unsigned char> raw(static_cast<std::size_t>(chunk.bytes));
  std::uint32_t mask = 0;
  if (H5Dread_chunk(dataset, H5P_DEFAULT, chunk.offset.data(), &mask, raw.data()) < 0)
    throw InputError(at + " is unreadable");
  long long size = static_cast<long long>(chunk.bytes);
  const bool unfiltered = partial && grid.partial_unfiltered;
  for (std::size_t i = unfiltered ? 0 : p.filters.size(); i-- > 0;) {
    if (mask & (1u << i)) continue;  // skipped for this chunk on writing
    if (p.filters[i] == H5Z_FILTER_FLETCHER32) {
      if (size < 4) throw InputError(at + " is too short for its checksum" + kRewrite);
      size -= 4;
    } else if (p.filters[i] == H5Z_FILTER_DEFLATE) {
      std::size_t limit = chunk_bytes;  // plus the checksums applied before deflate
      for (std::size_t j = 0; j < i; ++j)
        if (p.filters[j] == H5Z_FILTER_FLETCHER32 && !(mask & (1u << j))) limit += 4;
      size = inflated_length(raw.data(), static_cast<std::size_t>(size), limit);
      if (size < 0) throw InputError(at + " is not a whole deflate stream (damaged or cut short)" + kRewrite);
      if (size > static_cast<long long>(limit))
        throw InputError(at + " inflates past its " + std::to_string(chunk_bytes) + " bytes (damaged or hostile)" +
                         kRewrite);
    }
  }
  if (size != static_cast<long long>(chunk_bytes))
    throw InputError(at + " holds " + std::to_string(size) + " bytes where a chunk has " +
                     std::to_string(chunk_bytes) + " (damaged or hostile)" + kRewrite);
}

}  // namespace

void check_filtered_chunks(hid_t dataset, const std::vector<hsize_t>& dims, const std::string& where) {
  Handle plist(H5Dget_create_plist(dataset), H5Pclose);
  if (!plist || H5Pget_layout(plist.get()) != H5D_CHUNKED || H5Pget_nfilters(plist.get()) == 0) return;
  const Pipeline pipeline = read_pipeline(plist.get(), where);
  ChunkGrid grid;
  grid.dims = dims;
  grid.chunk.resize(dims.size());
  if (dims.empty() ||
      H5Pget_chunk(plist.get(), static_cast<int>(grid.chunk.size()), grid.chunk.data()) != static_cast<int>(dims.size()))
    throw InputError(where + ": unreadable chunk layout");
  unsigned options = 0;
  if (H5Pget_chunk_opts(plist.get(), &options) >= 0)
    grid.partial_unfiltered = (options & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS) != 0;
  Handle type(H5Dget_type(dataset), H5Tclose);
  double bytes = static_cast<double>(H5Tget_size(type.get()));
  for (const hsize_t c : grid.chunk) bytes *= static_cast<double>(c);
  // Every read inflates a whole chunk (and HDF5 keeps 1 MiB of them): a chunk of
  // GBs, even of a small data set, costs that much memory and time per batch.
  if (bytes > static_cast<double>(kMaxChunkBytes))
    throw InputError(where + " is stored in compressed chunks of " + extent_text(grid.chunk) + " values (" +
                     std::to_string(static_cast<unsigned long long>(bytes)) + " bytes), above " +
                     std::to_string(kMaxChunkBytes >> 20) + " MiB: each read would inflate a whole chunk" + kRewrite);
  grid.chunk_bytes = static_cast<std::size_t>(bytes);
  Handle file(H5Iget_file_id(dataset), H5Fclose);
  if (!file || H5Fget_filesize(file.get(), &grid.file_bytes) < 0) throw InputError(where + ": unreadable file size");
  for (const StoredChunk& chunk : locate_chunks(dataset, pipeline, grid, where))
    check_chunk(dataset, pipeline, grid, chunk, where);
}

}  // namespace mpiddp::h5
