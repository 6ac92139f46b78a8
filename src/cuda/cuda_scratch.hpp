#pragma once
// Device memory that grows on demand, for the CUDA op families' temporaries.
#include <cstddef>

namespace mpiddp::cuda {

// Contents are not kept when it grows (no user needs them).
template <class T>
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch();
  T* get(std::size_t count);  // at least count elements

 private:
  T* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace mpiddp::cuda
