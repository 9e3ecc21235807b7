#include "models/gpt/adamw_optimizer.hpp"

#include <algorithm>

namespace troupe::models {

adamw_optimizer::adamw_optimizer(const gpt_layout& layout, int64_t begin, int64_t end,
                                 adamw_options options)
    : options_(options), begin_(begin), end_(end), m_(end - begin), v_(end - begin) {
  int64_t at = begin;
  for (const auto& slot : layout.slots()) {
    const int64_t b = std::max(slot.offset, begin), e = std::min(slot.offset + slot.numel, end);
    if (b >= e) continue;
    if (at < b) runs_.push_back({at, b, false});  // alignment padding: zero, stays zero
    runs_.push_back({b, e, slot.decay});
    at = e;
  }
  if (at < end) runs_.push_back({at, end, false});
}

void adamw_optimizer::step(float* params, const float* grads, float lr, float grad_scale) {
  ++steps_;
  for (const run& r : runs_) {
    const kernels::adamw_params p{
        lr,    options_.beta1, options_.beta2, options_.eps, r.decay ? options_.weight_decay : 0.0f,
        steps_};
    kernels::cpu::adamw_update(params + r.begin, grads + r.begin, m_.data() + (r.begin - begin_),
                               v_.data() + (r.begin - begin_), r.end - r.begin, p, grad_scale);
  }
}

}  // namespace troupe::models
