#pragma once

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/cluster/head_logic.hpp"
#include "runtime/comm/rendezvous_store.hpp"

namespace troupe::cluster {

/// What a running job publishes about itself for `troupe status` (the head's "job/NAME" keys,
/// shown as "job NAME: VALUE"), through the job's rendezvous store, opened at the first
/// publish. Best effort: without a store (one process) or when it cannot be opened, status
/// shows less and the job is not affected.
class job_publisher {
 public:
  explicit job_publisher(comm::store_opener open = nullptr) : open_(std::move(open)) {}

  void publish(const std::string& name, const nlohmann::json& value) {
    if (!open_) return;
    if (!store_) {
      absl::StatusOr<std::shared_ptr<comm::rendezvous_store>> store = open_();
      if (!store.ok()) return;
      store_ = *std::move(store);
    }
    (void)store_->set(absl::StrCat(job_key_prefix, name), value.dump());
  }

 private:
  comm::store_opener open_;
  std::shared_ptr<comm::rendezvous_store> store_;
};

}  // namespace troupe::cluster
