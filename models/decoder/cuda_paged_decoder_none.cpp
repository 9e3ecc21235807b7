// The CUDA decoder in a build without CUDA.

#include "absl/strings/str_cat.h"
#include "models/decoder/cuda_paged_decoder.hpp"

namespace troupe::models {

absl::StatusOr<std::unique_ptr<paged_decoder>> make_cuda_paged_decoder(const decoder_layout&,
                                                                       const float*, int, int, int,
                                                                       int device,
                                                                       const decoder_options&) {
  return absl::UnavailableError(
      absl::StrCat("CUDA device ", device,
                   " asked for, but this build of troupe has no CUDA (build where nvcc is "
                   "installed, TROUPE_CUDA=ON), or serve on the CPU"));
}

}  // namespace troupe::models
