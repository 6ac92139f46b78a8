// The CUDA device's CNN op families against the CPU's: cuDNN convolutions (close:
// another summation order), pooling (equal bit for bit: the same order of sums),
// batch normalisation call by call, and a small CNN's gradients. Part of
// gpu_tests (skipped with exit 77 where no GPU is usable).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gpu_support.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/ddp/reducer.hpp"
#include "ops/conv/conv_ops.hpp"
#include "ops/norm/norm_ops.hpp"
#include "ops/pool/pool_ops.hpp"
#include "mpiddp/dist/mpi_communicator.hpp"
#include "mpiddp/nn/model_builder.hpp"
#include "mpiddp/train/step.hpp"

#include <mpi.h>

using namespace mpiddp;
using namespace mpiddp::test;

namespace {

std::size_t input_size(const ConvGeometry& g) { return static_cast<std::size_t>(g.n) * g.c * g.h * g.w; }
std::size_t output_size(const ConvGeometry& g) {
  return static_cast<std::size_t>(g.n) * g.out_c * g.out_h() * g.out_w();
}

struct ConvResult {
  std::vector<float> y, dw, db, dx;
};

ConvResult cpu_conv(const ConvGeometry& g, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, const std::vector<float>& dy) {
  ConvOps& ops = cpu_device().ops<ConvOps>();
  auto scratch = ops.make_scratch();
  ConvResult r{std::vector<float>(output_size(g)), std::vector<float>(w.size()), std::vector<float>(b.size()),
               std::vector<float>(x.size())};
  ops.conv_forward(x.data(), w.data(), b.data(), r.y.data(), g, scratch.get());
  ops.conv_backward_params(x.data(), dy.data(), r.dw.data(), r.db.data(), g, false, scratch.get());
  ops.conv_backward_input(dy.data(), w.data(), r.dx.data(), g, scratch.get());
  return r;
}

ConvResult gpu_conv(const ConvGeometry& g, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, const std::vector<float>& dy, bool accumulate_twice = false) {
  ConvOps& ops = gpu().ops<ConvOps>();
  auto scratch = ops.make_scratch();
  OnGpu gx(x), gw(w), gb(b), gdy(dy), gy(output_size(g)), gdw(w.size()), gdb(b.size()), gdx(x.size());
  ops.conv_forward(gx.data, gw.data, gb.data, gy.data, g, scratch.get());
  ops.conv_backward_params(gx.data, gdy.data, gdw.data, gdb.data, g, false, scratch.get());
  if (accumulate_twice) ops.conv_backward_params(gx.data, gdy.data, gdw.data, gdb.data, g, true, scratch.get());
  ops.conv_backward_input(gdy.data, gw.data, gdx.data, g, scratch.get());
  return {gy.host(), gdw.host(), gdb.host(), gdx.host()};
}

ConvGeometry conv_geometry(int n, int c, int h, int w, int out_c, int k, int stride, int padding) {
  ConvGeometry g;
  g.n = n;
  g.c = c;
  g.h = h;
  g.w = w;
  g.out_c = out_c;
  g.kh = g.kw = k;
  g.stride = stride;
  g.padding = padding;
  return g;
}

}  // namespace

TEST_CASE("GPU convolution (cuDNN) matches the CPU's for several kernels, strides and paddings", "[gpu][cnn]") {
  if (!cudnn_info().loaded) {
    WARN("no cuDNN in this process: " << cudnn_info().problem);
    return;
  }
  const ConvGeometry cases[] = {
      conv_geometry(3, 2, 9, 7, 5, 3, 1, 1),    conv_geometry(4, 3, 8, 8, 6, 1, 1, 0),
      conv_geometry(2, 4, 11, 13, 3, 5, 2, 2),  conv_geometry(5, 3, 10, 9, 4, 3, 2, 0),
      conv_geometry(2, 2, 12, 10, 7, 4, 3, 1),  conv_geometry(8, 16, 14, 14, 32, 3, 1, 1),
      conv_geometry(1, 1, 28, 28, 8, 7, 1, 3)};
  std::uint64_t seed = 100;
  for (const ConvGeometry& g : cases) {
    const auto x = random_values(input_size(g), ++seed);
    const auto w = random_values(static_cast<std::size_t>(g.out_c) * g.c * g.kh * g.kw, ++seed, 0.5f);
    const auto b = random_values(static_cast<std::size_t>(g.out_c), ++seed);
    const auto dy = random_values(output_size(g), ++seed);
    INFO("n " << g.n << " c " << g.c << " " << g.h << "x" << g.w << " out " << g.out_c << " kernel " << g.kh
              << " stride " << g.stride << " padding " << g.padding);
    const ConvResult cpu = cpu_conv(g, x, w, b, dy);
    gpu().set_precision(Precision::fp32);
    const ConvResult fp32 = gpu_conv(g, x, w, b, dy);
    CHECK(close(fp32.y, cpu.y, 1e-4, 1e-4));
    // dw sums over every sample and position (up to 1568 terms here): a looser absolute bound.
    CHECK(close(fp32.dw, cpu.dw, 1e-4, 5e-4));
    CHECK(close(fp32.db, cpu.db, 1e-5, 1e-5));
    CHECK(close(fp32.dx, cpu.dx, 1e-4, 1e-4));
    // Deterministic algorithms: the same call gives the same bits.
    const ConvResult again = gpu_conv(g, x, w, b, dy);
    CHECK(again.y == fp32.y);
    CHECK(again.dw == fp32.dw);
    CHECK(again.db == fp32.db);
    CHECK(again.dx == fp32.dx);
    // Accumulation adds to what is there.
    const ConvResult twice = gpu_conv(g, x, w, b, dy, true);
    std::vector<float> dw2(cpu.dw), db2(cpu.db);
    for (float& v : dw2) v *= 2.0f;
    for (float& v : db2) v *= 2.0f;
    CHECK(close(twice.dw, dw2, 1e-4, 1e-3));
    CHECK(close(twice.db, db2, 1e-5, 2e-5));
    // tf32 (and bf16, which convolves with TF32 math for now): 10 mantissa bits.
    for (Precision p : {Precision::tf32, Precision::bf16}) {
      gpu().set_precision(p);
      const ConvResult low = gpu_conv(g, x, w, b, dy);
      INFO("precision " << name_of(p));
      CHECK(close(low.y, cpu.y, 1e-2, 2e-2));
      CHECK(close(low.dw, cpu.dw, 1e-2, 5e-2));
      CHECK(close(low.dx, cpu.dx, 1e-2, 2e-2));
    }
    gpu().set_precision(Precision::fp32);
  }
}

TEST_CASE("GPU pooling equals the CPU's bit for bit, ties and NaN included", "[gpu][cnn]") {
  struct Case {
    int n, c, h, w, kernel, stride;
  };
  for (const Case k : {Case{2, 3, 8, 8, 2, 2}, Case{3, 2, 9, 7, 2, 2}, Case{2, 2, 11, 10, 3, 2}, Case{1, 4, 7, 9, 3, 1},
                       Case{2, 3, 10, 11, 2, 3}, Case{1, 1, 5, 5, 5, 1}}) {
    PoolGeometry g;
    g.n = k.n;
    g.c = k.c;
    g.h = k.h;
    g.w = k.w;
    g.kernel = k.kernel;
    g.stride = k.stride;
    const std::size_t ins = static_cast<std::size_t>(g.n) * g.c * g.h * g.w;
    const std::size_t outs = static_cast<std::size_t>(g.n) * g.c * g.out_h() * g.out_w();
    auto x = random_values(ins, 200 + k.h * 31 + k.kernel);
    for (std::size_t i = 0; i < ins; i += 3) x[i] = std::round(x[i] * 2.0f) / 2.0f;  // ties
    x[ins / 2] = std::nanf("");
    const auto dy = random_values(outs, 300 + k.w);
    INFO("n " << g.n << " c " << g.c << " " << g.h << "x" << g.w << " kernel " << g.kernel << " stride " << g.stride);
    PoolOps& cpu = cpu_device().ops<PoolOps>();
    PoolOps& dev = gpu().ops<PoolOps>();
    std::vector<float> y(outs), dx(ins), ay(outs), adx(ins);
    std::vector<std::int32_t> argmax(outs);
    cpu.max_pool_forward(x.data(), y.data(), argmax.data(), g);
    cpu.max_pool_backward(dy.data(), argmax.data(), dx.data(), g);
    cpu.avg_pool_forward(x.data(), ay.data(), g);
    cpu.avg_pool_backward(dy.data(), adx.data(), g);

    OnGpu gx(x), gdy(dy), gy(outs), gdx(ins), gay(outs), gadx(ins);
    auto* gargmax = static_cast<std::int32_t*>(gpu().allocate(outs * sizeof(std::int32_t)));
    dev.max_pool_forward(gx.data, gy.data, gargmax, g);
    dev.max_pool_backward(gdy.data, gargmax, gdx.data, g);
    dev.avg_pool_forward(gx.data, gay.data, g);
    dev.avg_pool_backward(gdy.data, gadx.data, g);
    std::vector<std::int32_t> argmax_back(outs);
    gpu().copy_to_host(argmax_back.data(), gargmax, outs * sizeof(std::int32_t));
    gpu().release(gargmax);
    CHECK(argmax_back == argmax);
    CHECK(close(gy.host(), y, 0.0, 0.0));
    CHECK(close(gdx.host(), dx, 0.0, 0.0));
    CHECK(close(gay.host(), ay, 0.0, 0.0));
    CHECK(close(gadx.host(), adx, 0.0, 0.0));
  }
}

TEST_CASE("GPU batch normalisation matches the CPU's, call by call", "[gpu][cnn]") {
  struct Case {
    int n, c, spatial;
    float offset;  // a large mean: the centred squares must keep the variance
  };
  for (const Case k : {Case{16, 3, 25, 0.0f}, Case{7, 5, 1, 0.0f}, Case{4, 8, 49, 100.0f}, Case{64, 2, 196, 0.5f}}) {
    NormGeometry g;
    g.n = k.n;
    g.c = k.c;
    g.spatial = k.spatial;
    const std::size_t size = static_cast<std::size_t>(g.n) * g.c * g.spatial, c = static_cast<std::size_t>(g.c);
    auto x = random_values(size, 400 + k.spatial, 2.0f);
    for (float& v : x) v += k.offset;
    const auto dy = random_values(size, 500 + k.spatial);
    const auto weight = random_values(c, 600), bias = random_values(c, 601);
    const auto running_mean = random_values(c, 602);
    auto running_var = random_values(c, 603);
    for (float& v : running_var) v = std::abs(v) + 0.5f;
    INFO("n " << g.n << " c " << g.c << " spatial " << g.spatial << " offset " << k.offset);
    NormOps& cpu = cpu_device().ops<NormOps>();
    NormOps& dev = gpu().ops<NormOps>();

    // Moments of this batch, and three "ranks'" moments combined in order.
    std::vector<float> moments(3 * c);
    cpu.batch_moments(x.data(), moments.data(), g);
    OnGpu gx(x), gdy(dy), gmoments(3 * c);
    dev.batch_moments(gx.data, gmoments.data, g);
    CHECK(close(gmoments.host(), moments, 1e-5, 1e-5));
    std::vector<float> all(3 * 3 * c);
    for (int r = 0; r < 3; ++r)
      for (std::size_t i = 0; i < 3 * c; ++i) all[r * 3 * c + i] = moments[i] * (i < c ? 1.0f + r : 1.0f + 0.1f * r);
    std::vector<float> combined(3 * c);
    cpu.combine_moments(all.data(), 3, combined.data(), g.c);
    OnGpu gall(all), gcombined(3 * c);
    dev.combine_moments(gall.data, 3, gcombined.data, g.c);
    CHECK(close(gcombined.host(), combined, 1e-6, 1e-6));

    // Training forward from the same moments (the CPU's, so only this call differs).
    std::vector<float> y(size), rm(running_mean), rv(running_var), saved(3 * c);
    cpu.normalize_train(x.data(), y.data(), weight.data(), bias.data(), moments.data(), 1e-5f, 0.1f, rm.data(),
                        rv.data(), saved.data(), g);
    OnGpu gw(weight), gb(bias), gm(moments), grm(running_mean), grv(running_var), gsaved(3 * c), gy(size);
    dev.normalize_train(gx.data, gy.data, gw.data, gb.data, gm.data, 1e-5f, 0.1f, grm.data, grv.data, gsaved.data, g);
    CHECK(close(gy.host(), y, 1e-5, 1e-5));
    CHECK(close(grm.host(), rm, 1e-6, 1e-6));
    CHECK(close(grv.host(), rv, 1e-6, 1e-6));
    CHECK(close(gsaved.host(), saved, 1e-6, 1e-6));

    std::vector<float> ye(size);
    cpu.normalize_eval(x.data(), ye.data(), weight.data(), bias.data(), running_mean.data(), running_var.data(),
                       1e-5f, g);
    OnGpu grm0(running_mean), grv0(running_var), gye(size);
    dev.normalize_eval(gx.data, gye.data, gw.data, gb.data, grm0.data, grv0.data, 1e-5f, g);
    CHECK(close(gye.host(), ye, 1e-5, 1e-5));

    // Backward from the CPU's saved statistics.
    std::vector<float> sums(2 * c), dw(c), db(c), dx(size);
    cpu.backward_sums(x.data(), dy.data(), weight.data(), bias.data(), saved.data(), sums.data(), g);
    cpu.backward_params(sums.data(), saved.data(), dw.data(), db.data(), g.c, false);
    cpu.backward_input(x.data(), dy.data(), weight.data(), bias.data(), saved.data(), sums.data(), dx.data(), g);
    OnGpu gsaved_cpu(saved), gsums(2 * c), gdw(c), gdb(c), gdx(size);
    dev.backward_sums(gx.data, gdy.data, gw.data, gb.data, gsaved_cpu.data, gsums.data, g);
    CHECK(close(gsums.host(), sums, 1e-5, 1e-4));
    OnGpu gsums_cpu(sums);
    dev.backward_params(gsums_cpu.data, gsaved_cpu.data, gdw.data, gdb.data, g.c, false);
    CHECK(close(gdw.host(), dw, 1e-6, 1e-6));
    CHECK(close(gdb.host(), db, 0.0, 0.0));
    dev.backward_params(gsums_cpu.data, gsaved_cpu.data, gdw.data, gdb.data, g.c, true);
    std::vector<float> dw2(dw), db2(db);
    for (float& v : dw2) v *= 2.0f;
    for (float& v : db2) v *= 2.0f;
    CHECK(close(gdw.host(), dw2, 1e-6, 1e-6));
    CHECK(close(gdb.host(), db2, 0.0, 0.0));
    dev.backward_input(gx.data, gdy.data, gw.data, gb.data, gsaved_cpu.data, gsums_cpu.data, gdx.data, g);
    CHECK(close(gdx.host(), dx, 1e-4, 1e-5));
    // Fixed-order sums: the same bits every time.
    const auto first = gmoments.host();
    dev.batch_moments(gx.data, gmoments.data, g);
    CHECK(gmoments.host() == first);
  }
}

TEST_CASE("A small CNN's gradients on the GPU match the CPU's, and repeat bit for bit", "[gpu][cnn]") {
  if (!cudnn_info().loaded) {
    WARN("no cuDNN in this process: " << cudnn_info().problem);
    return;
  }
  ModelConfig mc;
  mc.layers = "conv2d(4,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(6,3,stride=2) batchnorm2d relu "
              "avgpool2d(2) flatten linear(10) relu linear";
  const Shape input{2, 12, 12};
  std::vector<Batch> micro(1);
  micro[0].features.resize(16, 2 * 12 * 12);
  const auto x = random_values(16 * 2 * 12 * 12, 700);
  std::copy(x.begin(), x.end(), micro[0].features.data());
  for (int i = 0; i < 16; ++i) micro[0].class_ids.push_back(i % 3);
  StepInputs in;
  in.micro_batches = &micro;
  MpiCommunicator self(MPI_COMM_SELF);
  auto gradients = [&](Device* device) {
    auto model = build_model(mc, input, 3, 9, device);
    GradientReducer reducer(model->parameters(), self, 1 << 20, 1 << 20);
    forward_backward(*model, reducer, in);
    auto& p = model->parameters();
    p.pull_grads();
    return std::vector<float>(p.host_grads(), p.host_grads() + p.total());
  };
  gpu().set_precision(Precision::fp32);
  const auto cpu = gradients(&cpu_device());
  const auto first = gradients(&gpu());
  CHECK(close(first, cpu, 2e-3, 2e-4));
  CHECK(gradients(&gpu()) == first);
}
