#include "mpiddp/train/step.hpp"

#include "mpiddp/common/trace.hpp"
#include "ops/loss/loss_ops.hpp"
#include "mpiddp/train/batch_source.hpp"

namespace mpiddp {

namespace {
// Rows of the loss per sample: a sequence model's output {T, classes} scores
// every position, and the loss is the mean over every target token.
std::size_t loss_rows_per_sample(const Sequential& model) {
  const Shape& out = model.output_shape();
  return out.size() == 2 ? out[0] : 1;
}

// Adds the loss of `output` to the device's running sums; grad (may be null)
// receives d(mean loss)/d(output).
void apply_loss(Device& device, const Matrix& output, const StagedBatch& batch, bool classification,
                float label_smoothing, Matrix* grad, std::size_t per_sample) {
  const int n = static_cast<int>(indexable(output.rows() * per_sample, "rows of the loss (samples x positions)"));
  const int width = static_cast<int>(output.cols() / per_sample);
  if (grad) grad->resize(output.rows(), output.cols());
  float* g = grad ? grad->data() : nullptr;
  LossOps& losses = device.ops<LossOps>();
  if (classification) losses.softmax_cross_entropy(output.data(), batch.labels, g, n, width, label_smoothing);
  else losses.mean_squared_error(output.data(), batch.targets, g, n, width);
}
StagedBatch stage(Device& device, const Batch& batch, int slot) {
  TraceSpan span("stage batch");
  return device.stage(batch, slot);
}
}  // namespace

LossResult forward_backward(Sequential& model, GradientReducer& reducer, const StepInputs& in) {
  Device& device = model.device();
  auto& micro = *in.micro_batches;
  const int count = static_cast<int>(micro.size());
  Matrix& grad_output = model.output_grad();
  ForwardContext ctx = in.context;
  for (int i = 0; i < count; ++i) {
    // Only the last micro-batch reduces (DDP's no_sync for the others).
    reducer.prepare(i + 1 == count, count);
    const int slot = staging_slot(ctx.counter);
    const StagedBatch* ready = in.resident ? in.resident : (i == 0 ? in.first_staged : nullptr);
    const StagedBatch batch = ready ? *ready : stage(device, micro[i], slot);
    reducer.broadcast_buffers();  // DDP's broadcast_buffers, before every training forward
    const Matrix& output = model.forward(*batch.features, ctx);
    {
      TraceSpan span("loss");
      apply_loss(device, output, batch, in.classification, in.label_smoothing, &grad_output,
                 loss_rows_per_sample(model));
    }
    model.backward(grad_output, i > 0, [&](const std::vector<std::size_t>& ready) { reducer.mark_ready(ready); });
    if (!in.resident) device.done_with_stage(slot);
    ++ctx.counter;
  }
  reducer.finish();
  // Queued now, read with the loss: the step waits for the device only once.
  // At ddp.zero_stage = 1 only this rank's shard is reduced: check it, then agree.
  device.ops<LossOps>().check_finite(model.parameters().grads() + reducer.reduced_begin(),
                                     reducer.reduced_end() - reducer.reduced_begin());
  if (in.while_device_runs) in.while_device_runs();
  LossResult result;
  {
    TraceSpan span("device wait");
    result = device.ops<LossOps>().take_loss();  // the step's one wait for the device
  }
  result.finite = reducer.all_ranks(result.finite);
  return result;
}

bool gradients_finite(ParameterStore& params) {
  return params.device().ops<LossOps>().all_finite(params.grads(), params.total());
}

// The plain cross-entropy, whatever the training's label smoothing: test losses
// compare across settings, and bits per token stay bits.
LossResult evaluate_batch(Sequential& model, const Batch& batch, bool classification) {
  Device& device = model.device();
  ForwardContext ctx;
  ctx.training = false;
  const StagedBatch staged = device.stage(batch, 0);
  apply_loss(device, model.forward(*staged.features, ctx), staged, classification, 0.0f, nullptr,
             loss_rows_per_sample(model));
  device.done_with_stage(0);
  return device.ops<LossOps>().take_loss();
}

}  // namespace mpiddp
