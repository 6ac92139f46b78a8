#include "mpiddp/nn/layouts.hpp"

#include <cstdint>
#include <numeric>
#include <stdexcept>

namespace mpiddp {
namespace {

bool whole_blocks(const Shape& shape) { return shape.size() == 3 && shape[0] > 0 && shape[0] % kLayoutBlock == 0; }
// Whether a sample of this shape may be blocked: an image whose channels fill
// whole blocks, with more than one position; with one, both layouts are the same
// bytes (layout_neutral_shape) and the tensor constrains nothing.
bool blockable_shape(const Shape& shape) { return whole_blocks(shape) && shape[1] * shape[2] > 1; }
bool layout_neutral_shape(const Shape& shape) { return whole_blocks(shape) && shape[1] * shape[2] == 1; }

// Tensors tied to one layout (through layout-preserving layers), as a union-find.
struct Groups {
  std::vector<std::size_t> parent;
  explicit Groups(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), std::size_t{0}); }
  std::size_t find(std::size_t t) {
    while (parent[t] != t) t = parent[t] = parent[parent[t]];
    return t;
  }
  void unite(std::size_t a, std::size_t b) { parent[find(a)] = find(b); }
};

std::uint64_t planning_pass = 0;

}  // namespace

std::uint64_t begin_layout_planning() { return ++planning_pass; }
std::uint64_t layout_planning_pass() { return planning_pass; }

std::optional<std::vector<bool>> plan_chain_layouts(const std::vector<std::unique_ptr<Layer>>& layers,
                                                    const std::vector<bool>& absorbed,
                                                    const std::vector<Shape>& shapes, bool in_blocked,
                                                    bool out_blocked, bool allow) {
  const std::size_t count = shapes.size();  // layers.size() + 1
  // Each layer that runs (not absorbed) reads tensor `from` and writes tensor `to`,
  // past the layers it absorbed.
  struct Span {
    const Layer* layer;
    std::size_t from, to;
    LayoutRole role;  // asked once: a residual block's plans its branches
  };
  std::vector<Span> spans;
  for (std::size_t j = 0; j < layers.size(); ++j) {
    if (absorbed[j]) {
      if (!spans.empty()) spans.back().to = j + 1;
      continue;
    }
    spans.push_back({layers[j].get(), j, j + 1, layers[j]->layout_role()});
  }
  std::vector<bool> neutral(count), real(count, false);
  for (std::size_t t = 0; t < count; ++t) neutral[t] = layout_neutral_shape(shapes[t]);
  real[0] = real[count - 1] = true;
  for (const Span& s : spans) real[s.from] = real[s.to] = true;

  Groups groups(count);
  for (const Span& s : spans)
    if (s.role == LayoutRole::preserving && !neutral[s.from] && !neutral[s.to])
      groups.unite(s.from, s.to);
  std::vector<bool> forbid(count, false), must(count, false);
  // What blocking a group would save: a layout change at each end of a free
  // layer (a convolution) and of a residual block whose branches run blocked;
  // less the changes a free_output layer makes into it (a fused pooling's planes
  // written blocked cost about what a convolution's reorder does).
  std::vector<int> gain(count, 0);
  const auto add_gain = [&](std::size_t t, int amount) {
    if (!neutral[t]) gain[groups.find(t)] += amount;
  };
  for (const Span& s : spans) {
    const int ends = s.role == LayoutRole::free || (s.role == LayoutRole::preserving && s.layer->blocked_inside());
    add_gain(s.from, ends);
    add_gain(s.to, s.role == LayoutRole::free_output ? -1 : ends);
  }
  const auto forbid_tensor = [&](std::size_t t) {
    if (!neutral[t]) forbid[groups.find(t)] = true;
  };
  for (const Span& s : spans) {
    if (s.role == LayoutRole::nchw_only || s.role == LayoutRole::free_output) forbid_tensor(s.from);
    if (s.role == LayoutRole::nchw_only) forbid_tensor(s.to);
  }
  for (std::size_t t = 0; t < count; ++t)
    if (real[t] && (!allow || !blockable_shape(shapes[t]))) forbid_tensor(t);
  for (const auto& [t, blocked] : {std::pair{std::size_t{0}, in_blocked}, std::pair{count - 1, out_blocked}}) {
    if (neutral[t]) continue;
    if (blocked) must[groups.find(t)] = true;
    else forbid[groups.find(t)] = true;
  }
  std::vector<bool> layout(count, false);
  for (std::size_t t = 0; t < count; ++t) {
    if (!real[t] || neutral[t]) continue;
    const std::size_t g = groups.find(t);
    if (must[g] && forbid[g]) return std::nullopt;
    layout[t] = must[g] || (!forbid[g] && gain[g] > 0);
  }
  return layout;
}

void apply_chain_layouts(const std::vector<std::unique_ptr<Layer>>& layers, const std::vector<bool>& absorbed,
                         const std::vector<Shape>& shapes, bool in_blocked, bool out_blocked, bool allow) {
  const auto layout = plan_chain_layouts(layers, absorbed, shapes, in_blocked, out_blocked, allow);
  if (!layout) throw std::logic_error("a chain of layers cannot keep the layouts asked of its ends");
  for (std::size_t j = 0; j < layers.size(); ++j) {
    if (absorbed[j]) {
      layers[j]->set_layouts(false, false, allow);
      continue;
    }
    std::size_t to = j + 1;
    while (to < layers.size() && absorbed[to]) ++to;
    layers[j]->set_layouts((*layout)[j], (*layout)[to], allow);
  }
}

}  // namespace mpiddp
