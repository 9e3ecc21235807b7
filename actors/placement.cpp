#include "actors/placement.hpp"

#include <algorithm>

namespace troupe::actors {

void placement::remove_worker(const std::string& node) {
  workers_.erase(node);
  std::erase_if(node_of_, [&](const auto& kv) { return kv.second == node; });
}

std::optional<std::string> placement::choose() const {
  std::optional<std::string> best;
  size_t best_load = 0;
  for (const auto& w : workers_) {  // ordered by id, so ties go to the lowest
    const auto load = static_cast<size_t>(std::count_if(
        node_of_.begin(), node_of_.end(), [&](const auto& kv) { return kv.second == w; }));
    if (!best || load < best_load) {
      best = w;
      best_load = load;
    }
  }
  return best;
}

std::optional<std::string> placement::node_of(const std::string& actor) const {
  auto it = node_of_.find(actor);
  if (it == node_of_.end()) return std::nullopt;
  return it->second;
}

int placement::elastic_target(const config::elastic_spec& e) const {
  return std::clamp(static_cast<int>(workers_.size()), e.min, e.max);
}

}  // namespace troupe::actors
