#pragma once
// The input file's enum-valued settings. Each enum is followed by its one name
// table, which serves parsing (load_config), printing (the resolved input file,
// banners, checkpoints) and error messages (the allowed values); no other code
// spells these names. Kept to C++17 and free of other mpiddp headers: the CUDA
// kernels include it (through device/elementwise.hpp).
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace mpiddp {

template <class E>
struct NamedChoice {
  E value;
  const char* name;
};

// Specialised after each enum: `static constexpr std::array<NamedChoice<E>, N> table`.
template <class E>
struct ChoiceNames;

// data.task
enum class DataTask { classification, regression };
template <>
struct ChoiceNames<DataTask> {
  static constexpr std::array<NamedChoice<DataTask>, 2> table{
      {{DataTask::classification, "classification"}, {DataTask::regression, "regression"}}};
};

// train.cpu_kernels: the library of the CPU's matrix products (device/cpu_gemm.hpp);
// own: mpiddp's own kernels for every layer that has them (thin convolutions),
// the library of auto for the rest; winograd: auto's choices, and oneDNN's
// Winograd convolutions for the layers they suit (3 x 3, stride 1, on AVX-512),
// their weight gradients direct; winograd_all: the weight gradients on Winograd's
// kernels too (auto takes them on small planes); own_winograd: mpiddp's own
// Winograd convolutions (F(2x2, 3x3), any CPU) for the layers they suit;
// own_winograd4: the same with F(4x4, 3x3) (4 times fewer multiplications);
// tune: timed per layer at start-up (train/kernel_tuning.hpp).
enum class CpuKernels { automatic, onednn, openblas, own, winograd, winograd_all, own_winograd, own_winograd4, tune };
template <>
struct ChoiceNames<CpuKernels> {
  static constexpr std::array<NamedChoice<CpuKernels>, 9> table{{{CpuKernels::automatic, "auto"},
                                                                 {CpuKernels::onednn, "onednn"},
                                                                 {CpuKernels::openblas, "openblas"},
                                                                 {CpuKernels::own, "own"},
                                                                 {CpuKernels::winograd, "winograd"},
                                                                 {CpuKernels::winograd_all, "winograd_all"},
                                                                 {CpuKernels::own_winograd, "own_winograd"},
                                                                 {CpuKernels::own_winograd4, "own_winograd4"},
                                                                 {CpuKernels::tune, "tune"}}};
};
// The choices that cover some of a layer's work (its convolutions), never a process's products.
constexpr bool layer_only_kernels(CpuKernels choice) {
  return choice == CpuKernels::own || choice == CpuKernels::winograd || choice == CpuKernels::winograd_all ||
         choice == CpuKernels::own_winograd || choice == CpuKernels::own_winograd4;
}

// data.loader: where training and test batches are read (train/loader_placement.hpp);
// auto: a loader thread where the rank has a CPU to spare for it, else inline.
enum class LoaderPlacement { automatic, thread, inline_reads };
template <>
struct ChoiceNames<LoaderPlacement> {
  static constexpr std::array<NamedChoice<LoaderPlacement>, 3> table{{{LoaderPlacement::automatic, "auto"},
                                                                      {LoaderPlacement::thread, "thread"},
                                                                      {LoaderPlacement::inline_reads, "inline"}}};
};

// A transform of data.augment (the list and its arguments are parsed in config.cpp).
enum class AugmentKind { hflip, crop, erase };
template <>
struct ChoiceNames<AugmentKind> {
  static constexpr std::array<NamedChoice<AugmentKind>, 3> table{
      {{AugmentKind::hflip, "hflip"}, {AugmentKind::crop, "crop"}, {AugmentKind::erase, "erase"}}};
};

// model.activation (relu, exact-erf gelu, tanh); gelu_tanh (GELU's tanh
// approximation) only as the layer gelu(approximate=tanh), so it has no name here.
enum class ActivationKind { relu, gelu, tanh, gelu_tanh };
template <>
struct ChoiceNames<ActivationKind> {
  static constexpr std::array<NamedChoice<ActivationKind>, 3> table{
      {{ActivationKind::relu, "relu"}, {ActivationKind::gelu, "gelu"}, {ActivationKind::tanh, "tanh"}}};
};

// train.device: `automatic` is "auto" (the GPU when every rank has one, else the CPU).
enum class DeviceChoice { automatic, cpu, cuda };
template <>
struct ChoiceNames<DeviceChoice> {
  static constexpr std::array<NamedChoice<DeviceChoice>, 3> table{
      {{DeviceChoice::automatic, "auto"}, {DeviceChoice::cpu, "cpu"}, {DeviceChoice::cuda, "cuda"}}};
};

// train.precision of matrix products. bf16: bf16 inputs, fp32 accumulation and
// output, fp32 master weights, gradients and loss. tf32: fp32 storage, TF32 tensor cores.
enum class Precision { fp32, tf32, bf16 };
template <>
struct ChoiceNames<Precision> {
  static constexpr std::array<NamedChoice<Precision>, 3> table{
      {{Precision::fp32, "fp32"}, {Precision::tf32, "tf32"}, {Precision::bf16, "bf16"}}};
};

// train.nonfinite: what a NaN/Inf loss or gradient does.
enum class NonfinitePolicy { stop, skip };
template <>
struct ChoiceNames<NonfinitePolicy> {
  static constexpr std::array<NamedChoice<NonfinitePolicy>, 2> table{
      {{NonfinitePolicy::stop, "stop"}, {NonfinitePolicy::skip, "skip"}}};
};

// optim.name
enum class OptimizerKind { sgd, adamw };
template <>
struct ChoiceNames<OptimizerKind> {
  static constexpr std::array<NamedChoice<OptimizerKind>, 2> table{
      {{OptimizerKind::sgd, "sgd"}, {OptimizerKind::adamw, "adamw"}}};
};

// optim.schedule
enum class ScheduleKind { constant, step, cosine };
template <>
struct ChoiceNames<ScheduleKind> {
  static constexpr std::array<NamedChoice<ScheduleKind>, 3> table{
      {{ScheduleKind::constant, "constant"}, {ScheduleKind::step, "step"}, {ScheduleKind::cosine, "cosine"}}};
};

// ddp.allreduce_dtype: the type gradient buckets travel in.
enum class AllreduceDtype { fp32, bf16 };
template <>
struct ChoiceNames<AllreduceDtype> {
  static constexpr std::array<NamedChoice<AllreduceDtype>, 2> table{
      {{AllreduceDtype::fp32, "fp32"}, {AllreduceDtype::bf16, "bf16"}}};
};

// dist.backend of the gradient all-reduce: `automatic` is "auto" (nccl on GPUs
// when built with it, else mpi); setup_compute resolves it to mpi or nccl.
enum class DistBackend { automatic, mpi, nccl };
template <>
struct ChoiceNames<DistBackend> {
  static constexpr std::array<NamedChoice<DistBackend>, 3> table{
      {{DistBackend::automatic, "auto"}, {DistBackend::mpi, "mpi"}, {DistBackend::nccl, "nccl"}}};
};

// debug.fail_mode (tests): `throw_error` is "throw". `erred_exit`: the rank's error
// line and its notice to the others, then its end without MPI_Abort, as when the
// launcher is slow to end the job after a rank's error.
enum class FailMode { none, throw_error, exit, erred_exit, hang, nan, signal };
template <>
struct ChoiceNames<FailMode> {
  static constexpr std::array<NamedChoice<FailMode>, 7> table{{{FailMode::none, "none"},
                                                               {FailMode::throw_error, "throw"},
                                                               {FailMode::exit, "exit"},
                                                               {FailMode::erred_exit, "erred_exit"},
                                                               {FailMode::hang, "hang"},
                                                               {FailMode::nan, "nan"},
                                                               {FailMode::signal, "signal"}}};
};

// ---- the functions every table serves ----

template <class E>
const char* name_of(E value) {
  for (const auto& choice : ChoiceNames<E>::table)
    if (choice.value == value) return choice.name;
  return "?";
}

template <class E>
std::optional<E> parse_choice(std::string_view text) {
  for (const auto& choice : ChoiceNames<E>::table)
    if (text == choice.name) return choice.value;
  return std::nullopt;
}

// "relu | gelu | tanh": the allowed values, for messages and --help.
template <class E>
std::string choice_list() {
  std::string list;
  for (const auto& choice : ChoiceNames<E>::table) list += (list.empty() ? "" : " | ") + std::string(choice.name);
  return list;
}

}  // namespace mpiddp
