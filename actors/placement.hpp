#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/config/app_spec.hpp"

namespace troupe::actors {

/// Where the supervisor puts role actors in a cluster, without CAF: on the live worker with the
/// fewest actors, ties going to the lowest id.
class placement {
 public:
  void add_worker(const std::string& node) { workers_.insert(node); }

  /// Removes `node` and forgets the actors placed on it.
  void remove_worker(const std::string& node);

  /// The worker for the next actor, or nullopt when there is none.
  [[nodiscard]] std::optional<std::string> choose() const;

  void assign(const std::string& actor, const std::string& node) { node_of_[actor] = node; }
  void release(const std::string& actor) { node_of_.erase(actor); }
  [[nodiscard]] std::optional<std::string> node_of(const std::string& actor) const;

  [[nodiscard]] size_t worker_count() const { return workers_.size(); }
  [[nodiscard]] bool has_worker(const std::string& node) const { return workers_.count(node) > 0; }

  /// How many actors an elastic role should have now: one per worker, within [min, max].
  [[nodiscard]] int elastic_target(const config::elastic_spec& e) const;

 private:
  std::set<std::string> workers_;
  std::map<std::string, std::string> node_of_;
};

}  // namespace troupe::actors
