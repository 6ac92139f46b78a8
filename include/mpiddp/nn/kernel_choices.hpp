#pragma once
// Which CPU library each layer's products ran on, as a run keeps it (the
// checkpoint attribute `cpu_kernels`), so a resume continues bit for bit: the
// process's library, then `;name=library` for every layer with a library of its
// own (mpiddp's own kernels, oneDNN's Winograd convolutions (winograd: forward
// pass and input gradient; winograd_all: the weight gradient too), or
// train.cpu_kernels = tune): "onednn", "onednn;layers.0=own;layers.4=winograd" or
// "onednn;layers.0=onednn;layers.4=openblas".
#include <string>

#include "mpiddp/nn/sequential.hpp"

namespace mpiddp {

// The choices of `model` (its layers' Layer::cpu_kernels) under process library `library`.
std::string kernel_choices_text(Sequential& model, CpuKernels library);

// Whether `text` has that form: names made of lower-case letters, digits, dots and underscores, each
// library onednn or openblas (and a layer's also own, winograd or winograd_all), at most one
// entry per layer. The model is not needed.
bool valid_kernel_choices(const std::string& text);

// Whether this rank's build and CPU run `layer` on `library`: oneDNN may be
// missing from the build, own kernels need AVX2 and FMA (and a shape they take),
// and oneDNN has Winograd convolutions only on AVX-512, for some shapes, and
// which shapes may differ between CPUs (their caches).
bool runs_here(const Layer& layer, CpuKernels library);

// Whether `text` parses and every library it names runs here (runs_here) for the
// layer of `model` it names it for (a layer `model` lacks is
// check_kernel_choices_fit's to refuse).
bool kernel_choices_available(Sequential& model, const std::string& text);

// Throws InputError naming `source` when `text` does not parse or cannot be
// `model`'s: it names a layer `model` does not have, one without products of its
// own, or own kernels for a layer that has none on a CPU that has them. What
// differs between CPUs is kernel_choices_available's, not a refusal.
void check_kernel_choices_fit(Sequential& model, const std::string& text, const std::string& source);

// Gives each layer `text` names its library (the others: the process's) and
// returns the process library, after check_kernel_choices_fit.
CpuKernels apply_kernel_choices(Sequential& model, const std::string& text, const std::string& source);

// A fresh run's own kernels and Winograd convolutions: with train.cpu_kernels =
// own, every layer that has them (InputError where this CPU cannot run them); with
// auto or tune, the layers own kernels suit with `threads` threads per rank
// (Layer::own_kernels_suit); then, with auto and own where `winograd_everywhere`
// (every rank's CPU runs them), and with winograd and winograd_all, Winograd's for
// the other layers they suit (Layer::winograd_suits; InputError unless
// `winograd_everywhere`): winograd_all where its weight gradient suits too
// (Layer::winograd_weight_gradient_suits; with winograd_all: where oneDNN has it),
// winograd elsewhere (and for every such layer with winograd); with auto and own
// where some rank lacks them, mpiddp's own F(4x4, 3x3) for the layers those suit
// (Layer::own_winograd_suits). With own_winograd (own_winograd4), mpiddp's own
// Winograd kernels for every layer they take (Layer::has_own_winograd) and auto's
// choices for the others.
// A rule, not a timing, so two runs of one input file with the same threads per
// rank on one kind of CPU choose alike (the banner and checkpoints name the choices).
void give_own_kernels(Sequential& model, CpuKernels setting, int threads, bool winograd_everywhere);

// The names of the layers whose choice is `choice` (own, winograd, winograd_all, own_winograd, own_winograd4), ", "-separated
// ("" if none).
std::string layers_on(Sequential& model, CpuKernels choice);

}  // namespace mpiddp
