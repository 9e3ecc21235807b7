#pragma once

// exp, log and tanh written so that GCC vectorizes loops that call them (glibc's vector expf
// needs -ffast-math, which would loosen every other kernel). Relative error below 2e-7 on
// [-87, 88] (exp).

#include <bit>
#include <cmath>
#include <cstdint>

namespace troupe::kernels::cpu {

inline float fast_exp(float x) {
  x = x < -87.0f ? -87.0f : x;  // ternaries, not fmin/fmax: those stay library calls
  x = x > 88.0f ? 88.0f : x;
  // Round to nearest by adding and removing 1.5 * 2^23 (floorf would stay a library call).
  constexpr float magic = 12582912.0f;
  const float n = (x * 1.44269504088896341f + magic) - magic;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;  // x - n*ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t e = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(e);
}

// log for normal x > 0 (Cephes' logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)), a polynomial in
// m - 1); relative error about 1e-7.
inline float fast_log(float x) {
  const int32_t bits = std::bit_cast<int32_t>(x);
  int32_t e = ((bits >> 23) & 0xff) - 126;  // x = m 2^e, m in [1/2, 1)
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f000000);
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1 : e;
  m = low ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  const float fe = static_cast<float>(e);
  y += -2.12194440e-4f * fe;
  y += -0.5f * z;
  return m + y + 0.693359375f * fe;
}

inline float fast_tanh(float x) {
  return 1.0f - 2.0f / (fast_exp(2.0f * x) + 1.0f);
}

}  // namespace troupe::kernels::cpu
