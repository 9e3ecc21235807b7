#include "models/decoder/rope_frequencies.hpp"

#include <cmath>

namespace troupe::models {

std::vector<float> rope_inverse_frequencies(const decoder_config& c) {
  const int d = c.head_size();
  std::vector<float> inv(d / 2);
  const auto theta = static_cast<float>(c.rope_theta);
  for (int i = 0; i < d / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(d);
    inv[i] = 1.0f / std::pow(theta, exponent);
  }
  const rope_scaling& s = c.rope;
  const auto factor = static_cast<float>(s.factor);
  if (s.type == rope_scaling::kind::linear) {
    for (float& f : inv)
      f /= factor;
  } else if (s.type == rope_scaling::kind::llama3) {
    const auto old_context = static_cast<float>(s.original_max_position_embeddings);
    const auto low = static_cast<float>(s.low_freq_factor),
               high = static_cast<float>(s.high_freq_factor);
    const float low_freq_wavelength = old_context / low, high_freq_wavelength = old_context / high;
    for (float& f : inv) {
      const float wavelength = 2.0f * static_cast<float>(M_PI) / f;
      if (wavelength > low_freq_wavelength) {
        f /= factor;
      } else if (wavelength >= high_freq_wavelength) {  // between: a blend
        const float smooth = (old_context / wavelength - low) / (high - low);
        f = (1.0f - smooth) * f / factor + smooth * f;
      }
    }
  }
  return inv;
}

}  // namespace troupe::models
