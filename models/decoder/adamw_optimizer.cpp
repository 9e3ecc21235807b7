#include "models/decoder/adamw_optimizer.hpp"

#include <algorithm>

namespace troupe::models {

adamw_optimizer::adamw_optimizer(const decoder_layout& layout, int64_t begin, int64_t end,
                                 adamw_options options)
    : adamw_optimizer(layout, std::vector<param_range>{{begin, end}}, options) {}

adamw_optimizer::adamw_optimizer(const decoder_layout& layout, std::vector<param_range> ranges,
                                 adamw_options options)
    : options_(options), ranges_(std::move(ranges)) {
  int64_t moment = 0;
  for (const param_range& range : ranges_) {
    const auto add = [&](int64_t b, int64_t e, bool decay) {
      runs_.push_back({b, e, moment, decay});
      moment += e - b;
    };
    int64_t at = range.begin;
    for (const auto& slot : layout.slots()) {
      const int64_t b = std::max(slot.offset, range.begin);
      const int64_t e = std::min(slot.offset + slot.numel, range.end);
      if (b >= e) continue;
      if (at < b) add(at, b, false);  // alignment padding: zero, stays zero
      add(b, e, slot.decay);
      at = e;
    }
    if (at < range.end) add(at, range.end, false);
  }
  m_.assign(moment, 0.0f);
  v_.assign(moment, 0.0f);
}

void adamw_optimizer::step(float* params, const float* grads, float lr, float grad_scale) {
  ++steps_;
  for (const run& r : runs_) {
    const kernels::adamw_params p{
        lr,    options_.beta1, options_.beta2, options_.eps, r.decay ? options_.weight_decay : 0.0f,
        steps_};
    kernels::cpu::adamw_update(params + r.begin, grads + r.begin, m_.data() + r.moment,
                               v_.data() + r.moment, r.end - r.begin, p, grad_scale);
  }
}

}  // namespace troupe::models
