// The CUDA device against the CPU device, op by op, and the GPU model's
// gradients against finite differences. Run with MPIDDP_TEST_DEVICE=cuda under
// mpirun -n 1 (mpi_main.cpp skips with exit 77 when no GPU is usable).
#include <catch2/catch.hpp>
#include <algorithm>
#include <memory>
#include <cmath>
#include <vector>

#include "mpiddp/common/random.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/ddp/reducer.hpp"
#include "mpiddp/ddp/nccl.hpp"
#include "mpiddp/device/cuda.hpp"
#include "ops/dense/dense_ops.hpp"
#include "ops/loss/loss_ops.hpp"
#include "ops/pointwise/pointwise_ops.hpp"
#include "ops/update/update_ops.hpp"
#include "mpiddp/dist/mpi_communicator.hpp"
#include "mpiddp/nn/model_builder.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "mpiddp/train/step.hpp"
#include "gpu_support.hpp"

#include <mpi.h>

using namespace mpiddp;
using namespace mpiddp::test;


TEST_CASE("copy_to_device returns when its host buffer may be reused", "[gpu]") {
  // Many copies from one pageable buffer, each overwritten at once: every copy
  // must have read its own values (64 MiB each, so a copy still queued shows).
  const std::size_t count = std::size_t{16} << 20;
  std::vector<float> host(count);
  std::vector<std::unique_ptr<OnGpu>> copies;
  for (int round = 0; round < 3; ++round) {
    std::fill(host.begin(), host.end(), static_cast<float>(round));
    copies.push_back(std::make_unique<OnGpu>(host));  // OnGpu copies with copy_to_device
  }
  std::fill(host.begin(), host.end(), -1.0f);
  for (int round = 0; round < 3; ++round) {
    const auto back = copies[static_cast<std::size_t>(round)]->host();
    CHECK(std::all_of(back.begin(), back.end(), [&](float v) { return v == static_cast<float>(round); }));
  }
}

TEST_CASE("GPU linear layer matches the CPU in fp32", "[gpu]") {
  const int n = 37, in = 53, out = 29;  // odd sizes: no lucky alignment
  const auto x = random_values(n * in, 1), w = random_values(out * in, 2), b = random_values(out, 3);
  const auto dy = random_values(n * out, 4);
  std::vector<float> y(n * out), dw(out * in), db(out), dx(n * in);
  Device& cpu = cpu_device();
  cpu.ops<DenseOps>().linear_forward(x.data(), w.data(), b.data(), y.data(), n, in, out, nullptr);
  cpu.ops<DenseOps>().linear_backward_params(x.data(), dy.data(), dw.data(), db.data(), n, in, out, false, nullptr);
  cpu.ops<DenseOps>().linear_backward_input(dy.data(), w.data(), dx.data(), n, in, out, nullptr);
  OnGpu gx(x), gw(w), gb(b), gdy(dy), gy(n * out), gdw(out * in), gdb(out), gdx(n * in);
  gpu().set_precision(Precision::fp32);
  gpu().ops<DenseOps>().linear_forward(gx.data, gw.data, gb.data, gy.data, n, in, out, nullptr);
  gpu().ops<DenseOps>().linear_backward_params(gx.data, gdy.data, gdw.data, gdb.data, n, in, out, false, nullptr);
  gpu().ops<DenseOps>().linear_backward_input(gdy.data, gw.data, gdx.data, n, in, out, nullptr);
  CHECK(close(gy.host(), y, 1e-4, 1e-5));
  CHECK(close(gdw.host(), dw, 1e-4, 1e-5));
  CHECK(close(gdb.host(), db, 1e-4, 1e-5));
  CHECK(close(gdx.host(), dx, 1e-4, 1e-5));
  // Accumulation adds to what is there.
  gpu().ops<DenseOps>().linear_backward_params(gx.data, gdy.data, gdw.data, gdb.data, n, in, out, true, nullptr);
  std::vector<float> twice(dw);
  for (float& v : twice) v *= 2.0f;
  CHECK(close(gdw.host(), twice, 1e-4, 1e-5));
  // bf16 inputs: close, not equal (8 mantissa bits).
  gpu().set_precision(Precision::bf16);
  gpu().ops<DenseOps>().linear_forward(gx.data, gw.data, gb.data, gy.data, n, in, out, nullptr);
  const auto y16 = gy.host();
  gpu().ops<DenseOps>().linear_backward_params(gx.data, gdy.data, gdw.data, gdb.data, n, in, out, false, nullptr);
  gpu().ops<DenseOps>().linear_backward_input(gdy.data, gw.data, gdx.data, n, in, out, nullptr);
  const auto dw16 = gdw.host(), dx16 = gdx.host();
  // The layer's reused bf16 copies give bit-identical results to fresh conversions.
  auto scratch = gpu().ops<DenseOps>().make_scratch();
  gpu().ops<DenseOps>().linear_forward(gx.data, gw.data, gb.data, gy.data, n, in, out, scratch.get());
  gpu().ops<DenseOps>().linear_backward_params(gx.data, gdy.data, gdw.data, gdb.data, n, in, out, false, scratch.get());
  gpu().ops<DenseOps>().linear_backward_input(gdy.data, gw.data, gdx.data, n, in, out, scratch.get());
  CHECK(gy.host() == y16);
  CHECK(gdw.host() == dw16);
  CHECK(gdx.host() == dx16);
  CHECK(close(dw16, dw, 0.05, 0.05));
  gpu().set_precision(Precision::fp32);
  double worst = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(double(y16[i]) - y[i]));
  CHECK(worst < 0.1);
}

TEST_CASE("GPU element-wise ops equal the CPU's (shared math)", "[gpu]") {
  const std::size_t n = 10007;
  const auto x = random_values(n, 5, 3.0f), g = random_values(n, 6);
  for (ActivationKind kind :
       {ActivationKind::relu, ActivationKind::gelu, ActivationKind::tanh, ActivationKind::gelu_tanh}) {
    std::vector<float> y(n), d(n);
    cpu_device().ops<PointwiseOps>().activation_forward(kind, x.data(), y.data(), n);
    cpu_device().ops<PointwiseOps>().activation_backward(kind, x.data(), y.data(), g.data(), d.data(), n);
    OnGpu gx(x), gg(g), gy(n), gd(n);
    gpu().ops<PointwiseOps>().activation_forward(kind, gx.data, gy.data, n);
    gpu().ops<PointwiseOps>().activation_backward(kind, gx.data, gy.data, gg.data, gd.data, n);
    INFO("activation " << static_cast<int>(kind));
    CHECK(close(gy.host(), y, 1e-5, 1e-6));
    CHECK(close(gd.host(), d, 1e-5, 1e-6));
  }
  // Dropout masks are a pure function of (key, index): bit-identical.
  std::vector<float> y(n), mask(n);
  cpu_device().ops<PointwiseOps>().dropout_forward(x.data(), y.data(), mask.data(), n, 1234, 0.3f, 1.0f / 0.7f);
  OnGpu gx(x), gy(n), gm(n);
  gpu().ops<PointwiseOps>().dropout_forward(gx.data, gy.data, gm.data, n, 1234, 0.3f, 1.0f / 0.7f);
  CHECK(gm.host() == mask);
  CHECK(gy.host() == y);
}

TEST_CASE("GPU losses and optimizer steps match the CPU", "[gpu]") {
  const int n = 300, c = 10;
  const auto logits = random_values(n * c, 7, 4.0f);
  std::vector<std::int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % c;
  std::vector<float> grad(n * c);
  cpu_device().ops<LossOps>().take_loss();
  // With label smoothing (the plain loss: the next case).
  cpu_device().ops<LossOps>().softmax_cross_entropy(logits.data(), labels.data(), grad.data(), n, c, 0.1f);
  const LossResult cpu_loss = cpu_device().ops<LossOps>().take_loss();
  OnGpu gl(logits), gg(n * c);
  std::int32_t* glabels = static_cast<std::int32_t*>(gpu().allocate(n * sizeof(std::int32_t)));
  gpu().copy_to_device(glabels, labels.data(), n * sizeof(std::int32_t));
  gpu().ops<LossOps>().softmax_cross_entropy(gl.data, glabels, gg.data, n, c, 0.1f);
  const LossResult gpu_loss = gpu().ops<LossOps>().take_loss();
  gpu().release(glabels);
  CHECK(gpu_loss.count == n);
  CHECK(gpu_loss.correct == cpu_loss.correct);
  CHECK(std::abs(gpu_loss.loss_sum - cpu_loss.loss_sum) < 1e-9 * n);
  CHECK(close(gg.host(), grad, 1e-5, 1e-7));

  const std::size_t count = 5000;
  auto params = random_values(count, 8), grads = random_values(count, 9);
  std::vector<float> m(count, 0.0f), v(count, 0.0f);
  OnGpu gp(params), gr(grads), gm(m), gv(v);
  ew::AdamWCoefficients k{0.999f, 0.9f, 0.1f, 0.999f, 0.001f, 0.01f, 1.2f, 1e-8f};
  cpu_device().ops<UpdateOps>().adamw_update(params.data(), grads.data(), m.data(), v.data(), count, k);
  gpu().ops<UpdateOps>().adamw_update(gp.data, gr.data, gm.data, gv.data, count, k);
  CHECK(close(gp.host(), params, 1e-5, 1e-6));  // nvcc fuses multiply-adds
  CHECK(close(gm.host(), m, 1e-5, 1e-7));
  CHECK(gpu().ops<LossOps>().all_finite(gp.data, count));
  const float nan = std::nanf("");
  gpu().copy_to_device(gp.data + 4321, &nan, sizeof(float));
  CHECK_FALSE(gpu().ops<LossOps>().all_finite(gp.data, count));
  // The queued check, read with the loss; take_loss() clears it.
  gpu().ops<LossOps>().check_finite(gp.data, count);
  CHECK_FALSE(gpu().ops<LossOps>().take_loss().finite);
  CHECK(gpu().ops<LossOps>().take_loss().finite);
  gpu().ops<LossOps>().check_finite(gr.data, count);
  CHECK(gpu().ops<LossOps>().take_loss().finite);
}

TEST_CASE("GPU softmax cross-entropy matches the CPU for narrow and wide rows, ties included", "[gpu]") {
  // One warp per row: fewer classes than lanes, not a multiple of 32, and the
  // large-MLP bench's 4096. Every 7th row is constant (every logit ties): the
  // arg-max must be the first one, as on the CPU, so `correct` agrees exactly.
  // Plain and with label smoothing (its sum of logits spans several lanes at 37 and 4096 classes).
  for (const float smoothing : {0.0f, 0.1f}) {
    for (const int c : {1, 3, 10, 37, 4096}) {
      const int n = 301;
      auto logits = random_values(static_cast<std::size_t>(n) * c, 10 + c, 6.0f);
      for (int r = 0; r < n; r += 7)
        for (int k = 0; k < c; ++k) logits[static_cast<std::size_t>(r) * c + k] = 0.25f;
      std::vector<std::int32_t> labels(n);
      for (int i = 0; i < n; ++i) labels[i] = (i * 13) % c;
      std::vector<float> grad(static_cast<std::size_t>(n) * c);
      cpu_device().ops<LossOps>().take_loss();  // both start from zero sums
      gpu().ops<LossOps>().take_loss();
      cpu_device().ops<LossOps>().softmax_cross_entropy(logits.data(), labels.data(), grad.data(), n, c, smoothing);
      const LossResult cpu_loss = cpu_device().ops<LossOps>().take_loss();
      OnGpu gl(logits), gg(grad.size());
      std::int32_t* glabels = static_cast<std::int32_t*>(gpu().allocate(n * sizeof(std::int32_t)));
      gpu().copy_to_device(glabels, labels.data(), n * sizeof(std::int32_t));
      gpu().ops<LossOps>().softmax_cross_entropy(gl.data, glabels, gg.data, n, c, smoothing);
      const LossResult gpu_loss = gpu().ops<LossOps>().take_loss();
      // Without a gradient (evaluation) the loss is the same.
      gpu().ops<LossOps>().softmax_cross_entropy(gl.data, glabels, nullptr, n, c, smoothing);
      const LossResult eval_loss = gpu().ops<LossOps>().take_loss();
      gpu().release(glabels);
      INFO("classes " << c << ", label smoothing " << smoothing);
      CHECK(gpu_loss.count == n);
      CHECK(gpu_loss.correct == cpu_loss.correct);
      CHECK(std::abs(gpu_loss.loss_sum - cpu_loss.loss_sum) < 1e-9 * n);
      CHECK(close(gg.host(), grad, 1e-5, 1e-7));
      CHECK(eval_loss.loss_sum == gpu_loss.loss_sum);  // the same order of sums: the same bits
      CHECK(eval_loss.correct == gpu_loss.correct);
    }
  }
}

TEST_CASE("GPU model gradients match finite differences and runs repeat bit for bit", "[gpu]") {
  ModelConfig mc;
  mc.hidden = {16, 8};
  mc.activation = ActivationKind::tanh;
  auto model = build_mlp(mc, 12, 3, 5, &gpu());
  MpiCommunicator self(MPI_COMM_SELF);
  GradientReducer reducer(model->parameters(), self, 1 << 20, 1 << 20);
  std::vector<Batch> micro(1);
  micro[0].features.resize(20, 12);
  const auto x = random_values(20 * 12, 10);
  std::copy(x.begin(), x.end(), micro[0].features.data());
  for (int i = 0; i < 20; ++i) micro[0].class_ids.push_back(i % 3);
  StepInputs in;
  in.micro_batches = &micro;
  forward_backward(*model, reducer, in);
  auto& p = model->parameters();
  p.pull_grads();
  const std::vector<float> analytic(p.host_grads(), p.host_grads() + p.total());
  p.pull_values();
  const double h = 1e-2;
  int checked = 0, bad = 0;
  for (std::size_t i = 0; i < p.total(); i += 7, ++checked) {
    const float original = p.host_values()[i];
    double loss[2];
    for (int side = 0; side < 2; ++side) {
      p.host_values()[i] = original + static_cast<float>(side == 0 ? h : -h);
      p.push_values();
      loss[side] = evaluate_batch(*model, micro[0], true).loss_sum / 20.0;
    }
    p.host_values()[i] = original;
    p.push_values();
    const double numeric = (loss[0] - loss[1]) / (2 * h);
    if (std::abs(numeric - analytic[i]) > 2e-3 + 2e-2 * std::abs(numeric)) ++bad;
  }
  CHECK(checked > 20);
  CHECK(bad == 0);

  auto train = [&] {
    auto m = build_mlp(mc, 12, 3, 5, &gpu());
    GradientReducer r(m->parameters(), self, 1 << 20, 1 << 20);
    OptimConfig oc;
    oc.name = OptimizerKind::adamw;
    auto opt = make_optimizer(oc, &gpu());
    for (int s = 0; s < 5; ++s) {
      forward_backward(*m, r, in);
      opt->step(m->parameters().values(), m->parameters().grads(), m->parameters().total(), 1e-2);
    }
    m->parameters().pull_values();
    return std::vector<float>(m->parameters().host_values(), m->parameters().host_values() + m->parameters().total());
  };
  CHECK(train() == train());
}

TEST_CASE("NCCL transport reduces a bucket in place on one rank (fp32 and bf16)", "[gpu][nccl]") {
  if (!built_with_nccl()) return;
  MpiCommunicator self(MPI_COMM_SELF);
  for (bool bf16 : {false, true}) {
    auto transport = make_nccl_transport(self, gpu(), bf16, 60.0);
    const auto values = random_values(3000, 11);
    OnGpu data(values);
    auto pending = transport->start(0, data.data, values.size(), true);
    if (pending) pending->wait();
    const auto result = data.host();
    INFO("bf16 " << bf16);
    CHECK(close(result, values, bf16 ? 1e-2 : 0.0, 0.0));
  }
}
