#include "tests/support/network_namespaces.hpp"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/support/subprocess.hpp"

namespace troupe::testing {
namespace {

constexpr const char* ip_tool = "/usr/sbin/ip";

absl::Status ip(std::vector<std::string> args) {
  args.insert(args.begin(), ip_tool);
  const process_result r = run(args, std::chrono::seconds(20));
  if (r.exit_code == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("`", absl::StrJoin(args, " "), "` failed (", r.exit_code, "): ", r.err,
                   " (multi-host tests need CAP_NET_ADMIN: run them as root)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<network_namespaces>> network_namespaces::create(int hosts) {
  const int pid = static_cast<int>(getpid());
  std::unique_ptr<network_namespaces> n(
      new network_namespaces(absl::StrCat("trp", pid), 100 + pid % 150));
  absl::Status s = ip({"netns", "add", n->switch_name()});
  if (!s.ok()) return s;
  n->hosts_ = hosts;  // from here on, the destructor removes what exists
  const std::string sw = n->switch_name();
  s = ip({"-n", sw, "link", "add", "br0", "type", "bridge"});
  if (s.ok()) s = ip({"-n", sw, "link", "set", "br0", "up"});
  for (int i = 0; i < hosts && s.ok(); ++i) {
    const std::string host = n->host_name(i), port = absl::StrCat("p", i);
    s = ip({"netns", "add", host});
    if (s.ok())
      s = ip(
          {"-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", host});
    if (s.ok()) s = ip({"-n", sw, "link", "set", port, "master", "br0", "up"});
    if (s.ok()) s = ip({"-n", host, "addr", "add", n->address(i) + "/24", "dev", "eth0"});
    if (s.ok()) s = ip({"-n", host, "link", "set", "eth0", "up"});
    if (s.ok()) s = ip({"-n", host, "link", "set", "lo", "up"});
  }
  if (!s.ok()) return s;
  return n;
}

network_namespaces::~network_namespaces() {
  for (int i = 0; i < hosts_; ++i)
    (void)ip({"netns", "del", host_name(i)});
  if (hosts_ > 0) (void)ip({"netns", "del", switch_name()});
}

std::string network_namespaces::host_name(int i) const {
  return absl::StrCat(tag_, "-h", i);
}

std::string network_namespaces::address(int i) const {
  return absl::StrCat("10.", subnet_, ".0.", i + 1);
}

std::vector<std::string> network_namespaces::on(int i, std::vector<std::string> argv) const {
  argv.insert(argv.begin(), {ip_tool, "netns", "exec", host_name(i)});
  return argv;
}

absl::Status network_namespaces::set_link(int i, bool up) const {
  return ip({"-n", switch_name(), "link", "set", absl::StrCat("p", i), up ? "up" : "down"});
}

}  // namespace troupe::testing
