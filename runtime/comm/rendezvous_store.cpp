#include "runtime/comm/rendezvous_store.hpp"

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"
#include "runtime/cluster/msgpack_view.hpp"

namespace troupe::comm {

absl::Status memory_store::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> memory_store::wait(const std::string& key,
                                               std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; })) {
    return absl::DeadlineExceededError(
        absl::StrCat("rendezvous: key '", key, "' not set within ", timeout.count(), " ms"));
  }
  return values_[key];
}

absl::StatusOr<std::unique_ptr<head_store>> head_store::connect(
    const std::string& endpoint, const cluster::cluster_credentials& credentials) {
  std::unique_ptr<head_store> store(new head_store());
  TROUPE_ASSIGN_OR_RETURN(store->client_,
                          cluster::head_client::connect(store->context_, endpoint, credentials));
  return store;
}

absl::Status head_store::set(const std::string& key, const std::string& value) {
  cluster::map_builder payload;
  payload.add("key", key).add_bin("value", value);
  return client_->call("kv.set", std::move(payload), std::chrono::seconds(10)).status();
}

absl::StatusOr<std::string> head_store::wait(const std::string& key,
                                             std::chrono::milliseconds timeout) {
  cluster::map_builder payload;
  payload.add("key", key).add("timeout_ms", static_cast<uint64_t>(timeout.count()));
  // The head answers DEADLINE_EXCEEDED at `timeout`; allow a second more for the reply to travel.
  TROUPE_ASSIGN_OR_RETURN(
      cluster::received_envelope reply,
      client_->call("kv.wait", std::move(payload), timeout + std::chrono::seconds(1)));
  TROUPE_ASSIGN_OR_RETURN(auto map, cluster::map_view::of(reply.payload, "kv.value payload"));
  return map.get_bytes("value");
}

store_opener head_store_opener(std::string endpoint, cluster::cluster_credentials credentials) {
  return [endpoint = std::move(endpoint),
          credentials =
              std::move(credentials)]() -> absl::StatusOr<std::shared_ptr<rendezvous_store>> {
    TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<head_store> store,
                            head_store::connect(endpoint, credentials));
    return std::shared_ptr<rendezvous_store>(std::move(store));
  };
}

store_opener shared_memory_store_opener() {
  auto store = std::make_shared<memory_store>();
  return [store]() -> absl::StatusOr<std::shared_ptr<rendezvous_store>> { return store; };
}

}  // namespace troupe::comm
