#pragma once
// Embeddings of token sequences: a table lookup by token id (nn.Embedding) and a
// learned table added per position (nanoGPT's wpe). Token ids arrive as the
// bytes of 32-bit integers in a float array (token_windows.hpp): they are read
// back as integers, never converted. Gradient sums run in a fixed order (no
// float atomics), so a run repeats bit for bit.
#include <cstddef>
#include <cstring>

#include "mpiddp/common/hd.hpp"
#include "mpiddp/device/device.hpp"

namespace mpiddp {

struct EmbeddingGeometry {
  int rows = 0;     // samples x positions
  int d = 0;        // embedding width
  int entries = 0;  // num_embeddings (the table's rows)
};

struct PositionGeometry {
  int samples = 0;
  int positions = 0;
  int d = 0;
};

class EmbeddingOps : public OpFamily {
 public:
  // y[r] = table[id[r]] (ids: `rows` int32 in float storage, each below `entries`).
  virtual void gather(const float* ids, const float* table, float* y, const EmbeddingGeometry& g) = 0;
  // dtable (+)= dy[r] added at row id[r], r in order (overwritten unless accumulate).
  virtual void scatter_add(const float* ids, const float* dy, float* dtable, bool accumulate,
                           const EmbeddingGeometry& g) = 0;
  // y[s][t] = x[s][t] + table[t]
  virtual void add_positions(const float* x, const float* table, float* y, const PositionGeometry& g) = 0;
  // dtable[t] (+)= sum over samples s (in order) of dy[s][t]
  virtual void position_grad(const float* dy, float* dtable, bool accumulate, const PositionGeometry& g) = 0;
};

// The token id stored at `ids[r]`: its bytes, read as the int32 they are.
MPIDDP_HD int token_id(const float* ids, std::size_t r) {
  int id;
  memcpy(&id, ids + r, sizeof(id));
  return id;
}

}  // namespace mpiddp
