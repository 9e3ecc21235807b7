#include "actors/trainer_actor.hpp"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/comm/gloo_communicator.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

struct trainer_state {
  trainer_actor_spec spec;
  std::unique_ptr<models::gpt_layout> layout;
  std::unique_ptr<comm::communicator> group;
  std::unique_ptr<trainer> logic;
  actor::data_loader_actor loader;
  std::shared_ptr<comm::rendezvous_store> store;
  std::vector<token_batch> validation;
};

using self_ptr = actor::role_pointer<actor::trainer_actor, trainer_state>;

absl::Status build(self_ptr self, metrics::registry& metrics, const std::string& name) {
  auto& st = self->state;
  st.layout =
      std::make_unique<models::gpt_layout>(st.spec.model, models::layer_range::all(st.spec.model));
  if (st.spec.ranks > 1) {
    comm::group_options g = st.spec.group;
    g.rank = st.spec.rank;
    g.size = st.spec.ranks;
    TROUPE_ASSIGN_OR_RETURN(st.group, comm::make_gloo_communicator(*st.store, g));
  }
  TROUPE_ASSIGN_OR_RETURN(st.logic, trainer::create(*st.layout, st.spec.options, st.group.get()));
  TROUPE_ASSIGN_OR_RETURN(
      data_loader loader,
      data_loader::create(*st.spec.corpus, st.spec.model.ctx, st.spec.options.global_batch,
                          st.spec.rank, st.spec.ranks, st.spec.data_seed));
  st.validation = loader.validation(loader.local_batch(), st.spec.eval_windows);
  st.loader = spawn_data_loader(self->system(), metrics, absl::StrCat(name, "/data"),
                                st.spec.corpus, prefetch_queue(std::move(loader)));
  self->link_to(st.loader);  // the loader lives and dies with its trainer
  self->send(st.loader, actor::credit_atom_v, static_cast<int32_t>(st.spec.prefetch));
  return absl::OkStatus();
}

}  // namespace

actor::trainer_actor spawn_trainer(caf::actor_system& system, metrics::registry& metrics,
                                   const std::string& name,
                                   std::shared_ptr<comm::rendezvous_store> store,
                                   trainer_actor_spec spec) {
  auto shared_spec = std::make_shared<trainer_actor_spec>(std::move(spec));
  return system.spawn<actor::role_actor<actor::trainer_actor, trainer_state>, caf::detached>(
      metrics.actor(name),
      [&metrics, name, store, shared_spec](self_ptr self) -> actor::trainer_actor::behavior_type {
        self->state.spec = *shared_spec;
        self->state.store = store;
        // A failed build stops the actor; its handlers never run then.
        if (absl::Status s = build(self, metrics, name); !s.ok()) self->quit(actor::to_error(s));
        return {
            [self](actor::step_atom) -> caf::result<actor::step_report> {
              auto promise = self->make_response_promise<actor::step_report>();
              const auto asked = clock::now();
              self->request(self->state.loader, caf::infinite, actor::next_atom_v)
                  .then(
                      [self, promise, asked](actor::token_batch& batch) mutable {
                        const double data_s =
                            std::chrono::duration<double>(clock::now() - asked).count();
                        self->send(self->state.loader, actor::credit_atom_v, int32_t{1});
                        absl::StatusOr<actor::step_report> report = self->state.logic->step(batch);
                        if (!report.ok()) {
                          promise.deliver(actor::to_error(report.status()));
                          self->quit(actor::to_error(report.status()));
                          return;
                        }
                        report->data_s = data_s;
                        promise.deliver(*report);
                      },
                      [self, promise](caf::error& e) mutable {
                        promise.deliver(e);
                        self->quit(e);
                      });
              return promise;
            },
            [self](actor::eval_atom) -> caf::result<double> {
              absl::StatusOr<double> loss = self->state.logic->evaluate(self->state.validation);
              if (!loss.ok()) return actor::to_error(loss.status());
              return *loss;
            },
        };
      });
}

}  // namespace troupe::actors
