#include "runtime/cluster/head_view.hpp"

namespace troupe::cluster {

void head_view::publish(std::string status_msgpack, std::vector<metrics_text> worker_metrics) {
  std::lock_guard<std::mutex> lock(mu_);
  status_ = std::move(status_msgpack);
  worker_metrics_ = std::move(worker_metrics);
}

nlohmann::json head_view::status() const {
  std::string bytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bytes = status_;
  }
  if (bytes.empty()) return nlohmann::json::object();
  return nlohmann::json::from_msgpack(bytes, true, false);
}

metrics::merged_exposition head_view::metrics() const {
  std::vector<metrics::exposition_source> sources;
  sources.push_back({{{"node", "head"}, {"role", "head"}}, head_metrics_.prometheus_text()});
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [node, text] : worker_metrics_)
      sources.push_back({{{"node", node}, {"role", "worker"}}, *text});
  }
  return metrics::merge_expositions(sources);
}

}  // namespace troupe::cluster
