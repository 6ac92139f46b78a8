// Writes, for a list of layer lists, what mpiddp computes: the input, the
// parameters and buffers it started from, the forward output (training or
// evaluation), the input, parameter and buffer state after backward with a given
// dy. tests/torch/compare_layers.py recomputes each case with torch.nn and
// compares (test_layers_vs_torch.sh).
//
// usage: layer_cases OUT.h5
#include <hdf5.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpiddp/common/random.hpp"
#include "mpiddp/config/choices.hpp"
#include "mpiddp/device/cpu_gemm.hpp"
#include "mpiddp/nn/model_builder.hpp"

using namespace mpiddp;

namespace {

struct Case {
  const char* name;
  const char* layers;
  Shape input;
  std::size_t batch;
  bool training;
  int vocab = 0;  // > 0: the input is token ids below it (a sequence model's), written as "tokens"
};

// Kernel sizes 1/3/5, strides 1/2/3, paddings 0/1/2 on non-square inputs (3 x 3
// ones with channels in eights too); both
// pools; BatchNorm in training and evaluation; LayerNorm on features, on rows of
// a {T, D} sample and inside an MLP; GELU's tanh form; residual blocks (identity
// and projection shortcuts, nested, with BatchNorm in both modes); linear on
// rows of {T, D} without bias; causal self-attention; embeddings and a tiny GPT
// on token ids (no input gradient then); two CNNs
// (dropout p = 0 in training: PyTorch's masks are its own).
const Case kCases[] = {
    {"conv_k1", "conv2d(3,1)", {2, 5, 7}, 3, true},
    {"conv_k3_p1", "conv2d(4,3,padding=1)", {3, 6, 5}, 3, true},
    {"conv_k3_s2", "conv2d(3,3,stride=2)", {2, 7, 9}, 3, true},
    {"conv_k5_p2", "conv2d(2,5,padding=2)", {1, 9, 8}, 2, true},
    {"conv_k5_s2_p2", "conv2d(3,5,stride=2,padding=2)", {2, 8, 6}, 3, true},
    {"conv_k3_s3_p2", "conv2d(2,3,3,2)", {2, 4, 5}, 2, true},
    {"conv_k3_s2_p1_wide", "conv2d(5,3,2,1)", {4, 6, 11}, 4, false},
    {"maxpool_k2", "maxpool2d(2)", {2, 6, 7}, 3, true},
    {"maxpool_k2_s1", "maxpool2d(2,1)", {2, 5, 6}, 2, true},
    {"maxpool_k3_s1", "maxpool2d(3,1)", {2, 7, 8}, 2, true},
    {"maxpool_k3_s2", "maxpool2d(3,stride=2)", {3, 7, 6}, 2, true},
    {"maxpool_k2_s3", "maxpool2d(2,3)", {1, 7, 5}, 3, true},
    {"avgpool_k2", "avgpool2d(2)", {2, 6, 7}, 3, true},
    {"avgpool_k3_s1", "avgpool2d(3,1)", {2, 7, 8}, 2, true},
    {"avgpool_k3_s3", "avgpool2d(kernel_size=3,stride=3)", {2, 9, 7}, 2, true},
    {"batchnorm2d_train", "batchnorm2d", {3, 4, 5}, 4, true},
    {"batchnorm2d_eval", "batchnorm2d(eps=1e-3)", {3, 4, 5}, 4, false},
    {"batchnorm1d_train", "batchnorm1d(eps=1e-3,momentum=0.3)", {6}, 5, true},
    {"batchnorm1d_eval", "batchnorm1d", {6}, 5, false},
    {"flatten_linear", "flatten linear(5)", {2, 3, 3}, 3, true},
    {"layernorm_features", "layernorm", {7}, 4, true},
    {"layernorm_rows_eps", "layernorm(eps=1e-3)", {3, 5}, 3, false},
    {"layernorm_mlp", "linear(9) layernorm gelu linear(6) layernorm(1e-4) tanh linear", {5}, 6, true},
    {"cnn_train",
     "conv2d(4,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(6,3,stride=2,padding=1) batchnorm2d gelu "
     "avgpool2d(2) flatten linear(8) batchnorm1d tanh dropout(0) linear",
     {1, 12, 12},
     6,
     true},
    {"cnn_eval",
     "conv2d(4,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(6,3,stride=2,padding=1) batchnorm2d gelu "
     "avgpool2d(2) flatten linear(8) batchnorm1d tanh dropout(0.3) linear",
     {1, 12, 12},
     6,
     false},
    // Added with residual blocks and sequence models: after the others, whose seeds stay as they were.
    {"gelu_tanh", "gelu(approximate=tanh)", {11}, 3, true},
    {"residual_identity", "linear(6) residual(layernorm linear(12) gelu(approximate=tanh) linear(6)) relu linear", {5}, 4,
     true},
    {"residual_nested", "linear(4) residual(tanh residual(linear(4) gelu) linear(4) ; linear(4)) linear", {3}, 3, true},
    {"resnet_train",
     "conv2d(4,3,padding=1) batchnorm2d relu residual(conv2d(4,3,padding=1) batchnorm2d relu conv2d(4,3,padding=1) "
     "batchnorm2d) relu residual(conv2d(6,3,stride=2,padding=1) batchnorm2d relu conv2d(6,3,padding=1) batchnorm2d ; "
     "conv2d(6,1,stride=2) batchnorm2d) relu avgpool2d(2) flatten linear",
     {1, 8, 8},
     4,
     true},
    {"resnet_eval",
     "conv2d(4,3,padding=1) batchnorm2d relu residual(conv2d(4,3,padding=1) batchnorm2d relu dropout(0.4) "
     "conv2d(4,3,padding=1) batchnorm2d) relu residual(conv2d(6,3,stride=2,padding=1) batchnorm2d ; "
     "conv2d(6,1,stride=2) batchnorm2d) relu avgpool2d(2) flatten linear",
     {1, 8, 8},
     4,
     false},
    {"linear_rows_nobias", "linear(4,bias=false) relu linear", {3, 5}, 2, true},
    {"attention", "causal_self_attention(3)", {5, 6}, 2, true},
    {"attention_one_head_t1", "causal_self_attention(1) linear", {1, 4}, 3, true},
    {"embedding", "embedding(11,6)", {5}, 3, true, 11},
    {"gpt_tiny",
     "embedding(13,8) position_embedding residual(layernorm causal_self_attention(2)) "
     "residual(layernorm linear(16) gelu(approximate=tanh) linear(8)) residual(layernorm causal_self_attention(4)) "
     "layernorm linear(bias=false)",
     {6},
     3,
     true,
     13},
    {"gpt_tied",
     "embedding(9,8) position_embedding residual(layernorm causal_self_attention(2) ; linear(8)) layernorm "
     "linear(tie=0)",
     {5},
     4,
     true,
     9},
    // Channels in eights (mpiddp's own Winograd kernels take them): paddings 0, 1
    // and 2, odd and even output sizes (partial 2 x 2 tiles). Last, so that the
    // cases above keep their seeds.
    {"conv_k3_p1_c8", "conv2d(16,3,padding=1)", {8, 7, 6}, 3, true},
    {"conv_k3_p0_c8", "conv2d(8,3)", {16, 6, 9}, 2, true},
    {"conv_k3_p2_c8", "conv2d(8,3,padding=2)", {8, 5, 4}, 2, true},
};
constexpr std::size_t kOutputs = 3;  // classes for a last `linear` without a width

void check(herr_t status, const std::string& what) {
  if (status < 0) throw std::runtime_error("HDF5: cannot write " + what);
}

void write_floats(hid_t group, const std::string& name, const float* data, const std::vector<hsize_t>& dims) {
  const hid_t space =
      dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t set = H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  check(set, name);
  check(H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), name);
  H5Dclose(set);
  H5Sclose(space);
}

void write_tokens(hid_t group, const std::vector<std::int64_t>& tokens, const std::vector<hsize_t>& dims) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t set = H5Dcreate2(group, "tokens", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  check(set, "tokens");
  check(H5Dwrite(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens.data()), "tokens");
  H5Dclose(set);
  H5Sclose(space);
}

void write_count(hid_t group, const std::string& name, std::int64_t value) {
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t set = H5Dcreate2(group, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  check(set, name);
  check(H5Dwrite(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value), name);
  H5Dclose(set);
  H5Sclose(space);
}

void write_text(hid_t object, const char* name, const std::string& value) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.size() + 1);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  check(H5Awrite(attr, type, value.c_str()), name);
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
}

std::vector<hsize_t> batch_dims(std::size_t batch, const Shape& sample) {
  std::vector<hsize_t> dims{batch};
  for (std::size_t d : sample) dims.push_back(d);
  return dims;
}

// A group with every parameter (or buffer) of the model under its name.
void write_arrays(hid_t file, const std::string& group_name, const std::vector<Parameter>& list, const float* base) {
  const hid_t group = H5Gcreate2(file, group_name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  for (const Parameter& p : list)
    write_floats(group, p.name, base + p.offset, std::vector<hsize_t>(p.shape.begin(), p.shape.end()));
  H5Gclose(group);
}

void write_counters(hid_t file, const std::string& group_name, const ParameterStore& params) {
  const hid_t group = H5Gcreate2(file, group_name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  for (std::size_t i = 0; i < params.counter_names().size(); ++i)
    write_count(group, params.counter_names()[i], params.counter(i));
  H5Gclose(group);
}

void run_case(hid_t file, const Case& c, std::uint64_t seed) {
  Sequential model(build_layers(c.layers, kOutputs, false), c.input, seed);
  ParameterStore& p = model.parameters();
  // Every parameter and buffer random (BatchNorm's initial 1 and 0 would hide
  // errors); running variances positive; counters not at their start.
  CounterRng rng(seed);
  for (std::size_t i = 0; i < p.total(); ++i) p.values()[i] = 2.0f * rng.uniform(i) - 1.0f;
  for (const Parameter& b : p.buffer_list())
    for (std::size_t i = 0; i < b.count; ++i) {
      const float u = rng.uniform(1000000 + b.offset + i);
      p.buffers()[b.offset + i] = b.name.ends_with("running_var") ? 0.5f + u : 2.0f * u - 1.0f;
    }
  for (std::size_t i = 0; i < p.counter_names().size(); ++i) p.counter(i) = 5;

  const hid_t group = H5Gcreate2(file, c.name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  write_text(group, "layers", c.layers);
  write_text(group, "mode", c.training ? "train" : "eval");
  write_arrays(group, "params", p.list(), p.values());
  write_arrays(group, "buffers_before", p.buffer_list(), p.buffers());
  write_counters(group, "counters_before", p);

  Matrix x(c.batch, element_count(c.input));
  CounterRng data(seed + 1);
  std::vector<std::int64_t> tokens;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (c.vocab == 0) {
      x.data()[i] = 4.0f * data.uniform(i) - 2.0f;
      continue;
    }
    // Token ids travel as their int32 bytes (token_windows.hpp).
    const auto id = static_cast<std::int32_t>(data.bits(i) % static_cast<std::uint64_t>(c.vocab));
    std::memcpy(x.data() + i, &id, sizeof(id));
    tokens.push_back(id);
  }
  ForwardContext ctx;
  ctx.training = c.training;
  const Matrix& y = model.forward(x, ctx);
  Matrix dy(y.rows(), y.cols());
  CounterRng grad(seed + 2);
  for (std::size_t i = 0; i < dy.size(); ++i) dy.data()[i] = 2.0f * grad.uniform(i) - 1.0f;
  if (c.vocab > 0) write_tokens(group, tokens, batch_dims(c.batch, c.input));
  else write_floats(group, "x", x.data(), batch_dims(c.batch, c.input));
  write_floats(group, "y", y.data(), batch_dims(c.batch, model.output_shape()));
  write_floats(group, "dy", dy.data(), batch_dims(c.batch, model.output_shape()));
  Matrix dx;
  model.backward(dy, false, nullptr, &dx);
  if (c.vocab == 0) write_floats(group, "dx", dx.data(), batch_dims(c.batch, c.input));
  write_arrays(group, "grads", p.list(), p.grads());
  write_arrays(group, "buffers_after", p.buffer_list(), p.buffers());
  write_counters(group, "counters_after", p);
  H5Gclose(group);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: layer_cases OUT.h5 [auto|onednn|openblas|own|winograd|winograd_all|own_winograd|own_winograd4]\n");
    return 2;
  }
  const char* convolutions = "";
  try {
    // The CPU kernels every case runs on (train.cpu_kernels): each choice must match
    // torch.nn. own (a layer's choice) runs every convolution on mpiddp's own kernels,
    // winograd every one oneDNN has Winograd kernels for (3 x 3, stride 1, AVX-512),
    // winograd_all with their weight gradients too (where oneDNN has them),
    // own_winograd every one mpiddp's own Winograd kernels take (3 x 3, stride 1, channels in 8s).
    CpuKernels choice = CpuKernels::automatic;
    if (argc == 3) {
      const auto kernels = parse_choice<CpuKernels>(argv[2]);
      if (!kernels) throw std::runtime_error("kernels must be " + choice_list<CpuKernels>() + ", not " + argv[2]);
      choice = *kernels;
      mpiddp::cpu::use_gemm_library(choice);
    }
    const mpiddp::cpu::LibraryScope layers_choice(choice);
    const bool layers_only = layer_only_kernels(choice);
    convolutions = mpiddp::cpu::convolution_method(layers_only ? choice : mpiddp::cpu::gemm_library());
    const hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) throw std::runtime_error(std::string("cannot create ") + argv[1]);
    std::uint64_t seed = 1;
    for (const Case& c : kCases) run_case(file, c, seed += 10);
    H5Fclose(file);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "layer_cases: error: %s\n", e.what());
    return 1;
  }
  std::printf("wrote %zu cases to %s (convolutions: %s)\n", sizeof(kCases) / sizeof(kCases[0]), argv[1], convolutions);
  return 0;
}
