#include "runtime/cluster/kv_store.hpp"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace troupe::cluster {

absl::Status kv_store::check_key(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("kv: the key is empty");
  if (key.size() > max_key_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv: key of ", key.size(), " bytes is longer than ", max_key_bytes));
  }
  return absl::OkStatus();
}

std::vector<kv_store::waiter_id> kv_store::wake(const std::string& key) {
  std::vector<waiter_id> out;
  if (auto it = waiters_.find(key); it != waiters_.end()) {
    for (const auto& w : it->second)
      out.push_back(w.id);
    waiters_.erase(it);
  }
  return out;
}

absl::StatusOr<std::vector<kv_store::waiter_id>> kv_store::set(absl::string_view key,
                                                               std::string value) {
  if (auto s = check_key(key); !s.ok()) return s;
  std::string k(key);
  values_[k] = std::move(value);
  return wake(k);
}

std::optional<std::string> kv_store::get(absl::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<std::string, std::string>> kv_store::with_prefix(
    absl::string_view prefix) const {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = values_.lower_bound(prefix);
       it != values_.end() && absl::StartsWith(it->first, prefix); ++it) {
    out.emplace_back(it->first, it->second);
  }
  return out;
}

absl::StatusOr<kv_store::add_result> kv_store::add(absl::string_view key, int64_t delta) {
  if (auto s = check_key(key); !s.ok()) return s;
  std::string k(key);
  int64_t current = 0;
  if (auto it = values_.find(k); it != values_.end() && !absl::SimpleAtoi(it->second, &current)) {
    return absl::FailedPreconditionError(
        absl::StrCat("kv: key '", key, "' holds a value that is not an integer"));
  }
  current += delta;
  values_[k] = absl::StrCat(current);
  return add_result{current, wake(k)};
}

absl::StatusOr<std::optional<std::string>> kv_store::wait(absl::string_view key, waiter_id id,
                                                          clock::time_point deadline) {
  if (auto s = check_key(key); !s.ok()) return s;
  if (auto v = get(key)) return v;
  waiters_[std::string(key)].push_back({id, deadline});
  return std::optional<std::string>();
}

std::vector<kv_store::waiter_id> kv_store::expire(clock::time_point now) {
  std::vector<waiter_id> out;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    auto& list = it->second;
    for (auto w = list.begin(); w != list.end();) {
      if (w->deadline <= now) {
        out.push_back(w->id);
        w = list.erase(w);
      } else {
        ++w;
      }
    }
    it = list.empty() ? waiters_.erase(it) : std::next(it);
  }
  return out;
}

void kv_store::cancel(waiter_id id) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    std::erase_if(it->second, [id](const waiter& w) { return w.id == id; });
    it = it->second.empty() ? waiters_.erase(it) : std::next(it);
  }
}

size_t kv_store::waiting() const {
  size_t n = 0;
  for (const auto& [key, list] : waiters_)
    n += list.size();
  return n;
}

}  // namespace troupe::cluster
