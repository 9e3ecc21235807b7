#include "apps/serve/router_actor.hpp"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "actors/request_router.hpp"
#include "apps/pretrain/pretrain_options.hpp"
#include "apps/serve/http_front_end.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/status_bridge.hpp"

namespace troupe::apps {
namespace {

using actors::request_router;
using router_actor =
    actor::app_actor::extend<caf::reacts_to<actor::generate_atom, actor::generation_request>,
                             caf::reacts_to<actor::cancel_atom, uint64_t>>;

// Figures the HTTP threads read for /metrics.
struct gauges {
  std::atomic<int64_t> queued{0}, in_flight{0}, workers{0}, replays{0};
};

struct router_state {
  serve_options options;
  api_limits limits;
  run::event_log* events = nullptr;
  std::unique_ptr<request_router> logic;
  std::map<std::string, actor::inference_worker_actor> workers;
  std::map<caf::actor_addr, std::string> names;
  std::shared_ptr<gauges> figures = std::make_shared<gauges>();
  std::unique_ptr<http_front_end> front_end;
  caf::typed_response_promise<actor::job_result> done;
};

using self_ptr = actor::role_pointer<router_actor, router_state>;

void poll(self_ptr self, const std::string& worker);
void lost(self_ptr self, const std::string& worker, const std::string& why);

void execute(self_ptr self, std::vector<request_router::command> commands) {
  auto& st = self->state;
  for (auto& c : commands) {
    if (auto* d = std::get_if<request_router::dispatch>(&c)) {
      auto it = st.workers.find(d->worker);
      if (it == st.workers.end()) continue;
      const std::string worker = d->worker;
      const uint64_t id = d->request.id;
      self->request(it->second, std::chrono::seconds(30), actor::generate_atom_v,
                    std::move(d->request))
          .then([](caf::ok_atom) {},
                [self, worker, id](caf::error&) {
                  execute(self, self->state.logic->on_failed(worker, id));
                });
    } else if (auto* x = std::get_if<request_router::cancel_on>(&c)) {
      if (auto it = st.workers.find(x->worker); it != st.workers.end()) {
        self->send(it->second, actor::cancel_atom_v, x->id);
      }
    } else if (auto* v = std::get_if<request_router::deliver>(&c)) {
      if (st.front_end) st.front_end->deliver(v->event);
    }
  }
  st.figures->queued = static_cast<int64_t>(st.logic->queued());
  st.figures->in_flight = static_cast<int64_t>(st.logic->in_flight());
  st.figures->workers = static_cast<int64_t>(st.workers.size());
  st.figures->replays = static_cast<int64_t>(st.logic->replays());
}

void poll(self_ptr self, const std::string& worker) {
  auto it = self->state.workers.find(worker);
  if (it == self->state.workers.end()) return;
  self->request(it->second, std::chrono::seconds(30), actor::poll_atom_v)
      .then(
          [self, worker](std::vector<actor::generation_event>& events) {
            for (const auto& e : events)
              execute(self, self->state.logic->on_event(worker, e));
            poll(self, worker);
          },
          [self, worker](caf::error& e) {
            lost(self, worker, std::string(actor::to_status(e).message()));
          });
}

void lost(self_ptr self, const std::string& worker, const std::string& why) {
  auto& st = self->state;
  auto it = st.workers.find(worker);
  if (it == st.workers.end()) return;
  st.names.erase(it->second.address());
  st.workers.erase(it);
  const uint64_t before = st.logic->replays();
  execute(self, st.logic->remove_worker(worker));
  const uint64_t replayed = st.logic->replays() - before;
  st.events->emit(run::severity::warning, "worker_lost",
                  absl::StrCat(worker, " is gone (", why, "); ", replayed,
                               " of its requests continue elsewhere"),
                  {{"worker", worker}, {"replayed", replayed}});
}

void on_update(self_ptr self, const actor::actor_update& update) {
  auto& st = self->state;
  if (actor::parse_actor_name(update.name).role != "worker") return;
  auto handle = caf::actor_cast<actor::inference_worker_actor>(update.handle);
  if (auto it = st.workers.find(update.name); it != st.workers.end()) {
    if (it->second == handle) return;
    lost(self, update.name, "replaced");
  }
  st.workers[update.name] = handle;
  st.names[handle.address()] = update.name;
  self->monitor(handle);
  st.events->emit(run::severity::info, "worker_joined",
                  absl::StrCat(update.name, " serves requests"), {{"worker", update.name}});
  execute(self, st.logic->add_worker(update.name));
  poll(self, update.name);
}

absl::Status start_front_end(self_ptr self) {
  auto& st = self->state;
  const caf::actor_addr me = self->address();
  const auto send = [me](auto... xs) {
    if (auto h = caf::actor_cast<caf::actor>(me)) caf::anon_send(h, xs...);
  };
  http_front_end::hooks hooks{
      .submit = [send](actor::generation_request r) { send(actor::generate_atom_v, std::move(r)); },
      .cancel = [send](uint64_t id) { send(actor::cancel_atom_v, id); },
      .metrics =
          [figures = st.figures] {
            return absl::StrCat("# TYPE troupe_serve_queue_depth gauge\ntroupe_serve_queue_depth ",
                                figures->queued.load(),
                                "\n# TYPE troupe_serve_in_flight gauge\ntroupe_serve_in_flight ",
                                figures->in_flight.load(),
                                "\n# TYPE troupe_serve_workers gauge\ntroupe_serve_workers ",
                                figures->workers.load(),
                                "\n# TYPE troupe_serve_replays_total counter\n"
                                "troupe_serve_replays_total ",
                                figures->replays.load(), "\n");
          }};
  TROUPE_ASSIGN_OR_RETURN(st.front_end, http_front_end::start({st.options.host, st.options.port,
                                                               st.options.token, st.limits},
                                                              std::move(hooks)));
  const std::string url = absl::StrCat("http://", st.options.host, ":", st.front_end->port());
  st.events->emit(run::severity::info, "serving",
                  absl::StrCat("serving ", st.limits.model, " on ", url, "  (try: curl -N ", url,
                               "/v1/completions -d '{\"model\":\"", st.limits.model,
                               "\",\"prompt\":\"Hello\",\"stream\":true}')"),
                  {{"url", url}, {"port", st.front_end->port()}});
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<caf::actor> spawn_serve_router(actor::role_context& ctx,
                                              const serve_options& options) {
  const api_limits limits{options.model_name, model_of(ctx.plan).ctx, options.default_max_tokens};
  run::event_log* events = &ctx.events;
  auto handle = ctx.spawn<router_actor, router_state>(
      [options, limits, events](self_ptr self) -> router_actor::behavior_type {
        auto& st = self->state;
        st.options = options;
        st.limits = limits;
        st.events = events;
        st.logic = std::make_unique<request_router>(request_router::options{
            .max_queue = options.max_queue, .max_per_worker = options.max_per_worker});
        self->set_down_handler([self](caf::down_msg& down) {
          auto it = self->state.names.find(down.source);
          if (it != self->state.names.end()) {
            lost(self, it->second, std::string(actor::to_status(down.reason).message()));
          }
        });
        return {
            [self](const actor::actor_update& update) { on_update(self, update); },
            [self](actor::run_atom) {
              auto& st = self->state;
              st.done = self->make_response_promise<actor::job_result>();
              if (absl::Status s = start_front_end(self); !s.ok()) {
                st.done.deliver(actor::job_result{false, {}, std::string(s.message())});
                self->quit();
              }
              return st.done;  // answered when the job stops
            },
            [self](actor::generate_atom, actor::generation_request& request) {
              auto& st = self->state;
              const uint64_t id = request.id;
              auto commands = st.logic->submit(std::move(request));
              if (!commands.ok()) {
                const bool full = commands.status().code() == absl::StatusCode::kResourceExhausted;
                st.front_end->refused(
                    id, {full ? 429 : 400, full ? "rate_limit_error" : "invalid_request_error",
                         full ? "queue_full" : "", std::string(commands.status().message())});
                return;
              }
              st.front_end->accepted(id);
              execute(self, *std::move(commands));
            },
            [self](actor::cancel_atom, uint64_t id) {
              execute(self, self->state.logic->cancel(id));
            },
        };
      });
  return caf::actor_cast<caf::actor>(handle);
}

}  // namespace troupe::apps
