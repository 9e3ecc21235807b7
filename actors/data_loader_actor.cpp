#include "actors/data_loader_actor.hpp"

#include "runtime/actor/status_bridge.hpp"

namespace troupe::actors {
namespace {

struct loader_state {
  std::shared_ptr<const text_corpus> corpus;  // the queue's loader reads it
  std::unique_ptr<prefetch_queue> queue;
  bool producing = false;  // a (produce) message is on its way
};

using loader_self = actor::role_pointer<actor::data_loader_actor, loader_state>;

void keep_producing(loader_self self) {
  auto& st = self->state;
  if (st.producing || !st.queue->can_produce()) return;
  st.producing = true;
  self->send(self, actor::produce_atom_v);
}

}  // namespace

actor::data_loader_actor spawn_data_loader(caf::actor_system& system, metrics::registry& metrics,
                                           const std::string& name,
                                           std::shared_ptr<const text_corpus> corpus,
                                           prefetch_queue queue) {
  auto shared_queue = std::make_shared<prefetch_queue>(std::move(queue));
  return system.spawn<actor::role_actor<actor::data_loader_actor, loader_state>>(
      metrics.actor(name),
      [corpus, shared_queue](loader_self self) -> actor::data_loader_actor::behavior_type {
        self->state.corpus = corpus;
        self->state.queue = std::make_unique<prefetch_queue>(std::move(*shared_queue));
        return {
            [self](actor::credit_atom, int32_t n) {
              self->state.queue->grant(n);
              keep_producing(self);
            },
            [self](actor::next_atom) { return self->state.queue->take(); },
            [self](actor::cursor_atom) { return self->state.queue->cursor(); },
            [self](actor::seek_atom, int64_t cursor) {
              self->state.queue->seek(cursor);
              keep_producing(self);
              return caf::ok_atom_v;
            },
            [self](actor::seek_atom, int64_t cursor, int32_t rank,
                   int32_t ranks) -> caf::result<caf::ok_atom> {
              if (absl::Status s = self->state.queue->seek(cursor, rank, ranks); !s.ok()) {
                return actor::to_error(s);
              }
              keep_producing(self);
              return caf::ok_atom_v;
            },
            [self](actor::produce_atom) {
              self->state.producing = false;
              self->state.queue->produce();
              keep_producing(self);
            },
        };
      });
}

}  // namespace troupe::actors
