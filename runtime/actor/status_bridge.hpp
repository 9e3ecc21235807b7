#pragma once

// Conversions between absl::Status (troupe's error type) and caf::error (what crosses CAF).

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "caf/all.hpp"

namespace troupe::actor {

/// A caf::error in the "troupe" category carrying the status code and message.
[[nodiscard]] caf::error to_error(const absl::Status& status);

/// Any caf::error as a Status: troupe errors keep code and message; CAF's own errors map onto
/// the nearest code (a request timeout becomes DEADLINE_EXCEEDED, a dead receiver UNAVAILABLE).
[[nodiscard]] absl::Status to_status(const caf::error& error);

/// Teaches an actor system to render "troupe" errors as "CODE: message".
void add_troupe_error_category(caf::actor_system_config& config);

/// The error a role actor fails with when a handler throws.
[[nodiscard]] caf::error exception_to_error(std::exception_ptr& exception);

/// Turns a logic result into a handler result. On error the actor also quits with that error, so
/// its supervisor applies the role's failure policy: in troupe a handler that fails, fails the
/// actor.
template <class Self, class T>
caf::result<T> to_result(Self* self, absl::StatusOr<T> value) {
  if (value.ok()) return std::move(value).value();
  caf::error error = to_error(value.status());
  self->quit(error);
  return error;
}

/// `to_result` for handlers whose logic returns a plain Status and which reply `ok`.
template <class Self>
caf::result<caf::ok_atom> to_result(Self* self, const absl::Status& status) {
  if (status.ok()) return caf::ok_atom::value;
  caf::error error = to_error(status);
  self->quit(error);
  return error;
}

}  // namespace troupe::actor
