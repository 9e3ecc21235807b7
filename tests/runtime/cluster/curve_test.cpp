#include <fstream>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "runtime/cluster/curve_gate.hpp"
#include "runtime/cluster/curve_keys.hpp"
#include "runtime/cluster/head_client.hpp"
#include "runtime/cluster/head_server.hpp"
#include "runtime/cluster/zmq_util.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait.hpp"

namespace troupe::cluster {
namespace {

using namespace std::chrono_literals;
using testing::temp_dir;

mode_t mode_of(const std::string& path) {
  struct stat st {};
  stat(path.c_str(), &st);
  return st.st_mode & 0777;
}

TEST(CurveKeys, AreWrittenPrivatelyReadBackAndNeverReplaced) {
  ASSERT_TRUE(curve_available());
  temp_dir dir;
  const std::string keys = dir.file("keys");
  auto made = generate_curve_keypair();
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_TRUE(write_cluster_keys(keys, *made).ok());
  EXPECT_EQ(mode_of(keys + "/" + secret_key_file), 0600u);
  EXPECT_EQ(mode_of(keys + "/" + public_key_file), 0644u);
  EXPECT_EQ(mode_of(keys), 0700u);
  auto read = read_cluster_keys(keys);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->public_key, made->public_key);
  EXPECT_EQ(read->secret_key, made->secret_key);
  // The public file does not hold the secret.
  std::ifstream pub(keys + "/" + public_key_file);
  const std::string text((std::istreambuf_iterator<char>(pub)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find(made->secret_key), std::string::npos);
  EXPECT_EQ(write_cluster_keys(keys, *generate_curve_keypair()).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(CurveKeys, ASecretOpenToOthersOrMalformedIsRefusedWithTheFix) {
  temp_dir dir;
  const std::string keys = dir.file("keys");
  ASSERT_TRUE(write_cluster_keys(keys, *generate_curve_keypair()).ok());
  const std::string secret = keys + "/" + secret_key_file;
  chmod(secret.c_str(), 0640);
  auto open = read_cluster_keys(keys);
  EXPECT_EQ(open.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(open.status().message().find("chmod 600 " + secret), std::string::npos)
      << open.status();

  const std::string other = dir.file("other");
  EXPECT_EQ(read_cluster_keys(other).status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read_cluster_keys(other).status().message().find("troupe keys generate"),
            std::string::npos);

  // A secret key whose public half was swapped for another's.
  auto a = *generate_curve_keypair();
  auto b = *generate_curve_keypair();
  ASSERT_TRUE(write_cluster_keys(other, {b.public_key, a.secret_key}).ok());
  EXPECT_EQ(read_cluster_keys(other).status().code(), absl::StatusCode::kInvalidArgument);
}

// A head with the cluster's keys, and clients with them, without, and with another key.
class CurveHead : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(write_cluster_keys(dir_.file("keys"), *generate_curve_keypair()).ok());
    auto credentials = credentials_with_keys("unused", dir_.file("keys"));
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    credentials_ = *credentials;
    auto head = head_server::start(head_context_, "tcp://127.0.0.1:0",
                                   {.credentials = credentials_}, 1 << 20, metrics_, events_);
    ASSERT_TRUE(head.ok()) << head.status();
    head_ = std::move(*head);
  }

  absl::StatusOr<received_envelope> status_as(const cluster_credentials& c) {
    auto client = head_client::connect(client_context_, head_->endpoint(), c);
    if (!client.ok()) return client.status();
    return (*client)->call("status", {}, 20s);
  }

  double refused(const std::string& reason) {
    const std::string text = metrics_.prometheus_text();
    const std::string series = "troupe_auth_refused_total{reason=\"" + reason + "\"} ";
    const size_t at = text.find(series);
    return at == std::string::npos ? 0 : std::stod(text.substr(at + series.size()));
  }

  temp_dir dir_;
  cluster_credentials credentials_;
  zmq::context_t head_context_;
  zmq::context_t client_context_;
  metrics::registry metrics_;
  run::event_log events_;
  std::unique_ptr<head_server> head_;
};

TEST_F(CurveHead, AClientWithTheKeysIsServedWithoutAToken) {
  cluster_credentials c = credentials_;
  c.token = "";  // CURVE authenticated the connection; the token is not asked for
  auto reply = status_as(c);
  EXPECT_TRUE(reply.ok()) << reply.status();
}

TEST_F(CurveHead, APlainClientIsRefusedAtOnceWithWhatIsMissingAndCounted) {
  auto reply = status_as({.token = "unused"});
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnauthenticated) << reply.status();
  EXPECT_NE(reply.status().message().find("requires CURVE"), std::string::npos) << reply.status();
  EXPECT_NE(reply.status().message().find("--keys"), std::string::npos);
  EXPECT_TRUE(testing::wait_until([&] { return refused("handshake_failed") >= 1; }))
      << metrics_.prometheus_text();
}

// The refusal can close a plain client's connection before its first request is sent (a loaded
// machine delays the sender): the request then finds no peer, and the error still says what is
// missing, not that a queue is full.
TEST_F(CurveHead, ARequestAfterTheRefusalClosedTheConnectionSaysWhatIsMissing) {
  const cluster_credentials plain{.token = "unused"};
  zmq::socket_t socket(client_context_, zmq::socket_type::dealer);
  configure_socket(socket, 1 << 20);
  handshake_watch watch(client_context_, socket);
  socket.connect(head_->endpoint());
  // Probes queue while the connection lives; once one finds no peer, the refusal has closed it.
  ASSERT_TRUE(testing::wait_until(
      [&] { return send(socket, {"probe"}).code() == absl::StatusCode::kResourceExhausted; }));
  const absl::Status why = send_to_server(
      socket, watch, "request", std::chrono::steady_clock::now() + 20s, head_->endpoint(), plain);
  EXPECT_EQ(why.code(), absl::StatusCode::kUnauthenticated) << why;
  EXPECT_NE(why.message().find("requires CURVE"), std::string::npos) << why;

  // Without a refusal to explain a missing peer, the send fails by its deadline with that.
  zmq::socket_t unconnected(client_context_, zmq::socket_type::dealer);
  configure_socket(unconnected, 1 << 20);
  handshake_watch quiet(client_context_, unconnected);
  const absl::Status lost = send_to_server(unconnected, quiet, "request",
                                           std::chrono::steady_clock::now(), "nowhere", plain);
  EXPECT_EQ(lost.code(), absl::StatusCode::kUnavailable) << lost;
  EXPECT_NE(lost.message().find("no refused handshake"), std::string::npos) << lost;
}

TEST_F(CurveHead, AClientWithAnotherKeyIsRefusedAndCounted) {
  // It knows the head's public key, but its own keypair is not the cluster's.
  cluster_credentials other = credentials_;
  other.curve = *generate_curve_keypair();
  zmq::socket_t socket(client_context_, zmq::socket_type::dealer);
  configure_socket(socket, 1 << 20);
  handshake_watch watch(client_context_, socket);
  socket.set(zmq::sockopt::curve_serverkey, credentials_.curve->public_key);
  socket.set(zmq::sockopt::curve_publickey, other.curve->public_key);
  socket.set(zmq::sockopt::curve_secretkey, other.curve->secret_key);
  socket.connect(head_->endpoint());
  std::vector<handshake_watch::failure> failed;
  ASSERT_TRUE(testing::wait_until([&] {
    failed = watch.take();
    return !failed.empty();
  }));
  EXPECT_TRUE(failed.front().key_refused);
  const absl::Status why = handshake_refused(failed.front(), head_->endpoint(), other);
  EXPECT_EQ(why.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(why.message().find("not the cluster's"), std::string::npos) << why;
  EXPECT_TRUE(testing::wait_until([&] { return refused("key_not_allowed") >= 1; }))
      << metrics_.prometheus_text();
  // The cluster's own clients are still served.
  EXPECT_TRUE(status_as(credentials_).ok());
}

}  // namespace
}  // namespace troupe::cluster
