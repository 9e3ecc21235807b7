#include "apps/rlhf/rollout_pool.hpp"

#include <algorithm>

namespace troupe::apps::rlhf {

rollout_pool::rollout_pool(std::vector<std::string> members) : members_(std::move(members)) {}

bool rollout_pool::is_member(const std::string& name) const {
  return std::find(members_.begin(), members_.end(), name) != members_.end();
}

bool rollout_pool::add(const std::string& name) {
  if (is_member(name) || std::find(joiners_.begin(), joiners_.end(), name) != joiners_.end()) {
    return false;
  }
  joiners_.push_back(name);
  return true;
}

std::vector<rollout_pool::reassignment> rollout_pool::remove(const std::string& name, bool* known) {
  if (auto j = std::find(joiners_.begin(), joiners_.end(), name); j != joiners_.end()) {
    joiners_.erase(j);
    if (known != nullptr) *known = true;
    return {};
  }
  auto it = std::find(members_.begin(), members_.end(), name);
  if (known != nullptr) *known = it != members_.end();
  if (it == members_.end()) return {};
  members_.erase(it);
  changed_ = true;
  std::set<uint64_t> orphans = std::move(held_[name]);
  held_.erase(name);
  if (members_.empty() || orphans.empty()) return {};
  std::map<std::string, std::vector<uint64_t>> to;
  for (uint64_t id : orphans) {
    const std::string& worker = members_[next_++ % members_.size()];
    to[worker].push_back(id);
    held_[worker].insert(id);
  }
  std::vector<reassignment> out;
  for (auto& [worker, ids] : to)
    out.push_back({worker, std::move(ids)});
  return out;
}

uint64_t rollout_pool::begin_sync() {
  if (!joiners_.empty()) {
    members_.insert(members_.end(), joiners_.begin(), joiners_.end());
    joiners_.clear();
    changed_ = true;
  }
  if (changed_) ++epoch_;
  changed_ = false;
  return epoch_;
}

std::map<std::string, std::vector<uint64_t>> rollout_pool::assign(
    const std::vector<uint64_t>& ids) {
  std::map<std::string, std::vector<uint64_t>> out;
  if (members_.empty()) return out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& worker = members_[i % members_.size()];
    out[worker].push_back(ids[i]);
    held_[worker].insert(ids[i]);
  }
  return out;
}

bool rollout_pool::finish(const std::string& worker, uint64_t id) {
  auto it = held_.find(worker);
  return it != held_.end() && it->second.erase(id) > 0;
}

bool rollout_pool::holds(const std::string& worker, uint64_t id) const {
  auto it = held_.find(worker);
  return it != held_.end() && it->second.contains(id);
}

size_t rollout_pool::unfinished(const std::string& worker) const {
  auto it = held_.find(worker);
  return it == held_.end() ? 0 : it->second.size();
}

}  // namespace troupe::apps::rlhf
