#pragma once

#include <vector>

#include "models/decoder/decoder_config.hpp"

namespace troupe::models {

/// RoPE's inverse frequencies for a head of the Llama family, head_size() / 2 of them, as
/// Hugging Face computes them in f32: 1 / theta^(2i / d), divided by the factor for `linear`
/// scaling, and for `llama3` divided for long wavelengths, kept for short ones and blended
/// between (Llama 3.1's rule).
[[nodiscard]] std::vector<float> rope_inverse_frequencies(const decoder_config& config);

}  // namespace troupe::models
