#pragma once
// Launchers for the embedding kernels (embedding_kernels.cu), on the given
// stream: EmbeddingOps' semantics, gradient sums in a fixed order.
#include <cuda_runtime.h>

#include "cuda/cuda_scratch.hpp"
#include "embedding_ops.hpp"

namespace mpiddp::cuda {

void embedding_gather(const float* ids, const float* table, float* y, const EmbeddingGeometry& g, cudaStream_t s);
// The table gradient's temporaries: token ids and row numbers (unsorted, then
// sorted by token) and the radix sort's own workspace.
struct TokenSortScratch {
  Scratch<int> tokens, rows;
  Scratch<unsigned char> temp;
};

void embedding_scatter_add(const float* ids, const float* dy, float* dtable, bool accumulate,
                           const EmbeddingGeometry& g, TokenSortScratch& scratch, cudaStream_t s);
void embedding_add_positions(const float* x, const float* table, float* y, const PositionGeometry& g, cudaStream_t s);
void embedding_position_grad(const float* dy, float* dtable, bool accumulate, const PositionGeometry& g,
                             cudaStream_t s);

}  // namespace mpiddp::cuda
