#pragma once
// Which activations of a chain of layers are kept in oneDNN's blocked layout
// (nChw16c: channels in blocks of 16, the 16 of a position side by side) instead
// of NCHW. oneDNN's convolutions run in that layout; a chain that keeps it between
// them (through BatchNorm, ReLU, residual adds and average pooling) saves the
// layout changes around every convolution. Every value keeps its bits: the
// layers' sums run in the same order in either layout.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "mpiddp/device/blocked_layout.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp {

// A planning pass (Sequential::plan_layouts) starts: what a layer asks of the
// layers inside it (Residual::layout_role plans its branches) is asked once per
// pass, not once per question, which nesting would multiply.
std::uint64_t begin_layout_planning();
std::uint64_t layout_planning_pass();

// The layouts of a chain's tensors: shapes[j] is layer j's input, shapes.back()
// the chain's output; absorbed[j]: layer j runs inside the one before it. The
// chain's input and output layouts are given (`in_blocked`, `out_blocked`); every
// other tensor is blocked where the layers around it allow (Layer::layout_role),
// `allow` is set, its channels fill whole blocks, and it saves layout changes:
// tensors tied by layout-preserving layers are blocked together when more
// convolution (or residual block) ends touch them than layers that would write
// them blocked from NCHW (a fused pooling). Returns [j] for each tensor (false for
// a tensor inside an absorbed layer's span, or one with a single position, whose
// layouts are the same bytes); nullopt when the given ends cannot be met.
std::optional<std::vector<bool>> plan_chain_layouts(const std::vector<std::unique_ptr<Layer>>& layers,
                                                    const std::vector<bool>& absorbed,
                                                    const std::vector<Shape>& shapes, bool in_blocked,
                                                    bool out_blocked, bool allow);

// Plans the chain and tells each layer its layouts (Layer::set_layouts); an
// absorbed layer gets NCHW (it runs inside the one before). Throws
// std::logic_error if the ends cannot be met (a caller asks only where they can).
void apply_chain_layouts(const std::vector<std::unique_ptr<Layer>>& layers, const std::vector<bool>& absorbed,
                         const std::vector<Shape>& shapes, bool in_blocked, bool out_blocked, bool allow);

}  // namespace mpiddp
