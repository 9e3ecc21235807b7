#include "apps/serve/http_front_end.hpp"

#include <utility>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/base/status.hpp"

namespace troupe::apps {

std::pair<uint64_t, std::vector<std::shared_ptr<generation_stream>>> http_front_end::open_streams(
    int n) {
  const uint64_t id = next_id_.fetch_add(static_cast<uint64_t>(n));
  std::vector<std::shared_ptr<generation_stream>> out;
  std::lock_guard lock(mu_);
  for (int k = 0; k < n; ++k) {
    out.push_back(std::make_shared<generation_stream>());
    streams_[id + k] = out.back();
  }
  return {id, std::move(out)};
}

reply_context http_front_end::context() {
  return reply_context{settings_.limits, *settings_.vocabulary, *settings_.metrics,
                       [this](uint64_t id, bool cancel) {
                         {
                           std::lock_guard lock(mu_);
                           streams_.erase(id);
                         }
                         if (cancel) hooks_.cancel(id);
                       }};
}

absl::StatusOr<std::unique_ptr<http_front_end>> http_front_end::start(settings s, hooks h) {
  std::unique_ptr<http_front_end> f(new http_front_end(std::move(s), std::move(h)));
  f->server_ = std::make_unique<http::http_server>(
      f->settings_.http, [metrics = f->settings_.metrics](int status, const std::string& message) {
        metrics->response(status);
        return error_body(
            {status, status == 503 ? "server_error" : "invalid_request_error", "", message});
      });
  if (!f->settings_.tls_cert.empty()) {
    TROUPE_RETURN_IF_ERROR(f->server_->use_tls(f->settings_.tls_cert, f->settings_.tls_key));
  }
  f->install_routes();
  auto port = f->server_->start(f->settings_.host, f->settings_.port);
  if (!port.ok()) {
    return absl::Status(port.status().code(),
                        absl::StrCat("serve.port: ", port.status().message()));
  }
  f->port_ = *port;
  return f;
}

http_front_end::http_front_end(settings s, hooks h)
    : settings_(std::move(s)), hooks_(std::move(h)) {}

http_front_end::~http_front_end() {
  server_.reset();  // ends every connection (their requests cancelled) and joins its threads
}

std::shared_ptr<generation_stream> http_front_end::find(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

void http_front_end::accepted(uint64_t id) {
  if (auto s = find(id)) s->accept();
}

void http_front_end::refused(uint64_t id, api_error error) {
  if (auto s = find(id)) s->refuse(std::move(error));
}

void http_front_end::deliver(const actor::generation_event& event) {
  if (auto s = find(event.id)) s->deliver(event, *settings_.metrics);
}

size_t http_front_end::open_requests() {
  std::lock_guard lock(mu_);
  return streams_.size();
}

void http_front_end::install_routes() {
  auto& server = *server_;
  const auto reply_error = [this](httplib::Response& res, const api_error& e) {
    res.status = e.http_status;
    if (e.http_status == 429) res.set_header("Retry-After", "1");
    res.set_content(error_body(e), "application/json");
  };
  const auto authorized = [this, reply_error](const httplib::Request& req, httplib::Response& res) {
    if (settings_.token.empty() ||
        req.get_header_value("Authorization") == "Bearer " + settings_.token) {
      return true;
    }
    reply_error(res, {401, "authentication_error", "invalid_api_key",
                      "missing or wrong bearer token (Authorization: Bearer ...)"});
    return false;
  };
  const auto count = [this](int status) { settings_.metrics->response(status); };

  // The common start of a generating route: the bearer token, and no new work while draining.
  const auto admitted = [this, reply_error, authorized, count](const httplib::Request& req,
                                                               httplib::Response& res) {
    if (!authorized(req, res)) {
      count(res.status);
      return false;
    }
    if (draining_) {
      reply_error(res, {503, "server_error", "", "the server is shutting down"});
      count(res.status);
      return false;
    }
    return true;
  };
  const auto completions = [this, reply_error, admitted, count](bool chat) {
    return [this, reply_error, admitted, count, chat](
               const httplib::Request& req,
               httplib::Response& res) -> std::shared_ptr<http::reply_source> {
      if (!admitted(req, res)) return nullptr;
      auto parsed = parse_completion(req.body, settings_.limits, chat, *settings_.vocabulary);
      if (auto* e = std::get_if<api_error>(&parsed)) {
        reply_error(res, *e);
        count(res.status);
        return nullptr;
      }
      completion_call call = std::get<completion_call>(std::move(parsed));
      // Choice k is request id + k: generation k % n of prompt k / n, seeded seed + k % n, so
      // that a prompt in a batch gives what it gives alone.
      const int choices = call.choices();
      auto [id, streams] = open_streams(choices);
      const uint64_t seed = call.seeded ? call.request.seed : id * 0x9E3779B97F4A7C15ull;
      for (int k = 0; k < choices; ++k) {
        actor::generation_request r = call.request;
        r.id = id + k;
        r.prompt = call.prompt_of(k);
        r.seed = seed + static_cast<uint64_t>(k % call.n);
        hooks_.submit(std::move(r));
      }
      return call.stream ? streamed_completion(context(), id, std::move(streams), std::move(call))
                         : whole_completion(context(), id, std::move(streams), std::move(call));
    };
  };
  server.route_deferred("POST", "/v1/completions", completions(false));
  server.route_deferred("POST", "/v1/chat/completions", completions(true));
  server.route_deferred(
      "POST", "/v1/embeddings",
      [this, reply_error, admitted, count](const httplib::Request& req, httplib::Response& res)
          -> std::shared_ptr<http::reply_source> {
        if (!admitted(req, res)) return nullptr;
        auto parsed = parse_embeddings(req.body, settings_.limits, *settings_.vocabulary);
        if (auto* e = std::get_if<api_error>(&parsed)) {
          reply_error(res, *e);
          count(res.status);
          return nullptr;
        }
        embedding_call call = std::get<embedding_call>(std::move(parsed));
        // Each input a pooling request, ending at its prompt with its embedding.
        const int inputs = static_cast<int>(call.inputs.size());
        auto [id, streams] = open_streams(inputs);
        for (int k = 0; k < inputs; ++k) {
          actor::generation_request r;
          r.id = id + k;
          r.prompt = call.inputs[k];
          r.max_tokens = 1;
          r.temperature = 0;
          r.stream = false;
          r.pooling = settings_.limits.pooling;
          hooks_.submit(std::move(r));
        }
        return embeddings_reply(context(), id, std::move(streams), std::move(call));
      });
  server.route("GET", "/v1/models",
               [this, authorized](const httplib::Request& req, httplib::Response& res) {
                 if (!authorized(req, res)) return;
                 res.set_content(nlohmann::json{{"object", "list"},
                                                {"data",
                                                 {{{"id", settings_.limits.model},
                                                   {"object", "model"},
                                                   {"created", 0},
                                                   {"owned_by", "troupe"},
                                                   {"max_model_len", settings_.limits.ctx}}}}}
                                     .dump(),
                                 "application/json");
               });
  // vLLM's tokenizer endpoints: the model's own tokens for a text or a conversation, and back.
  const auto tokenizer_route = [this, reply_error, authorized](auto parse) {
    return [this, reply_error, authorized, parse](const httplib::Request& req,
                                                  httplib::Response& res) {
      if (!authorized(req, res)) return;
      auto reply = parse(req.body, settings_.limits, *settings_.vocabulary);
      if (auto* e = std::get_if<api_error>(&reply)) return reply_error(res, *e);
      res.set_content(std::get<std::string>(reply), "application/json");
    };
  };
  server.route("POST", "/tokenize", tokenizer_route(&tokenize));
  server.route("POST", "/detokenize", tokenizer_route(&detokenize));
  server.route("GET", "/health", [this](const httplib::Request&, httplib::Response& res) {
    // A load balancer stops sending requests to a server that is draining.
    if (draining_) res.status = 503;
    res.set_content(draining_ ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}",
                    "application/json");
  });
  server.route("GET", "/metrics", [this](const httplib::Request&, httplib::Response& res) {
    settings_.metrics->http_state(server_->connections(), server_->buffered_bytes());
    res.set_content(settings_.metrics->prometheus_text(), "text/plain; version=0.0.4");
  });
  server.set_not_found([reply_error](const httplib::Request& req, httplib::Response& res) {
    reply_error(res, {404, "invalid_request_error", "not_found",
                      absl::StrCat("no such endpoint: ", req.method, " ", req.path)});
  });
}

}  // namespace troupe::apps
