#include "runtime/cluster/zmq_util.hpp"

#include <gtest/gtest.h>

namespace troupe::cluster {
namespace {

TEST(EndpointHost, TheHostOfATcpEndpoint) {
  EXPECT_EQ(endpoint_host("tcp://10.1.2.3:7070"), "10.1.2.3");
  EXPECT_EQ(endpoint_host("tcp://head.example:0"), "head.example");
  EXPECT_EQ(endpoint_host("tcp://[::1]:7070"), "::1");
  EXPECT_EQ(endpoint_host("ipc:///tmp/x"), "");
  EXPECT_EQ(endpoint_host("tcp://nohost"), "");
}

TEST(AdvertisedHost, AConcreteHostAsItIsAWildcardAsAnInterfaceAddress) {
  EXPECT_EQ(advertised_host("tcp://10.1.2.3:7070"), "10.1.2.3");
  EXPECT_EQ(advertised_host("tcp://127.0.0.1:0"), "127.0.0.1");
  // A wildcard becomes an address peers can reach: never the wildcard itself, and loopback
  // only on a machine whose every other interface is down.
  for (const char* wildcard : {"tcp://0.0.0.0:7070", "tcp://*:7070"}) {
    const std::string host = advertised_host(wildcard);
    EXPECT_NE(host, "0.0.0.0");
    EXPECT_NE(host, "*");
    EXPECT_FALSE(host.empty());
  }
}

TEST(LocalAddressTowards, LoopbackForAHeadOnLoopback) {
  auto address = local_address_towards("tcp://127.0.0.1:7070");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(*address, "127.0.0.1");
  EXPECT_EQ(local_address_towards("udp://x").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe::cluster
