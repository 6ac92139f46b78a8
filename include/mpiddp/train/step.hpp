#pragma once
// One optimizer step of data-parallel training: forward and backward over the
// step's micro-batches (gradient reduction overlapping the last backward),
// then the optimizer update. Shared by the trainer and the DDP-equivalence test.
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
  double lr = 0.0;
  ForwardContext context;  // context.counter is the first micro-batch's number
};

// Returns the loss summed over this rank's samples of the step.
LossResult train_step(Sequential& model, GradientReducer& reducer, Optimizer& optimizer, const StepInputs& in);

// Loss (and correct count) of `batch` without touching gradients.
LossResult evaluate_batch(Sequential& model, const Batch& batch, bool classification);

}  // namespace mpiddp
