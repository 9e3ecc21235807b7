#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/cluster/head_client.hpp"

namespace troupe::comm {

/// The key-value store ranks exchange addresses through when a group forms.
class rendezvous_store {
 public:
  virtual ~rendezvous_store() = default;
  [[nodiscard]] virtual absl::Status set(const std::string& key, const std::string& value) = 0;
  /// The value once some rank has set `key`, or DEADLINE_EXCEEDED naming the key after timeout.
  [[nodiscard]] virtual absl::StatusOr<std::string> wait(const std::string& key,
                                                         std::chrono::milliseconds timeout) = 0;
};

/// A store inside one process: ranks that are threads of one program (tests, a single-process
/// job) rendezvous through it.
class memory_store final : public rendezvous_store {
 public:
  absl::Status set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> wait(const std::string& key,
                                   std::chrono::milliseconds timeout) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

/// The head's key-value store (kv.set / kv.wait, docs/protocol.md), through its own connection.
class head_store final : public rendezvous_store {
 public:
  /// Connects to the head at `endpoint` with the cluster's credentials.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<head_store>> connect(
      const std::string& endpoint, const cluster::cluster_credentials& credentials);

  absl::Status set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> wait(const std::string& key,
                                   std::chrono::milliseconds timeout) override;

 private:
  head_store() = default;
  zmq::context_t context_{1};
  std::unique_ptr<cluster::head_client> client_;
};

/// Opens a store for one group member (actor::role_context::rendezvous).
using store_opener = std::function<absl::StatusOr<std::shared_ptr<rendezvous_store>>()>;

/// Each call connects a new head_store to the head at `endpoint` (a member may block in wait()
/// while another sets, so members do not share a connection).
[[nodiscard]] store_opener head_store_opener(std::string endpoint,
                                             cluster::cluster_credentials credentials);

/// Every call returns the same memory_store: the members are threads of this process.
[[nodiscard]] store_opener shared_memory_store_opener();

}  // namespace troupe::comm
