#include "apps/serve/router_actor.hpp"

#include "absl/strings/str_cat.h"
#include "actors/request_router.hpp"
#include "apps/serve/http_front_end.hpp"
#include "models/gpt/gpt_source.hpp"
#include "nlohmann/json.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/app/app_plan.hpp"

namespace troupe::apps {
namespace {

using actors::request_router;
using router_actor =
    actor::app_actor::extend<caf::reacts_to<actor::generate_atom, actor::generation_request>,
                             caf::reacts_to<actor::cancel_atom, uint64_t>,
                             caf::reacts_to<actor::tick_atom>>;

// How often a draining router looks whether the last request has ended.
constexpr auto drain_check = std::chrono::milliseconds(50);

struct router_state {
  serve_options options;
  api_limits limits;
  run::event_log* events = nullptr;
  std::unique_ptr<request_router> logic;
  std::map<std::string, actor::inference_worker_actor> workers;
  std::map<caf::actor_addr, std::string> names;
  std::shared_ptr<serve_metrics> metrics;
  std::unique_ptr<http_front_end> front_end;
  std::string url;
  caf::typed_response_promise<actor::job_result> done;
  bool draining = false;
};

using self_ptr = actor::role_pointer<router_actor, router_state>;

void poll(self_ptr self, const std::string& worker);
void lost(self_ptr self, const std::string& worker, const std::string& why);

void execute(self_ptr self, std::vector<request_router::command> commands) {
  auto& st = self->state;
  // The figures first: a client that has its last token reads /metrics without this request.
  st.metrics->router_state(st.logic->queued(), st.logic->in_flight(), st.workers.size());
  for (auto& c : commands) {
    if (auto* d = std::get_if<request_router::dispatch>(&c)) {
      auto it = st.workers.find(d->worker);
      if (it == st.workers.end()) continue;
      const std::string worker = d->worker;
      const uint64_t id = d->request.id;
      st.metrics->dispatched(worker);
      self->request(it->second, std::chrono::seconds(30), actor::generate_atom_v,
                    std::move(d->request))
          .then([](caf::ok_atom) {},
                [self, worker, id](caf::error& e) {
                  // UNAVAILABLE: the worker's process is gone, and this error may arrive before
                  // the worker's down message: its requests are replayed, not failed.
                  if (absl::Status s = actor::to_status(e); absl::IsUnavailable(s)) {
                    lost(self, worker, std::string(s.message()));
                  } else {
                    execute(self, self->state.logic->on_failed(worker, id));
                  }
                });
    } else if (auto* x = std::get_if<request_router::cancel_on>(&c)) {
      if (auto it = st.workers.find(x->worker); it != st.workers.end()) {
        self->send(it->second, actor::cancel_atom_v, x->id);
      }
    } else if (auto* v = std::get_if<request_router::deliver>(&c)) {
      if (st.front_end) st.front_end->deliver(v->event);
    }
  }
}

void poll(self_ptr self, const std::string& worker) {
  auto it = self->state.workers.find(worker);
  if (it == self->state.workers.end()) return;
  self->request(it->second, std::chrono::seconds(30), actor::poll_atom_v)
      .then(
          [self, worker](actor::worker_report& report) {
            for (const auto& e : report.events)
              execute(self, self->state.logic->on_event(worker, e));
            self->state.metrics->worker_state(worker, report);
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
  st.metrics->worker_gone(worker);
  st.metrics->replayed(replayed);
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
      .cancel = [send](uint64_t id) { send(actor::cancel_atom_v, id); }};
  TROUPE_ASSIGN_OR_RETURN(
      st.front_end,
      http_front_end::start({st.options.host, st.options.port, st.options.token, st.limits,
                             st.options.http, st.options.tls.cert, st.options.tls.key, st.metrics},
                            std::move(hooks)));
  st.url = absl::StrCat(st.options.tls.cert.empty() ? "http://" : "https://", st.options.host, ":",
                        st.front_end->port());
  const std::string& url = st.url;
  st.events->emit(run::severity::info, "serving",
                  absl::StrCat("serving ", st.limits.model, " on ", url, "  (try: curl -N ", url,
                               "/v1/completions -d '{\"model\":\"", st.limits.model,
                               "\",\"prompt\":\"Hello\",\"stream\":true}')"),
                  {{"url", url}, {"port", st.front_end->port()}});
  return absl::OkStatus();
}

void finish(self_ptr self, actor::job_result result) {
  self->state.done.deliver(std::move(result));
  self->quit();
}

// Ends the job once a draining router has nothing left: no request queued, on a worker, or in
// an HTTP exchange.
void finish_when_drained(self_ptr self) {
  auto& st = self->state;
  if (st.logic->queued() > 0 || st.logic->in_flight() > 0 || st.front_end->open_requests() > 0) {
    self->delayed_send(self, drain_check, actor::tick_atom_v);
    return;
  }
  st.events->emit(run::severity::info, "drained", "every request in flight has finished");
  finish(self,
         actor::job_result{
             true, nlohmann::json{{"url", st.url}, {"replays", st.logic->replays()}}.dump(), {}});
}

void drain(self_ptr self) {
  auto& st = self->state;
  if (st.draining || !st.front_end) return;
  st.draining = true;
  st.front_end->drain();
  st.events->emit(run::severity::info, "draining",
                  absl::StrCat("draining: finishing ", st.logic->queued() + st.logic->in_flight(),
                               " requests, refusing new ones"),
                  {{"requests", st.logic->queued() + st.logic->in_flight()}});
  finish_when_drained(self);
}

}  // namespace

absl::StatusOr<caf::actor> spawn_serve_router(actor::role_context& ctx,
                                              const serve_options& options) {
  const api_limits limits{options.model_name, models::gpt_config_of(ctx.plan.spec.model).ctx,
                          options.default_max_tokens};
  run::event_log* events = &ctx.events;
  metrics::registry* registry = &ctx.metrics;
  auto handle = ctx.spawn<router_actor, router_state>(
      [options, limits, events, registry](self_ptr self) -> router_actor::behavior_type {
        auto& st = self->state;
        st.options = options;
        st.limits = limits;
        st.events = events;
        st.metrics = std::make_shared<serve_metrics>(*registry);
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
                finish(self, actor::job_result{false, {}, std::string(s.message())});
              }
              return st.done;  // answered when the job stops
            },
            [self](actor::stop_atom) { drain(self); },
            [self](actor::tick_atom) { finish_when_drained(self); },
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
