#include "mpiddp/train/step.hpp"

#include <bit>
#include <cstdint>

#include "mpiddp/common/simd.hpp"

namespace mpiddp {

namespace {
LossResult apply_loss(const Matrix& output, const Batch& batch, bool classification, Matrix* grad) {
  return classification ? softmax_cross_entropy(output, batch.class_ids.data(), grad)
                        : mean_squared_error(output, batch.targets.data(), grad);
}
}  // namespace

LossResult forward_backward(Sequential& model, GradientReducer& reducer, const StepInputs& in) {
  auto& micro = *in.micro_batches;
  const int count = static_cast<int>(micro.size());
  LossResult total;
  Matrix grad_output;
  ForwardContext ctx = in.context;
  for (int i = 0; i < count; ++i) {
    // Only the last micro-batch reduces (DDP's no_sync for the others).
    reducer.prepare(i + 1 == count, count);
    const Matrix& output = model.forward(micro[i].features, ctx);
    const LossResult r = apply_loss(output, micro[i], in.classification, &grad_output);
    model.backward(grad_output, i > 0, [&](const std::vector<std::size_t>& ready) { reducer.mark_ready(ready); });
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
    total.count += r.count;
    ++ctx.counter;
  }
  reducer.finish();
  return total;
}

MPIDDP_VECTOR_CLONES
bool gradients_finite(const ParameterStore& params) {
  const float* g = params.grads();
  // NaN and Inf are the floats whose exponent bits are all ones; an integer OR
  // reduction vectorises (a float one would not, without fast-math).
  std::uint32_t all_ones = 0;
  for (std::size_t i = 0; i < params.total(); ++i) {
    const std::uint32_t exponent = std::bit_cast<std::uint32_t>(g[i]) & 0x7f800000u;
    all_ones |= exponent == 0x7f800000u;
  }
  return all_ones == 0;
}

LossResult evaluate_batch(Sequential& model, const Batch& batch, bool classification) {
  ForwardContext ctx;
  ctx.training = false;
  return apply_loss(model.forward(batch.features, ctx), batch, classification, nullptr);
}

}  // namespace mpiddp
