#pragma once

#include <functional>
#include <memory>
#include <type_traits>

#include "caf/all.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/metrics/actor_stats.hpp"
#include "runtime/metrics/cycle_clock.hpp"

namespace troupe::actor {

/// The CAF base class behind a handle type: `typed_event_based_actor<...>` for typed handles,
/// `event_based_actor` for `caf::actor`.
template <class Handle>
struct actor_base {
  using type = typename Handle::base;
};
template <>
struct actor_base<caf::actor> {
  using type = caf::event_based_actor;
};

/// State for roles that keep none.
struct no_state {};

/// Adds troupe's instrumentation to a CAF actor base: every handled message is counted into the
/// actor's `actor_stats` and the timed ones (as actor_stats chooses) are timed, the mailbox depth
/// is sampled, and an exception thrown by a handler becomes the actor's exit reason (so the
/// supervisor sees the exception's text).
template <class Base>
class instrumented : public Base {
 public:
  instrumented(caf::actor_config& cfg, std::shared_ptr<metrics::actor_stats> stats)
      : Base(cfg),
        stats_(std::move(stats)),
        nanos_per_tick_(metrics::cycle_clock::nanos_per_tick()) {
    this->set_exception_handler(
        [](caf::scheduled_actor*, std::exception_ptr& e) { return exception_to_error(e); });
  }

  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    caf::invoke_message_result result;
    if (stats_->begin()) {
      const uint64_t start = metrics::cycle_clock::now();
      result = Base::consume(x);
      const uint64_t ticks = metrics::cycle_clock::now() - start;
      stats_->record_timed(static_cast<uint64_t>(static_cast<double>(ticks) * nanos_per_tick_));
    } else {
      result = Base::consume(x);
      stats_->record_untimed();
    }
    // Reading the mailbox size walks its queues, so sample one message in 16.
    if ((stats_->messages() & 15) == 0) stats_->record_mailbox_depth(this->mailbox().size());
    return result;
  }

 private:
  std::shared_ptr<metrics::actor_stats> stats_;
  double nanos_per_tick_;
};

/// A troupe actor: a CAF event-based actor (typed when `Handle` is a `caf::typed_actor`) with
/// managed `State` and troupe's instrumentation. Its behavior comes from a plain function, so a
/// role is written as
///
///   stage_actor::behavior_type caesar(role_pointer<stage_actor, caesar_state> self) { ... }
///
/// and spawned with `role_context::spawn`.
template <class Handle, class State = no_state>
class role_actor final
    : public caf::stateful_actor<State, instrumented<typename actor_base<Handle>::type>> {
 public:
  using super = caf::stateful_actor<State, instrumented<typename actor_base<Handle>::type>>;
  using behavior_type = std::conditional_t<std::is_same_v<Handle, caf::actor>, caf::behavior,
                                           typename actor_base<Handle>::type::behavior_type>;
  using init_fn = std::function<behavior_type(role_actor*)>;

  role_actor(caf::actor_config& cfg, std::shared_ptr<metrics::actor_stats> stats, init_fn init)
      : super(cfg, std::move(stats)), init_(std::move(init)) {}

  behavior_type make_behavior() override { return init_(this); }

 private:
  init_fn init_;
};

/// The `self` pointer role behaviors receive.
template <class Handle, class State = no_state>
using role_pointer = role_actor<Handle, State>*;

}  // namespace troupe::actor
