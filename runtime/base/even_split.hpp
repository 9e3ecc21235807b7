#pragma once

#include <algorithm>
#include <cstdint>

namespace troupe {

/// `total` items split over `parts` in order, as evenly as possible: the first total % parts
/// parts hold one item more. Ring collectives split buffers this way, and data-parallel ranks
/// their share of a global batch, so that any world size covers every item exactly once.
struct even_split {
  int64_t total;
  int parts;

  [[nodiscard]] int64_t begin(int part) const {
    return part * (total / parts) + std::min<int64_t>(part, total % parts);
  }
  [[nodiscard]] int64_t size(int part) const {
    return total / parts + (part < total % parts ? 1 : 0);
  }
};

}  // namespace troupe
