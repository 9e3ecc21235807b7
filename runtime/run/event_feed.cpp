#include "runtime/run/event_feed.hpp"

namespace troupe::run {

void event_feed::add(const nlohmann::json& event) {
  std::vector<std::shared_ptr<const std::function<void()>>> watching;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back({++last_id_, event.dump()});
    if (events_.size() > capacity_) events_.pop_front();
    std::erase_if(watchers_, [&](const auto& w) {
      auto alive = w.lock();
      if (alive) watching.push_back(std::move(alive));
      return !alive;
    });
  }
  for (const auto& w : watching)
    (*w)();
}

std::vector<event_feed::entry> event_feed::after(uint64_t after) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<entry> out;
  for (const entry& e : events_)
    if (e.id > after) out.push_back(e);
  return out;
}

void event_feed::watch(std::weak_ptr<const std::function<void()>> watcher) {
  std::lock_guard<std::mutex> lock(mu_);
  watchers_.push_back(std::move(watcher));
}

}  // namespace troupe::run
