#pragma once

#include <chrono>

#include "caf/execution_unit.hpp"

namespace troupe::actor {

/// Input that an idle scheduler worker waits on instead of sleeping (the node's peer socket; see
/// io_work_stealing). One thread at a time polls it.
class idle_io {
 public:
  virtual ~idle_io() = default;

  /// Waits at most `timeout` for input or `wake`, then handles all input there is. Work it
  /// creates is enqueued through `here`, so that it runs on the calling worker with no handoff.
  /// Returns false at once when another thread is polling (or the input is closed).
  virtual bool poll(caf::execution_unit* here, std::chrono::milliseconds timeout) = 0;

  /// Makes a `poll` in progress return soon. Any thread.
  virtual void wake() = 0;
};

}  // namespace troupe::actor
