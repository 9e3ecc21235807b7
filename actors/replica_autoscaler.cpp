#include "actors/replica_autoscaler.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::actors {

replica_autoscaler::replica_autoscaler(config::autoscale_spec spec, int initial)
    : spec_(spec), target_(std::clamp(initial, spec.min, spec.max)) {}

int replica_autoscaler::wanted(double ongoing) const {
  const double n = std::ceil(ongoing / spec_.target_ongoing_requests);
  return static_cast<int>(
      std::clamp(n, static_cast<double>(spec_.min), static_cast<double>(spec_.max)));
}

replica_autoscaler::decision replica_autoscaler::step(clock::time_point now, int64_t ongoing,
                                                      const std::vector<replica>& replicas) {
  decision out;
  const auto held = [now](std::optional<clock::time_point>& since, double delay_s) {
    if (!since) since = now;
    return now - *since >= std::chrono::duration<double>(delay_s);
  };
  recent_.emplace_back(now, ongoing);
  recent_sum_ += ongoing;
  const auto window = std::chrono::duration<double>(spec_.look_back_period_s);
  while (now - recent_.front().first >= window && recent_.size() > 1) {
    recent_sum_ -= recent_.front().second;
    recent_.pop_front();
  }
  out.mean_ongoing = static_cast<double>(recent_sum_) / static_cast<double>(recent_.size());
  int want = wanted(out.mean_ongoing);

  if (target_ == 0 || replicas.empty()) {
    // Nothing serves: a request starts a worker at once; no wish counts until one serves.
    up_since_.reset();
    down_since_.reset();
    if (target_ == 0 && ongoing > 0) {
      target_ = 1;
      out.scale_to = target_;
    }
  } else if (want > target_) {
    down_since_.reset();
    if (held(up_since_, spec_.upscale_delay_s)) {
      target_ = want;
      up_since_.reset();
      out.scale_to = target_;
    }
  } else if (want < target_) {
    up_since_.reset();
    // Only the last worker goes to none, after its own delay.
    const bool to_zero = target_ == 1;
    if (!to_zero) want = std::max(want, 1);
    const double delay = to_zero ? spec_.downscale_to_zero_delay_s.value_or(spec_.downscale_delay_s)
                                 : spec_.downscale_delay_s;
    if (held(down_since_, delay)) {
      target_ = want;
      down_since_.reset();
      out.scale_to = target_;
    }
  } else {
    up_since_.reset();
    down_since_.reset();
  }
  if (!started_) {
    started_ = true;
    out.scale_to = target_;
  }

  // Bring the serving workers to the target: drain the least busy (then the newest), or let
  // the busiest draining ones serve again.
  std::vector<const replica*> serving, draining;
  for (const auto& r : replicas)
    (r.draining ? draining : serving).push_back(&r);
  const auto least_busy_first = [](const replica* a, const replica* b) {
    return a->ongoing != b->ongoing ? a->ongoing < b->ongoing : a->joined > b->joined;
  };
  if (static_cast<int>(serving.size()) > target_) {
    std::sort(serving.begin(), serving.end(), least_busy_first);
    for (size_t i = 0; i < serving.size() - static_cast<size_t>(target_); ++i) {
      out.drain.push_back(serving[i]->name);
      draining.push_back(serving[i]);
    }
  } else if (static_cast<int>(serving.size()) < target_ && !draining.empty()) {
    std::sort(draining.begin(), draining.end(), least_busy_first);
    const size_t back = std::min(draining.size(), static_cast<size_t>(target_) - serving.size());
    for (size_t i = 0; i < back; ++i) {
      out.undrain.push_back(draining.back()->name);
      draining.pop_back();
    }
  }
  for (const replica* r : draining) {
    if (r->ongoing == 0) out.retire.push_back(r->name);
  }
  return out;
}

}  // namespace troupe::actors
