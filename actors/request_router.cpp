#include "actors/request_router.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace troupe::actors {

int64_t request_router::cost(const tracked& t) {
  const int64_t prompt = t.delivered == 0 ? static_cast<int64_t>(t.request.prompt.size()) : 0;
  return prompt + std::max(0, t.request.max_tokens - t.delivered);
}

int64_t request_router::load(const std::string& worker) const {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return 0;
  int64_t total = 0;
  for (const auto& [id, unused] : it->second)
    total += cost(requests_.at(id));
  return total;
}

bool request_router::takes_more(const std::string& worker, size_t running) const {
  return static_cast<int>(running) < options_.max_per_worker && draining_.count(worker) == 0;
}

std::optional<std::string> request_router::least_loaded() const {
  std::optional<std::string> best;
  int64_t best_load = 0;
  for (const auto& [name, running] : workers_) {
    if (!takes_more(name, running.size())) continue;
    const int64_t l = load(name);
    if (!best || l < best_load) {
      best = name;
      best_load = l;
    }
  }
  return best;
}

std::string request_router::choose(std::string best, std::span<const uint64_t> chain) const {
  if (chain.size() < 2) return best;
  const int64_t least = load(best);
  int best_match = affinity_.matched(best, chain);
  for (const auto& [name, running] : workers_) {
    if (!takes_more(name, running.size())) continue;
    const int match = affinity_.matched(name, chain);
    if (match > best_match && load(name) - least <= match) {
      best = name;
      best_match = match;
    }
  }
  return best;
}

std::vector<request_router::command> request_router::drain() {
  std::vector<command> out;
  while (!queue_.empty()) {
    auto least = least_loaded();
    if (!least) break;
    const uint64_t id = queue_.front();
    queue_.pop_front();
    tracked& t = requests_.at(id);
    const std::vector<uint64_t> chain = options_.prefix_block_size > 0
                                            ? affinity_.chain_of(t.request.prompt)
                                            : std::vector<uint64_t>{};
    const std::string worker = choose(std::move(*least), chain);
    if (!chain.empty()) affinity_.routed(worker, chain);
    t.worker = worker;
    workers_[worker][id] = true;
    placed_[id] = worker;
    out.push_back(dispatch{worker, t.request});
  }
  return out;
}

absl::StatusOr<std::vector<request_router::command>> request_router::submit(
    generation_request request) {
  const uint64_t id = request.id;
  if (requests_.count(id) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("request id ", id, " is in use"));
  }
  const bool runs_now = queue_.empty() && least_loaded().has_value();
  if (!runs_now && static_cast<int>(queue_.size()) >= options_.max_queue) {
    return absl::ResourceExhaustedError(absl::StrCat("the server is at capacity: ", queue_.size(),
                                                     " requests are waiting; retry shortly"));
  }
  requests_.emplace(id, tracked{std::move(request), 0, {}});
  queue_.push_back(id);
  return drain();
}

std::vector<request_router::command> request_router::cancel(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return {};
  std::vector<command> out;
  if (const std::string worker = it->second.worker; !worker.empty()) {
    out.push_back(cancel_on{worker, id});
    workers_[worker].erase(id);
    placed_.erase(id);
  } else {
    std::erase(queue_, id);
  }
  requests_.erase(it);
  auto more = drain();
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

size_t request_router::running_on(const std::string& worker) const {
  auto it = workers_.find(worker);
  return it == workers_.end() ? 0 : it->second.size();
}

std::vector<request_router::command> request_router::set_draining(const std::string& worker,
                                                                  bool draining) {
  if (!draining) {
    draining_.erase(worker);
    return drain();
  }
  if (workers_.count(worker) > 0) draining_.insert(worker);
  return {};
}

std::vector<request_router::command> request_router::add_worker(const std::string& worker) {
  workers_[worker];
  return drain();
}

std::vector<request_router::command> request_router::remove_worker(const std::string& worker) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return {};
  // Replay its requests first, oldest id first, ahead of everything waiting.
  for (auto r = it->second.rbegin(); r != it->second.rend(); ++r) {
    tracked& t = requests_.at(r->first);
    t.worker.clear();
    placed_.erase(r->first);
    queue_.push_front(r->first);
    ++replays_;
  }
  workers_.erase(it);
  draining_.erase(worker);
  affinity_.forget(worker);
  return drain();
}

std::vector<request_router::command> request_router::on_event(const std::string& worker,
                                                              const generation_event& event) {
  auto it = requests_.find(event.id);
  if (it == requests_.end() || it->second.worker != worker) return {};  // stale or cancelled
  tracked& t = it->second;
  // A replayed request starts again at index 0: skip what the client already has.
  const int skip = std::max(0, t.delivered - event.first_index);
  generation_event out{event.id, {}, t.delivered, event.finished, event.reason};
  out.weights_version = event.weights_version;
  out.embedding = event.embedding;  // a pooling request's, in its final event
  if (skip < static_cast<int>(event.tokens.size())) {
    out.tokens.assign(event.tokens.begin() + skip, event.tokens.end());
    if (event.logprobs.size() == event.tokens.size()) {
      out.logprobs.assign(event.logprobs.begin() + skip, event.logprobs.end());
    }
    const size_t k = event.top_tokens.size() / event.tokens.size();
    if (k > 0 && event.top_values.size() == event.top_tokens.size()) {
      out.top_tokens.assign(event.top_tokens.begin() + skip * k, event.top_tokens.end());
      out.top_values.assign(event.top_values.begin() + skip * k, event.top_values.end());
    }
  }
  t.delivered += static_cast<int>(out.tokens.size());
  std::vector<command> commands;
  if (!out.tokens.empty() || out.finished) commands.push_back(deliver{std::move(out)});
  if (event.finished) {
    workers_[worker].erase(event.id);
    placed_.erase(event.id);
    requests_.erase(it);
    auto more = drain();
    commands.insert(commands.end(), more.begin(), more.end());
  }
  return commands;
}

std::vector<request_router::command> request_router::on_failed(const std::string& worker,
                                                               uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.worker != worker) return {};
  std::vector<command> out = {
      deliver{{id, {}, it->second.delivered, true, finish_reason::cancelled}}};
  workers_[worker].erase(id);
  placed_.erase(id);
  requests_.erase(it);
  auto more = drain();
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

}  // namespace troupe::actors
