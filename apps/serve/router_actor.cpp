#include "apps/serve/router_actor.hpp"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/replica_autoscaler.hpp"
#include "actors/request_router.hpp"
#include "apps/serve/http_front_end.hpp"
#include "models/decoder/decoder_source.hpp"
#include "models/hf/hf_config.hpp"
#include "nlohmann/json.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/app/app_plan.hpp"

namespace troupe::apps {
namespace {

using actors::replica_autoscaler;
using actors::request_router;
// tick: a draining router's check for its last request; wake: the autoscaler's control tick.
using router_actor =
    actor::app_actor::extend<caf::reacts_to<actor::generate_atom, actor::generation_request>,
                             caf::reacts_to<actor::cancel_atom, uint64_t>,
                             caf::reacts_to<actor::tick_atom>, caf::reacts_to<actor::wake_atom>>;

// How often a draining router looks whether the last request has ended.
constexpr auto drain_check = std::chrono::milliseconds(50);
// How often the autoscaler looks at the load (Ray Serve's control loop period).
constexpr auto autoscale_period = std::chrono::milliseconds(100);

struct router_state {
  serve_options options;
  api_limits limits;
  run::event_log* events = nullptr;
  std::unique_ptr<request_router> logic;
  std::map<std::string, actor::inference_worker_actor> workers;
  std::map<caf::actor_addr, std::string> names;
  std::shared_ptr<serve_metrics> metrics;
  // The model's text and tokens (declared before the front end, which uses it); null: troupe's
  // byte vocabulary.
  std::shared_ptr<const models::model_vocabulary> vocabulary;
  std::unique_ptr<http_front_end> front_end;
  std::string url;
  caf::typed_response_promise<actor::job_result> done;
  bool draining = false;
  // Autoscaling (roles.worker.autoscale); null without it.
  std::unique_ptr<replica_autoscaler> autoscaler;
  actor::worker_scaler* scaler = nullptr;
  std::map<std::string, replica_autoscaler::replica> replicas;  // by worker
  std::map<std::string, std::string> node_of;                   // worker -> its cluster node
  uint64_t joins = 0;
};

using router_self = actor::role_pointer<router_actor, router_state>;

void poll(router_self self, const std::string& worker);
void lost(router_self self, const std::string& worker, const std::string& why);

void execute(router_self self, std::vector<request_router::command> commands) {
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

void poll(router_self self, const std::string& worker) {
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

// Forgets worker `it`: the requests it ran are replayed on the others; returns how many.
uint64_t forget(router_self self,
                std::map<std::string, actor::inference_worker_actor>::iterator it) {
  auto& st = self->state;
  const std::string worker = it->first;
  st.names.erase(it->second.address());
  st.workers.erase(it);
  st.replicas.erase(worker);
  st.node_of.erase(worker);
  const uint64_t before = st.logic->replays();
  execute(self, st.logic->remove_worker(worker));
  st.metrics->worker_gone(worker);
  return st.logic->replays() - before;
}

void lost(router_self self, const std::string& worker, const std::string& why) {
  auto& st = self->state;
  auto it = st.workers.find(worker);
  if (it == st.workers.end()) return;
  // An autoscaled worker the job still wanted is replaced (not one drained to go, nor one
  // whose actor was replaced on its node, nor any while the job stops).
  const auto replica = st.replicas.find(worker);
  const bool replace = st.autoscaler != nullptr && st.scaler != nullptr && !st.draining &&
                       why != "replaced" && replica != st.replicas.end() &&
                       !replica->second.draining;
  const std::string node = st.node_of[worker];
  const uint64_t replayed = forget(self, it);
  if (replace) st.scaler->replace(node);
  st.metrics->replayed(replayed);
  st.events->emit(run::severity::warning, "worker_lost",
                  absl::StrCat(worker, " is gone (", why, "); ", replayed,
                               " of its requests continue elsewhere"),
                  {{"worker", worker}, {"replayed", replayed}});
}

void on_update(router_self self, const actor::actor_update& update) {
  auto& st = self->state;
  if (actor::parse_actor_name(update.name).role != "worker") return;
  auto handle = caf::actor_cast<actor::inference_worker_actor>(update.handle);
  if (auto it = st.workers.find(update.name); it != st.workers.end()) {
    if (it->second == handle) return;
    lost(self, update.name, "replaced");
  }
  st.workers[update.name] = handle;
  st.names[handle.address()] = update.name;
  st.replicas[update.name] = {.name = update.name, .joined = ++st.joins};
  st.node_of[update.name] = update.node;
  self->monitor(handle);
  st.events->emit(run::severity::info, "worker_joined",
                  absl::StrCat(update.name, " serves requests"), {{"worker", update.name}});
  execute(self, st.logic->add_worker(update.name));
  poll(self, update.name);
}

// A drained worker leaves: the router forgets it (it has no request left) and its process
// stops.
void retire(router_self self, const std::string& worker) {
  auto& st = self->state;
  auto it = st.workers.find(worker);
  if (it == st.workers.end()) return;
  const std::string node = st.node_of[worker];
  self->demonitor(it->second.address());
  forget(self, it);  // nothing to replay: it was drained
  st.scaler->retire(node, st.autoscaler->target());
  st.events->emit(run::severity::info, "worker_retired",
                  absl::StrCat(worker, " on ", node, " finished its requests and stops"),
                  {{"worker", worker}, {"node", node}});
}

// The autoscaler's control tick: ask for more or fewer workers, drain the ones beyond the
// target, retire the drained ones.
void autoscale(router_self self) {
  auto& st = self->state;
  if (st.draining) return;  // the job stops: its workers stop with it
  std::vector<replica_autoscaler::replica> replicas;
  for (auto& [name, r] : st.replicas) {
    r.ongoing = static_cast<int64_t>(st.logic->running_on(name));
    replicas.push_back(r);
  }
  const int64_t ongoing = static_cast<int64_t>(st.logic->queued() + st.logic->in_flight());
  const int before = st.autoscaler->target();
  auto d = st.autoscaler->step(std::chrono::steady_clock::now(), ongoing, replicas);
  if (d.scale_to && *d.scale_to != before) {
    const std::string why =
        before == 0 ? "a request waits and no worker serves (scale from zero)"
                    : absl::StrFormat("%.3g requests ongoing on average (look_back_period_s)",
                                      d.mean_ongoing);
    st.events->emit(run::severity::info, "autoscaled",
                    absl::StrCat(why, ": the workers go from ", before, " to ", *d.scale_to,
                                 " (roles.worker.autoscale)"),
                    {{"from", before},
                     {"to", *d.scale_to},
                     {"ongoing", ongoing},
                     {"mean_ongoing", d.mean_ongoing}});
  }
  if (d.scale_to) st.scaler->scale_to(*d.scale_to);
  for (const auto& worker : d.drain) {
    st.replicas[worker].draining = true;
    execute(self, st.logic->set_draining(worker, true));
    const size_t running = st.logic->running_on(worker);
    st.events->emit(
        run::severity::info, "worker_draining",
        absl::StrCat(worker, " takes no new requests",
                     running == 0 ? std::string(" and, idle, stops")
                                  : absl::StrCat(" and finishes its ", running,
                                                 running == 1 ? " request" : " requests",
                                                 " before it stops")),
        {{"worker", worker}, {"requests", running}});
  }
  for (const auto& worker : d.undrain) {
    st.replicas[worker].draining = false;
    execute(self, st.logic->set_draining(worker, false));
  }
  for (const auto& worker : d.retire)
    retire(self, worker);
  size_t draining = 0;
  for (const auto& [name, r] : st.replicas)
    draining += r.draining;
  st.metrics->autoscale_state(st.autoscaler->target(), draining);
  self->delayed_send(self, autoscale_period, actor::wake_atom_v);
}

absl::Status start_front_end(router_self self) {
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
                             st.options.http, st.options.tls.cert, st.options.tls.key, st.metrics,
                             st.vocabulary ? st.vocabulary.get() : &models::byte_vocabulary()},
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

void finish(router_self self, actor::job_result result) {
  self->state.done.deliver(std::move(result));
  self->quit();
}

// Ends the job once a draining router has nothing left: no request queued, on a worker, or in
// an HTTP exchange.
void finish_when_drained(router_self self) {
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

void drain(router_self self) {
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
  TROUPE_ASSIGN_OR_RETURN(const models::decoder_config model,
                          models::decoder_config_of(ctx.plan.spec.model));
  api_limits limits{options.model_name, model.ctx, options.default_max_tokens};
  limits.pooling = options.pooler_config.pooling_type == "MEAN" ? actor::pooling_type::mean
                                                                : actor::pooling_type::last;
  limits.normalize_embeddings = options.pooler_config.normalize;
  std::shared_ptr<const models::model_vocabulary> vocabulary;
  if (const std::string dir = models::hf_model_dir(ctx.plan.spec.model); !dir.empty()) {
    TROUPE_ASSIGN_OR_RETURN(const models::hf_model_config hf, models::load_hf_config(dir));
    limits.stop_token_ids = hf.eos_token_ids;
    // Llama 3's template teaches JSON calls; Qwen's (and most others') <tool_call> blocks.
    limits.tool_format = hf.architecture == "LlamaForCausalLM" ? tool_call_format::llama3_json
                                                               : tool_call_format::hermes;
    TROUPE_ASSIGN_OR_RETURN(vocabulary, models::vocabulary_of(ctx.plan.spec.model));
  }
  run::event_log* events = &ctx.events;
  metrics::registry* registry = &ctx.metrics;
  std::optional<config::autoscale_spec> autoscaling;
  if (const auto* worker = ctx.plan.find_role("worker")) autoscaling = worker->spec.autoscale;
  // The job starts with the workers it waits for (local ones, or min_workers).
  const auto& cluster = ctx.plan.spec.cluster;
  const int initial = std::max(cluster.local_workers, cluster.min_workers);
  actor::worker_scaler* scaler = ctx.scaler;
  auto handle = ctx.spawn<router_actor, router_state>(
      [options, limits, vocabulary, events, registry, autoscaling, initial,
       scaler](router_self self) -> router_actor::behavior_type {
        auto& st = self->state;
        if (autoscaling) {
          st.autoscaler = std::make_unique<replica_autoscaler>(*autoscaling, initial);
        }
        st.scaler = scaler;
        st.options = options;
        st.limits = limits;
        st.vocabulary = vocabulary;
        st.events = events;
        st.metrics = std::make_shared<serve_metrics>(*registry);
        st.logic = std::make_unique<request_router>(request_router::options{
            .max_queue = options.max_queue,
            .max_per_worker = options.max_per_worker,
            .prefix_block_size = options.engine.prefix_caching ? options.engine.block_size : 0,
            .prefix_blocks = options.engine.kv_blocks});
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
              } else if (st.autoscaler && st.scaler == nullptr) {
                finish(self, actor::job_result{false,
                                               {},
                                               "roles.worker.autoscale needs a job that can start "
                                               "workers (cluster.local_workers or "
                                               "cluster.scale_command)"});
              } else if (st.autoscaler) {
                autoscale(self);
              }
              return st.done;  // answered when the job stops
            },
            [self](actor::stop_atom) { drain(self); },
            [self](actor::tick_atom) { finish_when_drained(self); },
            [self](actor::wake_atom) { autoscale(self); },
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
