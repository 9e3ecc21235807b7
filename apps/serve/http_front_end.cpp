#include "apps/serve/http_front_end.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <optional>
#include <utility>

#include <sys/socket.h>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/base/status.hpp"

namespace troupe::apps {
namespace {

using clock = std::chrono::steady_clock;

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// What the router said about one request, in order: accepted or refused, then its events.
struct http_front_end::stream {
  std::mutex mu;
  std::condition_variable changed;
  std::optional<bool> accepted;
  api_error refusal;
  std::deque<actor::generation_event> events;
  const clock::time_point submitted = clock::now();
  clock::time_point last_tokens;  // when the latest tokens arrived
  int tokens = 0;                 // tokens arrived so far

  // Waits until the router has answered; false when it has not within `limit`.
  bool wait_answer(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu);
    return changed.wait_for(lock, limit, [&] { return accepted.has_value(); });
  }
  std::optional<actor::generation_event> next(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu);
    if (!changed.wait_for(lock, limit, [&] { return !events.empty(); })) return std::nullopt;
    auto e = std::move(events.front());
    events.pop_front();
    return e;
  }
};

std::vector<std::shared_ptr<http_front_end::stream>> http_front_end::open_streams(uint64_t id,
                                                                                  int n) {
  std::vector<std::shared_ptr<stream>> out;
  std::lock_guard lock(mu_);
  for (int k = 0; k < n; ++k) {
    out.push_back(std::make_shared<stream>());
    streams_[id + k] = out.back();
  }
  return out;
}

void http_front_end::close_streams(uint64_t id, int n, bool cancel) {
  {
    std::lock_guard lock(mu_);
    for (int k = 0; k < n; ++k)
      streams_.erase(id + k);
  }
  if (!cancel) return;
  for (int k = 0; k < n; ++k)
    hooks_.cancel(id + k);
}

std::optional<api_error> http_front_end::await_acceptance(
    const std::vector<std::shared_ptr<stream>>& streams, uint64_t id) {
  const int n = static_cast<int>(streams.size());
  for (const auto& s : streams) {
    if (!s->wait_answer(std::chrono::seconds(30))) {
      close_streams(id, n, true);
      return api_error{503, "server_error", "", "the router did not answer within 30 s"};
    }
    if (!*s->accepted) {
      close_streams(id, n, true);
      return s->refusal;
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<http_front_end>> http_front_end::start(settings s, hooks h) {
  std::unique_ptr<http_front_end> f(new http_front_end(std::move(s), std::move(h)));
  f->server_ = std::make_unique<http::guarded_http_server>(
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
  closing_ = true;
  server_.reset();  // stops serving and joins its thread
}

std::shared_ptr<http_front_end::stream> http_front_end::find(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

void http_front_end::accepted(uint64_t id) {
  if (auto s = find(id)) {
    std::lock_guard lock(s->mu);
    s->accepted = true;
    s->changed.notify_all();
  }
}

void http_front_end::refused(uint64_t id, api_error error) {
  if (auto s = find(id)) {
    std::lock_guard lock(s->mu);
    s->accepted = false;
    s->refusal = std::move(error);
    s->changed.notify_all();
  }
}

void http_front_end::deliver(const actor::generation_event& event) {
  if (auto s = find(event.id)) {
    std::lock_guard lock(s->mu);
    const auto now = clock::now();
    const auto seconds = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
    const int n = static_cast<int>(event.tokens.size());
    settings_.metrics->tokens_arrived(n, s->tokens, seconds(now - s->submitted),
                                      seconds(now - s->last_tokens));
    if (n > 0) {
      s->tokens += n;
      s->last_tokens = now;
    }
    s->events.push_back(event);
    s->changed.notify_all();
  }
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

  const auto completions = [this, reply_error, authorized, count](bool chat) {
    return [this, reply_error, authorized, count, chat](const httplib::Request& req,
                                                        httplib::Response& res) {
      if (!authorized(req, res)) return count(res.status);
      if (draining_) {
        reply_error(res, {503, "server_error", "", "the server is shutting down"});
        return count(res.status);
      }
      auto parsed = parse_completion(req.body, settings_.limits, chat, *settings_.vocabulary);
      if (auto* e = std::get_if<api_error>(&parsed)) {
        reply_error(res, *e);
        return count(res.status);
      }
      completion_call call = std::get<completion_call>(std::move(parsed));
      // Choice k is request id + k: generation k % n of prompt k / n, seeded seed + k % n, so
      // that a prompt in a batch gives what it gives alone.
      const int choices = call.choices();
      const uint64_t id = next_id_.fetch_add(static_cast<uint64_t>(choices));
      const uint64_t seed = call.seeded ? call.request.seed : id * 0x9E3779B97F4A7C15ull;
      auto streams =
          std::make_shared<std::vector<std::shared_ptr<stream>>>(open_streams(id, choices));
      const auto forget = [this, id, choices] { close_streams(id, choices, false); };
      for (int k = 0; k < choices; ++k) {
        actor::generation_request r = call.request;
        r.id = id + k;
        r.prompt = call.prompt_of(k);
        r.seed = seed + static_cast<uint64_t>(k % call.n);
        hooks_.submit(std::move(r));
      }
      if (auto refused = await_acceptance(*streams, id)) {
        reply_error(res, *refused);
        return count(res.status);
      }
      const std::string name = absl::StrCat(call.chat ? "chatcmpl-" : "cmpl-", id);
      const int64_t created = unix_seconds();
      count(200);
      if (!call.stream) {
        std::vector<choice_output> outputs(choices);
        for (int k = 0; k < choices; ++k) {
          for (;;) {
            auto e = (*streams)[k]->next(std::chrono::milliseconds(500));
            if (!e && closing_) {
              forget();
              reply_error(res, {503, "server_error", "", "the server is shutting down"});
              return;
            }
            if (!e) continue;  // generation goes on; the client waits for the whole answer
            outputs[k].add(*e);
            if (e->finished) break;
          }
        }
        forget();
        res.set_content(
            completion_body(name, settings_.limits, created, call, outputs, *settings_.vocabulary),
            "application/json");
        return;
      }
      // Per choice: its text so far (a split character held back), the echoed prompt it has yet
      // to send, its tokens so far, and whether it has ended.
      struct choice_stream {
        std::unique_ptr<models::token_stream> text;
        std::string echo;
        std::string held;  // an automatic or required tool_choice's reply, sent whole at its end
        int tokens = 0;
        bool announced = false;  // a named tool_choice's call has been announced
        bool finished = false;
      };
      const bool whole_replies = call.tool_choice == completion_call::tool_use::automatic ||
                                 call.tool_choice == completion_call::tool_use::required;
      const bool named_call = call.tool_choice == completion_call::tool_use::named;
      auto state = std::make_shared<std::vector<choice_stream>>(choices);
      for (int k = 0; k < choices; ++k) {
        (*state)[k].text = settings_.vocabulary->stream();
        (*state)[k].echo = echoed_prompt(call, k, *settings_.vocabulary);
      }
      auto next_choice = std::make_shared<int>(0);
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [this, streams, state, next_choice, name, created, call, whole_replies, named_call](
              size_t, httplib::DataSink& sink) {
            // The choices' events, round robin, each stream waited on briefly.
            const int n = static_cast<int>(streams->size());
            int k = *next_choice;
            for (int tried = 0; tried < n && (*state)[k].finished; ++tried)
              k = (k + 1) % n;
            *next_choice = (k + 1) % n;
            choice_stream& c = (*state)[k];
            auto e = (*streams)[k]->next(std::chrono::milliseconds(100 / n + 1));
            // A client that went away, or a server shutting down, ends the stream.
            if (!e) return sink.is_writable() && !closing_;
            std::string text = c.text->push(e->tokens);
            if (e->finished) text = cut_at_stop(text + c.text->finish(), call, e->reason);
            text = std::exchange(c.echo, std::string()) + text;
            c.tokens += static_cast<int>(e->tokens.size());
            choice_output piece;
            piece.add(*e);
            if (whole_replies) {  // its tool calls are parsed from all of it
              c.held += text;
              if (e->finished) {
                const std::string chunk =
                    stream_reply_chunk(name, settings_.limits, created, call, k, c.held, e->reason);
                if (!sink.write(chunk.data(), chunk.size())) return false;
              }
            } else if (named_call) {  // its arguments, piece by piece
              if (!c.announced || !text.empty() || e->finished) {
                const std::string chunk =
                    stream_tool_call_chunk(name, settings_.limits, created, call, k, text,
                                           !c.announced, e->finished ? &e->reason : nullptr);
                c.announced = true;
                if (!sink.write(chunk.data(), chunk.size())) return false;
              }
            } else if (!text.empty() || e->finished) {
              const std::string chunk =
                  stream_chunk(name, settings_.limits, created, call, k, text, piece,
                               e->finished ? &e->reason : nullptr, *settings_.vocabulary);
              if (!sink.write(chunk.data(), chunk.size())) return false;
            }
            if (e->finished) {
              c.finished = true;
              if (std::all_of(state->begin(), state->end(),
                              [](const choice_stream& x) { return x.finished; })) {
                if (call.include_usage) {
                  int tokens = 0;
                  for (const auto& x : *state)
                    tokens += x.tokens;
                  const std::string usage =
                      stream_usage_chunk(name, settings_.limits, created, call, tokens);
                  if (!sink.write(usage.data(), usage.size())) return false;
                }
                const std::string done = stream_done();
                sink.write(done.data(), done.size());
                sink.done();
              }
            }
            return true;
          },
          [this, id, state](bool) {
            for (size_t k = 0; k < state->size(); ++k) {
              {
                std::lock_guard lock(mu_);
                streams_.erase(id + k);
              }
              if (!(*state)[k].finished) hooks_.cancel(id + k);
            }
          });
    };
  };
  server.Post("/v1/completions", completions(false));
  server.Post("/v1/chat/completions", completions(true));
  server.Post("/v1/embeddings", [this, reply_error, authorized, count](const httplib::Request& req,
                                                                       httplib::Response& res) {
    if (!authorized(req, res)) return count(res.status);
    if (draining_) {
      reply_error(res, {503, "server_error", "", "the server is shutting down"});
      return count(res.status);
    }
    auto parsed = parse_embeddings(req.body, settings_.limits, *settings_.vocabulary);
    if (auto* e = std::get_if<api_error>(&parsed)) {
      reply_error(res, *e);
      return count(res.status);
    }
    const embedding_call call = std::get<embedding_call>(std::move(parsed));
    // Each input a pooling request, ending at its prompt with its embedding.
    const int inputs = static_cast<int>(call.inputs.size());
    const uint64_t id = next_id_.fetch_add(static_cast<uint64_t>(inputs));
    const std::vector<std::shared_ptr<stream>> streams = open_streams(id, inputs);
    const auto fail = [&](const api_error& e) {
      close_streams(id, inputs, true);
      reply_error(res, e);
      count(res.status);
    };
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
    if (auto refused = await_acceptance(streams, id)) {
      reply_error(res, *refused);
      return count(res.status);
    }
    std::vector<std::vector<float>> vectors(inputs);
    for (int k = 0; k < inputs; ++k) {
      for (;;) {
        auto e = streams[k]->next(std::chrono::milliseconds(500));
        if (!e && closing_) return fail({503, "server_error", "", "the server is shutting down"});
        if (!e || !e->finished) continue;
        if (e->embedding.empty()) {
          return fail({503, "server_error", "",
                       absl::StrCat("input ", k, " ended without its embedding (",
                                    actor::to_string(e->reason), ")")});
        }
        vectors[k] = e->embedding;
        break;
      }
    }
    close_streams(id, inputs, false);
    count(200);
    res.set_content(embeddings_body(settings_.limits, call, std::move(vectors)),
                    "application/json");
  });
  server.Get("/v1/models", [this, authorized](const httplib::Request& req, httplib::Response& res) {
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
  server.Post("/tokenize", tokenizer_route(&tokenize));
  server.Post("/detokenize", tokenizer_route(&detokenize));
  server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    // A load balancer stops sending requests to a server that is draining.
    if (draining_) res.status = 503;
    res.set_content(draining_ ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}",
                    "application/json");
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(settings_.metrics->prometheus_text(), "text/plain; version=0.0.4");
  });
  server.set_error_handler([this, reply_error](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404 && res.body.empty()) {
      reply_error(res, {404, "invalid_request_error", "not_found", "no such endpoint"});
    }
  });
}

}  // namespace troupe::apps
