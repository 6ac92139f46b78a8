#pragma once
// One step of data-parallel training: forward and backward over the step's
// micro-batches, with the gradient reduction overlapping the last backward; the
// caller then checks the gradients and runs the optimizer. Shared by the trainer
// and the DDP-equivalence test.
#include <functional>
#include <vector>

#include "mpiddp/data/dataset.hpp"
#include "mpiddp/ddp/reducer.hpp"
#include "mpiddp/nn/layer.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/sequential.hpp"
#include "mpiddp/optim/optimizer.hpp"

namespace mpiddp {

struct StepInputs {
  std::vector<Batch>* micro_batches;
  bool classification = true;
  float label_smoothing = 0.0f;  // classification: PyTorch's CrossEntropyLoss(label_smoothing=...)
  double lr = 0.0;
  ForwardContext context;  // context.counter is the first micro-batch's number
  // Benchmarks only: use this batch, already on the device, for every micro-batch
  // instead of staging micro_batches (which then only gives their count).
  const StagedBatch* resident = nullptr;
  // The first micro-batch, already staged on the device (the trainer prefetches
  // it on GPUs while the previous step computes); null = stage it here.
  const StagedBatch* first_staged = nullptr;
  // Called once all of the step's work is issued, before waiting for the device:
  // the trainer stages the next step's batch here, so its copy overlaps this step.
  std::function<void()> while_device_runs;
};

// Leaves the global mean gradient in the model's gradient buffer (identical on
// every rank) and returns the loss summed over this rank's samples, and in
// `finite` whether that gradient is free of NaN/Inf (the same on every rank,
// since it is checked after the reduction).
LossResult forward_backward(Sequential& model, GradientReducer& reducer, const StepInputs& in);

// True when every gradient is finite. The gradients are already reduced, so
// every rank reaches the same answer without communicating.
bool gradients_finite(ParameterStore& params);

// Loss (and correct count) of `batch` without touching gradients.
LossResult evaluate_batch(Sequential& model, const Batch& batch, bool classification);

}  // namespace mpiddp
