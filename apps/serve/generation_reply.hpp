#pragma once

// The serving front end's replies, each made from the router's answers about one HTTP request's
// generations as they come: a whole completion, a completion streamed as Server-Sent Events, or
// embeddings. The HTTP server pulls them on its event loop (http::reply_source), so a waiting or
// streaming request holds no thread.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "apps/serve/openai_api.hpp"
#include "apps/serve/serve_metrics.hpp"
#include "runtime/http/reply_source.hpp"

namespace troupe::apps {

/// What the router said about one generation, in order: accepted or refused, then its events.
/// Written by the router's thread, read by the reply that owns it. Thread-safe.
class generation_stream {
 public:
  using clock = std::chrono::steady_clock;

  void accept();
  void refuse(api_error error);
  /// Adds an event (its tokens counted in `metrics` as they arrive).
  void deliver(const actor::generation_event& event, serve_metrics& metrics);
  /// Calls `wake` (which must not wait) whenever the stream has news, and now if it has some.
  void on_news(std::function<void()> wake);

  /// Not yet answered: nullopt; accepted: true; refused: false, with `refusal` filled.
  [[nodiscard]] std::optional<bool> answer(api_error& refusal);
  /// The events delivered since the last call.
  [[nodiscard]] std::deque<actor::generation_event> take_events();

 private:
  void notify(std::unique_lock<std::mutex>& lock);

  std::mutex mu_;
  std::optional<bool> accepted_;
  api_error refusal_;
  std::deque<actor::generation_event> events_;
  std::shared_ptr<const std::function<void()>> wake_;  // shared: each event calls it
  const clock::time_point submitted_ = clock::now();
  clock::time_point last_tokens_;
  int tokens_ = 0;
};

/// What a reply needs of the front end.
struct reply_context {
  const api_limits& limits;
  const models::model_vocabulary& vocabulary;
  serve_metrics& metrics;
  /// Done with generation `id`: its stream is forgotten, and with `cancel` the request too.
  std::function<void(uint64_t id, bool cancel)> release;
};

/// A reply about generations [first_id, first_id + streams.size()): it waits for the router to
/// accept them all (30 s at most) and answers a refusal with its error; then subclasses turn
/// the events into the reply. A reply that ends (abandoned by its client, refused, or failed)
/// cancels the generations that have not finished.
class generation_reply : public http::reply_source {
 public:
  generation_reply(reply_context context, uint64_t first_id,
                   std::vector<std::shared_ptr<generation_stream>> streams);
  ~generation_reply() override;

  void attach(std::function<void()> wake) final;
  bool pull(http::reply_writer& out) final;
  void abandoned() final;

 protected:
  /// Writes what the events of the choices allow; true once the reply is complete.
  virtual bool on_events(std::vector<std::deque<actor::generation_event>> events,
                         http::reply_writer& out) = 0;
  /// Choice k has finished: its generation is not cancelled when the reply ends.
  void finished(int k);
  /// Whether every choice has finished.
  [[nodiscard]] bool all_finished() const;

  reply_context context_;

 private:
  // Releases every generation, cancelling those not finished (once).
  void release_all();

  const uint64_t first_id_;
  std::vector<std::shared_ptr<generation_stream>> streams_;
  std::vector<bool> finished_;
  bool accepted_ = false;
  bool released_ = false;
  const std::chrono::steady_clock::time_point opened_ = std::chrono::steady_clock::now();
};

/// A completion answered whole when every choice has finished.
[[nodiscard]] std::shared_ptr<generation_reply> whole_completion(
    reply_context context, uint64_t first_id,
    std::vector<std::shared_ptr<generation_stream>> streams, completion_call call);
/// A completion streamed as OpenAI streams it: a chunk per piece of text, then [DONE].
[[nodiscard]] std::shared_ptr<generation_reply> streamed_completion(
    reply_context context, uint64_t first_id,
    std::vector<std::shared_ptr<generation_stream>> streams, completion_call call);
/// Embeddings of `call`'s inputs, answered whole.
[[nodiscard]] std::shared_ptr<generation_reply> embeddings_reply(
    reply_context context, uint64_t first_id,
    std::vector<std::shared_ptr<generation_stream>> streams, embedding_call call);

}  // namespace troupe::apps
