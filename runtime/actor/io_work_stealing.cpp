#include "runtime/actor/io_work_stealing.hpp"

namespace troupe::actor {
namespace {

using coordinator = caf::scheduler::coordinator<io_work_stealing>;

coordinator* io_scheduler_of(caf::actor_system& system) {
  return dynamic_cast<coordinator*>(&system.scheduler());
}

}  // namespace

caf::actor_system::module* make_io_work_stealing(caf::actor_system& system) {
  return new coordinator(system);
}

bool attach_idle_io(caf::actor_system& system, std::shared_ptr<idle_io> io) {
  coordinator* scheduler = io_scheduler_of(system);
  if (scheduler == nullptr) return false;
  auto& data = scheduler->data();
  {
    std::lock_guard<std::mutex> guard(data.io_mu);
    if (data.io) return false;  // another node's input: its workers wait there already
    data.io = std::move(io);
    ++data.io_attachments;
  }
  wake_idle_workers(system);
  return true;
}

void wake_idle_workers(caf::actor_system& system) {
  if (coordinator* scheduler = io_scheduler_of(system)) {
    for (size_t i = 0; i < scheduler->num_workers(); ++i)
      io_work_stealing::wake(scheduler->worker_by_id(i));
  }
}

void detach_idle_io(caf::actor_system& system) {
  if (coordinator* scheduler = io_scheduler_of(system)) {
    auto& data = scheduler->data();
    std::lock_guard<std::mutex> guard(data.io_mu);
    data.io.reset();
  }
}

}  // namespace troupe::actor
