#pragma once
// oneDNN's blocked activation layout nChw16c, which the CPU's convolutions run in:
// the channels of a sample in blocks of 16, each block a plane of positions whose
// 16 channels lie side by side. With channels a multiple of 16 and one position
// per plane it is the same bytes as NCHW. nn/layouts.hpp decides where it is used.
#include <cstddef>

namespace mpiddp {

constexpr std::size_t kLayoutBlock = 16;  // channels per block

// Where value (sample n, channel c, position p) lies in a blocked tensor of
// `channels` channels (a multiple of kLayoutBlock) and `positions` per plane.
inline std::size_t blocked_offset(std::size_t n, std::size_t c, std::size_t p, std::size_t channels,
                                  std::size_t positions) {
  return ((n * (channels / kLayoutBlock) + c / kLayoutBlock) * positions + p) * kLayoutBlock + c % kLayoutBlock;
}

}  // namespace mpiddp
