#pragma once

// Hosts for multi-host tests on one machine: one network namespace per host, each with its own
// 10.x address on a veth pair whose other end sits on a bridge in a namespace of its own (the
// switch). Nothing touches the machine's own namespace, so traffic goes only between the
// namespaces the test created. Needs CAP_NET_ADMIN (root in CI); create() says so otherwise.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::testing {

class network_namespaces {
 public:
  /// `hosts` namespaces on one switch, addresses 10.N.0.1, 10.N.0.2, ... (N from this process's
  /// id, so that concurrent tests differ). Fails, having removed what it made, when `ip` does.
  static absl::StatusOr<std::unique_ptr<network_namespaces>> create(int hosts);
  ~network_namespaces();
  network_namespaces(const network_namespaces&) = delete;
  network_namespaces& operator=(const network_namespaces&) = delete;

  /// Host `i`'s address.
  [[nodiscard]] std::string address(int i) const;
  /// `argv` run inside host `i` (`ip netns exec NAME argv...`).
  [[nodiscard]] std::vector<std::string> on(int i, std::vector<std::string> argv) const;
  /// Takes host `i`'s link down (a partition) or up again, at the switch.
  [[nodiscard]] absl::Status set_link(int i, bool up) const;

 private:
  network_namespaces(std::string tag, int subnet) : tag_(std::move(tag)), subnet_(subnet) {}
  [[nodiscard]] std::string host_name(int i) const;
  [[nodiscard]] std::string switch_name() const { return tag_ + "-sw"; }

  std::string tag_;
  int subnet_;
  int hosts_ = 0;
};

}  // namespace troupe::testing
