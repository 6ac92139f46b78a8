#pragma once
// Which CPU library each layer's products ran on, as a run keeps it (the
// checkpoint attribute `cpu_kernels`), so a resume continues bit for bit: the
// process's library, then `;name=library` for every layer with a library of its
// own (mpiddp's own kernels, oneDNN's Winograd convolutions, or train.cpu_kernels
// = tune): "onednn", "onednn;layers.0=own;layers.4=winograd" or
// "onednn;layers.0=onednn;layers.4=openblas".
#include <string>

#include "mpiddp/nn/sequential.hpp"

namespace mpiddp {

// The choices of `model` (its layers' Layer::cpu_kernels) under process library `library`.
std::string kernel_choices_text(Sequential& model, CpuKernels library);

// Whether `text` has that form: names made of letters, digits and dots, each
// library onednn or openblas (and a layer's also own or winograd), at most one
// entry per layer. The model is not needed.
bool valid_kernel_choices(const std::string& text);

// Whether every library `text` names is in this build (oneDNN may be missing)
// and runs on this CPU (own needs AVX2 and FMA, winograd oneDNN on AVX-512).
bool kernel_choices_available(const std::string& text);

// Gives each layer `text` names its library (the others: the process's) and
// returns the process library. Throws InputError naming `source` when `text`
// does not parse or names a layer `model` does not have, or one without products.
CpuKernels apply_kernel_choices(Sequential& model, const std::string& text, const std::string& source);

// A fresh run's own kernels and Winograd convolutions: with train.cpu_kernels =
// own, every layer that has them (InputError where this CPU cannot run them); with
// auto or tune, the layers own kernels suit with `threads` threads per rank
// (Layer::own_kernels_suit); then, with auto and own where `winograd_everywhere`
// (every rank's CPU runs them), and with winograd, Winograd's for the other layers
// they suit (Layer::winograd_suits; winograd: InputError unless `winograd_everywhere`).
// A rule, not a timing, so two runs of one input file with the same threads per
// rank on one kind of CPU choose alike (the banner and checkpoints name the choices).
void give_own_kernels(Sequential& model, CpuKernels setting, int threads, bool winograd_everywhere);

// The names of the layers whose choice is `choice` (own, winograd), ", "-separated ("" if none).
std::string layers_on(Sequential& model, CpuKernels choice);

}  // namespace mpiddp
