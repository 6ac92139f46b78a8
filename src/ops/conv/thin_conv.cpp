#include "thin_conv.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include "conv_columns.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"

namespace mpiddp::cpu::thin_conv {
namespace {

// The sets this CPU runs, less AVX-512's where MPIDDP_MAX_CPU_ISA=AVX2 holds them
// to AVX2 (as ONEDNN_MAX_CPU_ISA does oneDNN's): another CPU's kernels, emulated.
std::vector<ThinKernels> sets_allowed() {
  std::vector<ThinKernels> sets = thin_kernel_sets();
  const char* limit = std::getenv("MPIDDP_MAX_CPU_ISA");
  if (!limit || !*limit) return sets;
  std::string isa(limit);
  std::transform(isa.begin(), isa.end(), isa.begin(), [](unsigned char c) { return std::toupper(c); });
  if (isa == "AVX2") std::erase_if(sets, [](const ThinKernels& k) { return std::string(k.isa) == "AVX-512"; });
  else if (isa != "AVX512" && isa != "AVX512_CORE" && isa != "ALL")
    throw InputError("MPIDDP_MAX_CPU_ISA=" + printable(limit) + ": use AVX2 or AVX512");
  return sets;
}

const std::vector<ThinKernels>& kernel_sets() {
  static const std::vector<ThinKernels> sets = sets_allowed();
  return sets;
}

struct Scratch final : LayerScratch {
  ThinKernels set;
  // One sample's columns: the weight gradient's rows (the kernel's, then a row of
  // ones whose products sum dy for the bias gradient, then zero rows up to a
  // multiple of kThinRowBlock), each `stride` floats.
  std::vector<float> columns;
  std::vector<float> lanes;  // the weight gradient's partial sums, out_c x rows x kThinLanes
  ConvGeometry shaped_for;   // the geometry `columns` is laid out for (n aside)
  std::size_t stride = 0;
  int kernel_rows = 0, grad_rows = 0, positions = 0;

  explicit Scratch(const ThinKernels& kernels) : set(kernels) {}

  void shape(const ConvGeometry& g) {
    if (stride != 0 && g.c == shaped_for.c && g.h == shaped_for.h && g.w == shaped_for.w && g.kh == shaped_for.kh &&
        g.kw == shaped_for.kw && g.stride == shaped_for.stride && g.padding == shaped_for.padding)
      return;
    shaped_for = g;
    positions = g.out_h() * g.out_w();
    stride = (static_cast<std::size_t>(positions) + kThinLanes - 1) / kThinLanes * kThinLanes;
    kernel_rows = g.c * g.kh * g.kw;
    grad_rows = (kernel_rows + 1 + kThinRowBlock - 1) / kThinRowBlock * kThinRowBlock;
    columns.assign(static_cast<std::size_t>(grad_rows) * stride, 0.0f);
    std::fill_n(columns.begin() + static_cast<std::ptrdiff_t>(kernel_rows * stride), positions, 1.0f);
  }
  // Sample x's columns in place; returns them with `rows` rows.
  ThinColumns columns_of(const float* x, const ConvGeometry& g, int rows) {
    image_to_columns(x, g, columns.data(), stride, 0);
    return {columns.data(), stride, rows, positions};
  }
};

// The kThinLanes partial sums in lane order.
float lane_sum(const float* lanes) {
  float sum = 0.0f;
  for (int j = 0; j < kThinLanes; ++j) sum += lanes[j];
  return sum;
}

}  // namespace

bool available() { return !kernel_sets().empty(); }
const char* isa() { return available() ? kernel_sets().front().isa : "none"; }

bool supports(const ConvGeometry& g) {
  return available() && static_cast<long long>(g.c) * g.kh * g.kw <= kMaxRows;
}

bool suits(const ConvGeometry& g, int threads) {
  return supports(g) && threads == 1 && g.c * g.kh * g.kw <= kSuitedRows;
}

std::unique_ptr<LayerScratch> make_scratch(const ThinKernels* set) {
  if (!set && !available())
    throw RuntimeError("mpiddp's own convolution kernels need an x86-64 CPU with AVX2 and FMA");
  return std::make_unique<Scratch>(set ? *set : kernel_sets().front());
}

void forward(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g,
             LayerScratch& scratch, const ConvOps::SampleWritten* after_sample) {
  auto& s = static_cast<Scratch&>(scratch);
  s.shape(g);
  const std::size_t image = static_cast<std::size_t>(g.c) * g.h * g.w;
  const std::size_t out = static_cast<std::size_t>(g.out_c) * s.positions;
  for (int i = 0; i < g.n; ++i) {
    s.set.forward(s.columns_of(x + i * image, g, s.kernel_rows), weight, bias, y + i * out, g.out_c);
    if (after_sample) (*after_sample)(i, y + i * out);
  }
}

void backward_params(const float* x, const float* dy, float* dweight, float* dbias, const ConvGeometry& g,
                     bool accumulate, LayerScratch& scratch) {
  auto& s = static_cast<Scratch&>(scratch);
  s.shape(g);
  const std::size_t out = static_cast<std::size_t>(g.out_c) * s.positions;
  backward_params(x, [dy, out](int i) { return dy + i * out; }, dweight, dbias, g, accumulate, scratch);
}

void backward_params(const float* x, const ConvOps::SampleGradient& dy_of, float* dweight, float* dbias,
                     const ConvGeometry& g, bool accumulate, LayerScratch& scratch) {
  auto& s = static_cast<Scratch&>(scratch);
  s.shape(g);
  s.lanes.assign(static_cast<std::size_t>(g.out_c) * s.grad_rows * kThinLanes, 0.0f);
  const std::size_t image = static_cast<std::size_t>(g.c) * g.h * g.w;
  for (int i = 0; i < g.n; ++i) {
    const float* dy = dy_of(i);
    s.set.weight_grad(s.columns_of(x + i * image, g, s.grad_rows), dy, g.out_c, s.lanes.data());
  }
  for (int o = 0; o < g.out_c; ++o) {
    const float* lanes = s.lanes.data() + static_cast<std::size_t>(o) * s.grad_rows * kThinLanes;
    for (int r = 0; r < s.kernel_rows; ++r) {
      float& dw = dweight[static_cast<std::size_t>(o) * s.kernel_rows + r];
      dw = (accumulate ? dw : 0.0f) + lane_sum(lanes + r * kThinLanes);
    }
    dbias[o] = (accumulate ? dbias[o] : 0.0f) + lane_sum(lanes + s.kernel_rows * kThinLanes);
  }
}

}  // namespace mpiddp::cpu::thin_conv
