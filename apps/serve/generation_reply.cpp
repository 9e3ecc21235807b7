#include "apps/serve/generation_reply.hpp"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace troupe::apps {
namespace {

using clock = std::chrono::steady_clock;

// How long the router has to answer whether it takes a request.
constexpr auto acceptance_limit = std::chrono::seconds(30);

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

httplib::Response error_response(const api_error& e) {
  httplib::Response r;
  r.status = e.http_status;
  if (e.http_status == 429) r.set_header("Retry-After", "1");
  r.set_content(error_body(e), "application/json");
  return r;
}

}  // namespace

// ---------------------------------------------------------------- generation_stream

void generation_stream::notify(std::unique_lock<std::mutex>& lock) {
  const std::shared_ptr<const std::function<void()>> wake = wake_;  // no copy of the function
  lock.unlock();
  if (wake) (*wake)();
}

void generation_stream::accept() {
  std::unique_lock lock(mu_);
  accepted_ = true;
  notify(lock);
}

void generation_stream::refuse(api_error error) {
  std::unique_lock lock(mu_);
  accepted_ = false;
  refusal_ = std::move(error);
  notify(lock);
}

void generation_stream::deliver(const actor::generation_event& event, serve_metrics& metrics) {
  std::unique_lock lock(mu_);
  const auto now = clock::now();
  const auto seconds = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const int n = static_cast<int>(event.tokens.size());
  metrics.tokens_arrived(n, tokens_, seconds(now - submitted_), seconds(now - last_tokens_));
  if (n > 0) {
    tokens_ += n;
    last_tokens_ = now;
  }
  events_.push_back(event);
  notify(lock);
}

void generation_stream::on_news(std::function<void()> wake) {
  std::unique_lock lock(mu_);
  wake_ = std::make_shared<const std::function<void()>>(std::move(wake));
  if (accepted_.has_value()) notify(lock);
}

std::optional<bool> generation_stream::answer(api_error& refusal) {
  std::lock_guard lock(mu_);
  if (accepted_ == false) refusal = refusal_;
  return accepted_;
}

std::deque<actor::generation_event> generation_stream::take_events() {
  std::lock_guard lock(mu_);
  return std::exchange(events_, {});
}

// ---------------------------------------------------------------- generation_reply

generation_reply::generation_reply(reply_context context, uint64_t first_id,
                                   std::vector<std::shared_ptr<generation_stream>> streams)
    : context_(std::move(context)),
      first_id_(first_id),
      streams_(std::move(streams)),
      finished_(streams_.size(), false) {}

generation_reply::~generation_reply() {
  release_all();
}

void generation_reply::attach(std::function<void()> wake) {
  for (auto& s : streams_)
    s->on_news(wake);
}

void generation_reply::finished(int k) {
  finished_[k] = true;
}

bool generation_reply::all_finished() const {
  return std::all_of(finished_.begin(), finished_.end(), [](bool f) { return f; });
}

void generation_reply::release_all() {
  if (std::exchange(released_, true)) return;
  for (size_t k = 0; k < streams_.size(); ++k)
    context_.release(first_id_ + k, !finished_[k]);
}

bool generation_reply::pull(http::reply_writer& out) {
  if (out.stopping()) {  // a reply not yet begun says so; a stream is cut off
    if (out.begun()) return false;
    const api_error stopping{503, "server_error", "", "the server is shutting down"};
    release_all();
    out.whole(error_response(stopping));
    if (!accepted_) context_.metrics.response(stopping.http_status);  // else counted as 200
    return true;
  }
  if (!accepted_) {
    for (auto& s : streams_) {
      api_error refusal;
      const std::optional<bool> answer = s->answer(refusal);
      if (answer == false) {
        release_all();
        out.whole(error_response(refusal));
        context_.metrics.response(refusal.http_status);
        return true;
      }
      if (!answer.has_value()) {
        if (clock::now() - opened_ < acceptance_limit) return false;
        const api_error late{503, "server_error", "",
                             "the router did not answer within 30 s; retry shortly"};
        release_all();
        out.whole(error_response(late));
        context_.metrics.response(late.http_status);
        return true;
      }
    }
    accepted_ = true;
    context_.metrics.response(200);
  }
  std::vector<std::deque<actor::generation_event>> events;
  events.reserve(streams_.size());
  for (auto& s : streams_)
    events.push_back(s->take_events());
  if (!on_events(std::move(events), out)) return false;
  release_all();
  return true;
}

void generation_reply::abandoned() {
  release_all();
}

namespace {

// ---------------------------------------------------------------- completions

// A completion's reply: the call, and the name and time its answer carries.
class completion_reply : public generation_reply {
 public:
  completion_reply(reply_context context, uint64_t first_id,
                   std::vector<std::shared_ptr<generation_stream>> streams, completion_call call)
      : generation_reply(std::move(context), first_id, std::move(streams)),
        call_(std::move(call)),
        name_(absl::StrCat(call_.chat ? "chatcmpl-" : "cmpl-", first_id)) {}

 protected:
  const completion_call call_;
  const std::string name_;
  const int64_t created_ = unix_seconds();
};

class whole_completion_reply final : public completion_reply {
 public:
  whole_completion_reply(reply_context context, uint64_t first_id,
                         std::vector<std::shared_ptr<generation_stream>> streams,
                         completion_call call)
      : completion_reply(std::move(context), first_id, std::move(streams), std::move(call)),
        outputs_(call_.choices()) {}

 private:
  bool on_events(std::vector<std::deque<actor::generation_event>> events,
                 http::reply_writer& out) override {
    for (size_t k = 0; k < events.size(); ++k) {
      for (const auto& e : events[k]) {
        outputs_[k].add(e);
        if (e.finished) finished(static_cast<int>(k));
      }
    }
    if (!all_finished()) return false;
    httplib::Response r;
    r.set_content(
        completion_body(name_, context_.limits, created_, call_, outputs_, context_.vocabulary),
        "application/json");
    out.whole(r);
    return true;
  }

  std::vector<choice_output> outputs_;
};

class streamed_completion_reply final : public completion_reply {
 public:
  streamed_completion_reply(reply_context context, uint64_t first_id,
                            std::vector<std::shared_ptr<generation_stream>> streams,
                            completion_call call)
      : completion_reply(std::move(context), first_id, std::move(streams), std::move(call)),
        choices_(call_.choices()) {
    for (int k = 0; k < call_.choices(); ++k) {
      choices_[k].text = context_.vocabulary.stream();
      choices_[k].echo = echoed_prompt(call_, k, context_.vocabulary);
      if (call_.tool_choice == completion_call::tool_use::automatic ||
          call_.tool_choice == completion_call::tool_use::required) {
        choices_[k].calls =
            tool_call_stream_of(call_, context_.limits, reply_seed(name_, static_cast<size_t>(k)));
      }
    }
  }

 private:
  // Per choice: its text so far (a split character held back), the echoed prompt it has yet to
  // send, the calls read from it, its tokens so far, and whether it has begun.
  struct choice {
    std::unique_ptr<models::token_stream> text;
    std::string echo;
    std::optional<tool_call_stream> calls;  // an automatic or required tool_choice's
    int tokens = 0;
    bool announced = false;  // its first chunk (a chat's says the role) has been sent
  };

  bool on_events(std::vector<std::deque<actor::generation_event>> events,
                 http::reply_writer& out) override {
    if (!out.begun()) {
      httplib::Response head;
      head.set_header("Content-Type", "text/event-stream");
      head.set_header("Cache-Control", "no-cache");
      out.begin(head);
    }
    for (size_t k = 0; k < events.size(); ++k) {
      for (const auto& e : events[k])
        out.write(chunk_of(static_cast<int>(k), e));
    }
    if (!all_finished()) return false;
    if (call_.include_usage) {
      int tokens = 0;
      for (const auto& c : choices_)
        tokens += c.tokens;
      out.write(stream_usage_chunk(name_, context_.limits, created_, call_, tokens));
    }
    out.write(stream_done());
    out.end();
    return true;
  }

  // The chunk (perhaps none) that event `e` of choice `k` makes.
  std::string chunk_of(int k, const actor::generation_event& e) {
    const auto& limits = context_.limits;
    choice& c = choices_[k];
    std::string text = c.text->push(e.tokens);
    if (e.finished) text = cut_at_stop(text + c.text->finish(), call_, e.reason);
    text = std::exchange(c.echo, std::string()) + text;
    c.tokens += static_cast<int>(e.tokens.size());
    if (e.finished) finished(k);
    const actor::finish_reason* reason = e.finished ? &e.reason : nullptr;
    switch (call_.tool_choice) {
      case completion_call::tool_use::automatic:
      case completion_call::tool_use::required: {  // content and calls as each is known
        const parsed_reply piece = e.finished ? c.calls->finish(text) : c.calls->push(text);
        std::string chunk = stream_reply_chunk(name_, limits, created_, call_, k, piece, *c.calls,
                                               !c.announced, reason);
        if (!chunk.empty()) c.announced = true;
        return chunk;
      }
      case completion_call::tool_use::named:  // its arguments, piece by piece
        if (c.announced && text.empty() && !e.finished) return {};
        return stream_tool_call_chunk(name_, limits, created_, call_, k, text,
                                      !std::exchange(c.announced, true), reason);
      case completion_call::tool_use::none:
        break;
    }
    if (text.empty() && !e.finished && (c.announced || !call_.chat)) return {};
    choice_output piece;
    piece.add(e);
    return stream_chunk(name_, limits, created_, call_, k, text, piece, reason, context_.vocabulary,
                        !std::exchange(c.announced, true));
  }

  std::vector<choice> choices_;
};

// ---------------------------------------------------------------- embeddings

class embeddings_generation_reply final : public generation_reply {
 public:
  embeddings_generation_reply(reply_context context, uint64_t first_id,
                              std::vector<std::shared_ptr<generation_stream>> streams,
                              embedding_call call)
      : generation_reply(std::move(context), first_id, std::move(streams)),
        call_(std::move(call)),
        vectors_(call_.inputs.size()) {}

 private:
  bool on_events(std::vector<std::deque<actor::generation_event>> events,
                 http::reply_writer& out) override {
    for (size_t k = 0; k < events.size(); ++k) {
      for (auto& e : events[k]) {
        if (!e.finished) continue;
        finished(static_cast<int>(k));
        if (e.embedding.empty()) {
          const api_error failed{503, "server_error", "",
                                 absl::StrCat("input ", k, " ended without its embedding (",
                                              actor::to_string(e.reason), ")")};
          out.whole(error_response(failed));
          return true;
        }
        vectors_[k] = std::move(e.embedding);
      }
    }
    if (!all_finished()) return false;
    httplib::Response r;
    r.set_content(embeddings_body(context_.limits, call_, std::move(vectors_)), "application/json");
    out.whole(r);
    return true;
  }

  const embedding_call call_;
  std::vector<std::vector<float>> vectors_;
};

}  // namespace

std::shared_ptr<generation_reply> whole_completion(
    reply_context context, uint64_t first_id,
    std::vector<std::shared_ptr<generation_stream>> streams, completion_call call) {
  return std::make_shared<whole_completion_reply>(std::move(context), first_id, std::move(streams),
                                                  std::move(call));
}

std::shared_ptr<generation_reply> streamed_completion(
    reply_context context, uint64_t first_id,
    std::vector<std::shared_ptr<generation_stream>> streams, completion_call call) {
  return std::make_shared<streamed_completion_reply>(std::move(context), first_id,
                                                     std::move(streams), std::move(call));
}

std::shared_ptr<generation_reply> embeddings_reply(
    reply_context context, uint64_t first_id,
    std::vector<std::shared_ptr<generation_stream>> streams, embedding_call call) {
  return std::make_shared<embeddings_generation_reply>(std::move(context), first_id,
                                                       std::move(streams), std::move(call));
}

}  // namespace troupe::apps
