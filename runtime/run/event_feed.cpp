#include "runtime/run/event_feed.hpp"

namespace troupe::run {

void event_feed::add(const nlohmann::json& event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back({++last_id_, event.dump()});
    if (events_.size() > capacity_) events_.pop_front();
  }
  added_.notify_all();
}

std::vector<event_feed::entry> event_feed::after(uint64_t after,
                                                 std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  added_.wait_for(lock, timeout, [&] { return closed_ || last_id_ > after; });
  std::vector<entry> out;
  for (const entry& e : events_)
    if (e.id > after) out.push_back(e);
  return out;
}

void event_feed::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  added_.notify_all();
}

}  // namespace troupe::run
