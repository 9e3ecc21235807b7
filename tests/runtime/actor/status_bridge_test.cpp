#include "runtime/actor/status_bridge.hpp"

#include <gtest/gtest.h>

#include "runtime/actor/system_config.hpp"

namespace troupe::actor {
namespace {

TEST(StatusBridge, RoundTripsTroupeErrors) {
  const absl::Status s = absl::NotFoundError("no such role");
  const absl::Status back = to_status(to_error(s));
  EXPECT_EQ(back, s);
  EXPECT_TRUE(to_status(caf::error{}).ok());
  EXPECT_FALSE(to_error(absl::OkStatus()));
}

TEST(StatusBridge, MapsCafErrors) {
  EXPECT_EQ(to_status(caf::make_error(caf::sec::request_timeout)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(to_status(caf::make_error(caf::sec::request_receiver_down)).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(to_status(caf::make_error(caf::exit_reason::user_shutdown)).code(),
            absl::StatusCode::kAborted);
}

TEST(StatusBridge, ActorSystemRendersTroupeErrors) {
  auto cfg = make_system_config({});
  caf::actor_system system{*cfg};
  EXPECT_EQ(system.render(to_error(absl::InternalError("kaboom"))), "INTERNAL: kaboom");
}

TEST(StatusBridge, ExceptionsBecomeErrorsWithTheirText) {
  std::exception_ptr e = std::make_exception_ptr(std::runtime_error("disk on fire"));
  const absl::Status s = to_status(exception_to_error(e));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "unhandled exception (std::runtime_error): disk on fire");
}

}  // namespace
}  // namespace troupe::actor
