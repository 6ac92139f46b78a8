#pragma once
// A layer call's arguments, read by name: the layer table (layer_table.hpp)
// names them in PyTorch's positional order with their defaults; each layer's
// factory reads them typed and range-checked.
#include <map>
#include <string>
#include <vector>

#include "mpiddp/nn/layer_table.hpp"
#include "mpiddp/nn/model_builder.hpp"

namespace mpiddp {

class LayerArguments {
 public:
  // Every argument of `spec`, from the call or its default; throws LayerError for
  // an unknown, repeated or missing one. `last`, `outputs`: for "=classes".
  LayerArguments(const LayerCall& call, const LayerSpec& spec, bool last, std::size_t outputs);
  // A whole number in [minimum, 2^30].
  long integer(const std::string& name, long minimum) const;
  // A number in [low, high] (high_open: < high).
  double real(const std::string& name, double low, double high, bool high_open) const;

  // true or false (the table's type "bool").
  bool boolean(const std::string& name) const;
  // One of the table's choices (its type "word").
  const std::string& word(const std::string& name) const;

 private:
  const std::string& text(const std::string& name) const;
  std::map<std::string, std::string> values_;
  const LayerSpec& spec_;
};

}  // namespace mpiddp
