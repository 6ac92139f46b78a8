// What cudnn_library.cpp asks of the process's cuDNN, checked without a GPU:
// the sub-libraries opened up front, and the CUDA major version it was built for.
#include <catch2/catch.hpp>

#include "cuda/cudnn_requirements.hpp"

using namespace mpiddp::cuda;

TEST_CASE("cuDNN's sub-libraries are named for its major version", "[cudnn]") {
  const auto nine = cudnn_sublibraries(9);
  CHECK(nine == std::vector<std::string>{"libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9",
                                         "libcudnn_engines_precompiled.so.9",
                                         "libcudnn_engines_runtime_compiled.so.9"});
  const auto eight = cudnn_sublibraries(8);
  CHECK(eight.size() == 4);
  CHECK(eight[2] == "libcudnn_cnn_infer.so.8");
}

TEST_CASE("a cuDNN built for another CUDA major version is refused with both versions", "[cudnn]") {
  CHECK(cudart_mismatch(13000, 13000).empty());
  CHECK(cudart_mismatch(13020, 13000).empty());  // minor versions may differ
  const std::string problem = cudart_mismatch(12080, 13000);
  CHECK(problem == "this cuDNN is built for CUDA 12.8, mpiddp for CUDA 13.0 (install the cuDNN for CUDA 13)");
}
