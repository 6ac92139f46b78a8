// Convolution on the GPU through cuDNN's descriptor API, on the compute stream.
// Each layer's scratch keeps its descriptors, the algorithms chosen for its
// geometry and the workspace they need; they are chosen again only when the
// batch size or the precision changes.
//
// Algorithms: cuDNN's heuristics (cudnnGet*Algorithm_v7), not cudnnFind: Find
// times the candidates, so its choice can change from run to run and with it the
// rounding of the result; the heuristics answer the same for the same geometry,
// GPU and cuDNN version. Of their ranked answers the first that is deterministic
// (CUDNN_DETERMINISTIC: no atomics, so e.g. BWD_DATA_ALGO_1 / BWD_FILTER_ALGO_1
// rather than ALGO_0) and fits kWorkspaceLimit is used; the project promises the
// same bits for the same input file, seed and world size.
//
// Precision: fp32 runs with CUDNN_FMA_MATH (no TF32 tensor cores, as cuBLAS's
// default math for the dense layers); tf32 with CUDNN_DEFAULT_MATH (TF32 allowed).
// bf16 convolves fp32 tensors with TF32 math too, for now: a bf16 data path would
// need bf16 copies of x, w and dy like the dense layers keep (left for later).
// The bias is added, and its gradient summed, by mpiddp's own kernels
// (conv_kernels.cu), in a fixed order.
#include <algorithm>

#include "cuda/check.hpp"
#include "conv_kernels.hpp"
#include "cuda/cuda_device.hpp"
#include "conv_ops.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "cuda/cudnn_api.hpp"
#include "mpiddp/common/error.hpp"
#include "cuda/teardown.hpp"

namespace mpiddp::cuda {
namespace {

// An algorithm needing more workspace than this is passed over.
constexpr std::size_t kWorkspaceLimit = std::size_t{1} << 30;

bool same_geometry(const ConvGeometry& a, const ConvGeometry& b) {
  return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w && a.out_c == b.out_c && a.kh == b.kh &&
         a.kw == b.kw && a.stride == b.stride && a.padding == b.padding;
}

std::string geometry_text(const ConvGeometry& g) {
  return "x " + std::to_string(g.n) + "x" + std::to_string(g.c) + "x" + std::to_string(g.h) + "x" +
         std::to_string(g.w) + ", " + std::to_string(g.out_c) + " filters " + std::to_string(g.kh) + "x" +
         std::to_string(g.kw) + ", stride " + std::to_string(g.stride) + ", padding " + std::to_string(g.padding);
}

// One conv2d layer's descriptors, algorithms and workspace.
struct ConvScratch final : LayerScratch {
  explicit ConvScratch(const CudnnApi& cudnn) : api(cudnn) {
    check(api.cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check(api.cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check(api.cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check(api.cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
  }
  ~ConvScratch() override {  // host-side objects only: never waits, never throws
    if (conv) api.cudnnDestroyConvolutionDescriptor(conv);
    if (w) api.cudnnDestroyFilterDescriptor(w);
    if (y) api.cudnnDestroyTensorDescriptor(y);
    if (x) api.cudnnDestroyTensorDescriptor(x);
  }
  const CudnnApi& api;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  bool planned = false;
  ConvGeometry shape;
  Precision precision = Precision::fp32;
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  // The math type each chosen algorithm was ranked with (set on `conv` before
  // its call, as PyTorch does), and the one `conv` holds now.
  cudnnMathType_t forward_math{}, data_math{}, filter_math{}, conv_math{};
  std::size_t forward_bytes = 0, data_bytes = 0, filter_bytes = 0;
  Scratch<unsigned char> workspace;
};

// The first of cuDNN's ranked candidates (then `fallback`) that succeeds, is
// deterministic, may run in the precision's math and whose workspace, asked of
// workspace_of(algo, &bytes), fits the limit; `math` gets the math type it was
// ranked with (with tensor cores allowed; in fp32 always FMA: cuDNN's default
// math would allow TF32 on Ampere and later).
template <class Perf, class Algo, class WorkspaceOf>
Algo choose(const Perf* perf, int found, Algo fallback, bool tensor_ops_allowed, WorkspaceOf workspace_of,
            std::size_t& bytes, cudnnMathType_t& math, const char* what, const ConvGeometry& g) {
  auto fits = [&](Algo algo) {
    std::size_t need = 0;
    if (workspace_of(algo, &need) != CUDNN_STATUS_SUCCESS || need > kWorkspaceLimit) return false;
    bytes = need;
    return true;
  };
  for (int i = 0; i < found; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC) continue;
    // Never a down-conversion of float data to half (below TF32's precision).
    if (p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
    if (!tensor_ops_allowed && p.mathType == CUDNN_TENSOR_OP_MATH) continue;
    if (fits(p.algo)) {
      math = tensor_ops_allowed ? p.mathType : CUDNN_FMA_MATH;
      // The size was asked under the descriptor's math; the ranking's own
      // figure is for the math type the algorithm will run with.
      bytes = std::max(bytes, p.memory);
      if (bytes > kWorkspaceLimit) continue;
      return p.algo;
    }
  }
  math = tensor_ops_allowed ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  if (fits(fallback)) return fallback;
  throw RuntimeError(std::string("cuDNN offers no deterministic ") + what + " algorithm within " +
                     std::to_string(kWorkspaceLimit >> 20) + " MiB of workspace for " + geometry_text(g));
}

class CudnnConvOps final : public ConvOps {
 public:
  explicit CudnnConvOps(CudaDevice& device) : device_(device) {}
  ~CudnnConvOps() override {
    if (handle_ && !unwinding()) api_->cudnnDestroy(handle_);
  }

  // The first conv2d layer placed on the device opens cuDNN (InputError, one
  // line, when this process has none) and makes the handle.
  std::unique_ptr<LayerScratch> make_scratch() override {
    if (!handle_) {
      api_ = &cudnn_api();
      check(api_->cudnnCreate(&handle_), "cudnnCreate");
      check(api_->cudnnSetStream(handle_, device_.compute_stream()), "cudnnSetStream");
    }
    return std::make_unique<ConvScratch>(*api_);
  }

  void conv_forward(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g,
                    LayerScratch* scratch) override {
    if (g.n == 0) return;
    ConvScratch& s = plan(scratch, g);
    const float one = 1.0f, zero = 0.0f;
    use_math(s, s.forward_math);
    check(api_->cudnnConvolutionForward(handle_, &one, s.x, x, s.w, weight, s.conv, s.forward, workspace(s),
                                        s.forward_bytes, &zero, s.y, y),
          "cudnnConvolutionForward");
    add_channel_bias(y, bias, g, device_.compute_stream());
  }

  void conv_backward_params(const float* x, const float* dy, float* dweight, float* dbias, const ConvGeometry& g,
                            bool accumulate, LayerScratch* scratch) override {
    if (g.n == 0) return;
    ConvScratch& s = plan(scratch, g);
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    use_math(s, s.filter_math);
    check(api_->cudnnConvolutionBackwardFilter(handle_, &one, s.x, x, s.y, dy, s.conv, s.backward_filter,
                                               workspace(s), s.filter_bytes, &beta, s.w, dweight),
          "cudnnConvolutionBackwardFilter");
    channel_sums(dy, dbias, g, accumulate, device_.compute_stream());
  }

  void conv_backward_input(const float* dy, const float* weight, float* dx, const ConvGeometry& g,
                           LayerScratch* scratch) override {
    if (g.n == 0) return;
    ConvScratch& s = plan(scratch, g);
    const float one = 1.0f, zero = 0.0f;
    use_math(s, s.data_math);
    check(api_->cudnnConvolutionBackwardData(handle_, &one, s.w, weight, s.y, dy, s.conv, s.backward_data,
                                             workspace(s), s.data_bytes, &zero, s.x, dx),
          "cudnnConvolutionBackwardData");
  }

 private:

  // Puts the math type an algorithm was chosen with on the descriptor before its call.
  void use_math(ConvScratch& s, cudnnMathType_t math) {
    if (s.conv_math == math) return;
    check(api_->cudnnSetConvolutionMathType(s.conv, math), "cudnnSetConvolutionMathType");
    s.conv_math = math;
  }

  static void* workspace(ConvScratch& s) {
    return s.workspace.get(std::max({s.forward_bytes, s.data_bytes, s.filter_bytes}));
  }

  // The layer's scratch, its descriptors and algorithms set for g and the precision.
  ConvScratch& plan(LayerScratch* scratch, const ConvGeometry& g) {
    ConvScratch& s = *static_cast<ConvScratch*>(scratch);
    const Precision precision = device_.precision();
    if (s.planned && s.precision == precision && same_geometry(s.shape, g)) return s;
    const CudnnApi& api = *api_;
    s.planned = false;
    check(api.cudnnSetTensor4dDescriptor(s.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g.n, g.c, g.h, g.w),
          "cudnnSetTensor4dDescriptor (x)");
    check(api.cudnnSetTensor4dDescriptor(s.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g.n, g.out_c, g.out_h(), g.out_w()),
          "cudnnSetTensor4dDescriptor (y)");
    check(api.cudnnSetFilter4dDescriptor(s.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, g.out_c, g.c, g.kh, g.kw),
          "cudnnSetFilter4dDescriptor");
    // PyTorch's Conv2d is a cross-correlation (the kernel is not flipped).
    check(api.cudnnSetConvolution2dDescriptor(s.conv, g.padding, g.padding, g.stride, g.stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    const bool tensor_ops = precision != Precision::fp32;
    s.conv_math = tensor_ops ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    check(api.cudnnSetConvolutionMathType(s.conv, s.conv_math), "cudnnSetConvolutionMathType");

    int found = 0;
    cudnnConvolutionFwdAlgoPerf_t forward[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    check(api.cudnnGetConvolutionForwardAlgorithm_v7(handle_, s.x, s.w, s.conv, s.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                     &found, forward),
          "cudnnGetConvolutionForwardAlgorithm_v7");
    s.forward = choose(
        forward, found, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, tensor_ops,
        [&](cudnnConvolutionFwdAlgo_t algo, std::size_t* bytes) {
          return api.cudnnGetConvolutionForwardWorkspaceSize(handle_, s.x, s.w, s.conv, s.y, algo, bytes);
        },
        s.forward_bytes, s.forward_math, "forward", g);

    cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    check(api.cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, s.w, s.y, s.conv, s.x,
                                                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, data),
          "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    s.backward_data = choose(
        data, found, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, tensor_ops,
        [&](cudnnConvolutionBwdDataAlgo_t algo, std::size_t* bytes) {
          return api.cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, s.w, s.y, s.conv, s.x, algo, bytes);
        },
        s.data_bytes, s.data_math, "backward-data", g);

    cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    check(api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, s.x, s.y, s.conv, s.w,
                                                            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, filter),
          "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    s.backward_filter = choose(
        filter, found, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, tensor_ops,
        [&](cudnnConvolutionBwdFilterAlgo_t algo, std::size_t* bytes) {
          return api.cudnnGetConvolutionBackwardFilterWorkspaceSize(handle_, s.x, s.y, s.conv, s.w, algo, bytes);
        },
        s.filter_bytes, s.filter_math, "backward-filter", g);

    s.shape = g;
    s.precision = precision;
    s.planned = true;
    return s;
  }

  CudaDevice& device_;
  const CudnnApi* api_ = nullptr;
  cudnnHandle_t handle_ = nullptr;
};

std::unique_ptr<ConvOps> make_cuda_conv_ops(Device& device) { return std::make_unique<CudnnConvOps>(as_cuda(device)); }
const bool registered = register_ops<ConvOps>(DeviceKind::cuda, make_cuda_conv_ops);

}  // namespace

}  // namespace mpiddp::cuda
