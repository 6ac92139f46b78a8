#include "mpiddp/train/step.hpp"

namespace mpiddp {

namespace {
LossResult apply_loss(const Matrix& output, const Batch& batch, bool classification, Matrix* grad) {
  return classification ? softmax_cross_entropy(output, batch.class_ids.data(), grad)
                        : mean_squared_error(output, batch.targets.data(), grad);
}
}  // namespace

LossResult train_step(Sequential& model, GradientReducer& reducer, Optimizer& optimizer, const StepInputs& in) {
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
  ParameterStore& params = model.parameters();
  optimizer.step(params.values(), params.grads(), params.total(), in.lr);
  return total;
}

LossResult evaluate_batch(Sequential& model, const Batch& batch, bool classification) {
  ForwardContext ctx;
  ctx.training = false;
  return apply_loss(model.forward(batch.features, ctx), batch, classification, nullptr);
}

}  // namespace mpiddp
