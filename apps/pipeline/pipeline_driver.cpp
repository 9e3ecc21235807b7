#include "apps/pipeline/pipeline_driver.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace troupe::apps {

pipeline_driver::pipeline_driver(const pipeline_options& options, std::vector<stage> stages)
    : options_(options), stages_(std::move(stages)) {
  slots_.resize(stages_.size());
  waiting_.resize(stages_.size());
}

std::vector<pipeline_driver::command> pipeline_driver::start() {
  started_ = true;
  return schedule();
}

void pipeline_driver::fail(absl::Status cause) {
  if (failure_.ok()) failure_ = std::move(cause);
}

std::vector<pipeline_driver::command> pipeline_driver::on_batch(actor::source_batch batch) {
  pull_outstanding_ = false;
  pull_attempts_ = 0;
  total_ = batch.total;
  if (batch.items.empty()) source_done_ = true;
  for (auto& item : batch.items) {
    if (item.seq != next_pull_) {
      fail(absl::DataLossError(absl::StrCat("the source returned item ", item.seq, " where item ",
                                            next_pull_, " was expected")));
      return {};
    }
    ++next_pull_;
    ++in_flight_;
    const uint64_t seq = item.seq;
    if (stages_.empty()) {
      ready_.emplace(seq, std::move(item));
    } else {
      item_state state;
      state.item = std::move(item);
      items_.emplace(seq, std::move(state));
      waiting_[0].push_back(seq);
    }
  }
  return schedule();
}

std::vector<pipeline_driver::command> pipeline_driver::on_pull_error(const absl::Status& error) {
  pull_outstanding_ = false;
  if (absl::IsUnavailable(error)) {
    source_available_ = false;  // it died; pull again once it is back
  } else if (++pull_attempts_ >= options_.max_attempts) {
    fail(
        absl::Status(error.code(), absl::StrCat("the source failed ", pull_attempts_,
                                                " times in a row; last error: ", error.message())));
    return {};
  }
  return schedule();
}

std::vector<pipeline_driver::command> pipeline_driver::on_processed(size_t stage, int instance,
                                                                    uint64_t generation,
                                                                    actor::work_item item) {
  if (release(stage, instance, generation)) ++slots_[stage][instance].processed;
  auto it = items_.find(item.seq);
  if (it == items_.end() || it->second.stage != stage) return schedule();  // stale answer
  if (stage + 1 < stages_.size()) {
    it->second.item = std::move(item);
    it->second.stage = stage + 1;
    it->second.attempts = 0;
    it->second.last_instance = -1;
    waiting_[stage + 1].push_back(it->first);
  } else {
    ready_.emplace(it->first, std::move(item));
    items_.erase(it);
  }
  return schedule();
}

std::vector<pipeline_driver::command> pipeline_driver::on_process_error(size_t stage, int instance,
                                                                        uint64_t generation,
                                                                        uint64_t seq,
                                                                        const absl::Status& error) {
  const bool current = release(stage, instance, generation);
  auto it = items_.find(seq);
  if (it == items_.end() || it->second.stage != stage) return schedule();
  item_state& st = it->second;
  if (absl::IsUnavailable(error)) {
    // The actor was already dead: not this item's fault. Wait for its restart.
    if (current) slots_[stage][instance].available = false;
  } else {
    st.last_error = std::string(error.message());
    if (++st.attempts >= options_.max_attempts) {
      fail(absl::Status(error.code(),
                        absl::StrCat("item ", seq, " failed ", st.attempts, " attempts at stage '",
                                     stages_[stage].role, "'; last error: ", error.message())));
      return {};
    }
    ++retries_;
  }
  st.last_instance = instance;
  waiting_[stage].push_front(seq);
  return schedule();
}

std::vector<pipeline_driver::command> pipeline_driver::on_delivered() {
  ++delivered_;
  --in_flight_;
  return schedule();
}

std::vector<pipeline_driver::command> pipeline_driver::on_delivery_error(
    const absl::Status& error) {
  fail(absl::Status(error.code(), absl::StrCat("the sink failed: ", error.message())));
  return {};
}

std::vector<pipeline_driver::command> pipeline_driver::on_source_replaced() {
  source_available_ = true;
  return schedule();
}

std::vector<pipeline_driver::command> pipeline_driver::on_stage_actor(size_t stage, int instance) {
  auto& slots = slots_[stage];
  if (static_cast<size_t>(instance) >= slots.size()) slots.resize(instance + 1);
  auto& slot = slots[instance];
  slot = actor_slot{slot.generation + 1, true, false, slot.processed};
  return schedule();
}

std::map<std::string, uint64_t> pipeline_driver::processed_by() const {
  std::map<std::string, uint64_t> out;
  for (size_t s = 0; s < stages_.size(); ++s) {
    for (size_t i = 0; i < slots_[s].size(); ++i) {
      out[absl::StrCat(stages_[s].role, "/", i)] = slots_[s][i].processed;
    }
  }
  return out;
}

bool pipeline_driver::release(size_t stage, int instance, uint64_t generation) {
  auto& slot = slots_[stage][instance];
  if (slot.generation != generation) return false;
  slot.busy = false;
  return true;
}

int pipeline_driver::pick_instance(size_t stage, int avoid) const {
  // Prefer an idle actor other than the one that just failed this item.
  int fallback = -1;
  for (int i = 0; i < static_cast<int>(slots_[stage].size()); ++i) {
    const auto& inst = slots_[stage][i];
    if (!inst.available || inst.busy) continue;
    if (i != avoid) return i;
    fallback = i;
  }
  return fallback;
}

std::vector<pipeline_driver::command> pipeline_driver::schedule() {
  std::vector<command> out;
  if (!started_ || !failure_.ok()) return out;
  for (size_t s = 0; s < stages_.size(); ++s) {
    while (!waiting_[s].empty()) {
      const uint64_t seq = waiting_[s].front();
      item_state& st = items_.at(seq);
      const int i = pick_instance(s, st.last_instance);
      if (i < 0) break;
      waiting_[s].pop_front();
      slots_[s][i].busy = true;
      out.push_back(dispatch{s, i, slots_[s][i].generation, st.item});
    }
  }
  for (auto it = ready_.find(next_deliver_); it != ready_.end(); it = ready_.find(next_deliver_)) {
    out.push_back(deliver{std::move(it->second)});
    ready_.erase(it);
    ++next_deliver_;
  }
  if (!source_done_ && !pull_outstanding_ && source_available_ &&
      in_flight_ < options_.max_in_flight) {
    const int room = options_.max_in_flight - in_flight_;
    out.push_back(pull{next_pull_, static_cast<uint32_t>(std::min(room, options_.batch))});
    pull_outstanding_ = true;
  }
  if (source_done_ && in_flight_ == 0 && !finish_sent_) {
    out.push_back(finish{});
    finish_sent_ = true;
  }
  return out;
}

}  // namespace troupe::apps
