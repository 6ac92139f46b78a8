#pragma once
// A layer call's arguments, read by name: each layer's factory declares its
// parameters in PyTorch's positional order, then reads them typed and
// range-checked. Anything left unread is an unknown argument.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mpiddp/nn/model_builder.hpp"

namespace mpiddp {

class LayerArguments {
 public:
  // `names`: the parameters in positional order.
  LayerArguments(const LayerCall& call, std::vector<std::string> names);
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  // A whole number >= minimum; `fallback` when absent, or an error when there is none.
  long integer(const std::string& name, std::optional<long> fallback, long minimum);
  // A number in [low, high] (high_open: < high).
  double real(const std::string& name, double fallback, double low, double high, bool high_open);
  // Throws for arguments no read asked for.
  void finish() const;

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> names_;
  std::vector<std::string> read_;
};

}  // namespace mpiddp
