#pragma once

#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "httplib.h"

namespace troupe::http {

/// Writes one reply into a connection's outgoing bytes, as HTTP/1.1 frames it: a whole reply
/// with its Content-Length, or a streamed one in chunks.
class reply_writer {
 public:
  /// `keep_alive`: the connection stays open after this reply; `head_only`: the request was HEAD
  /// (the body is left out, its length kept).
  reply_writer(std::string& out, bool keep_alive, bool head_only)
      : out_(out), keep_alive_(keep_alive), head_only_(head_only) {}

  /// The whole reply: `response`'s status, headers and body.
  void whole(const httplib::Response& response);
  /// Begins a reply whose body comes in pieces by write(): `head`'s status and headers.
  void begin(const httplib::Response& head);
  /// A piece of a begun reply's body (nothing when empty).
  void write(absl::string_view bytes);
  /// Ends a begun reply.
  void end();

  [[nodiscard]] bool begun() const { return begun_; }
  [[nodiscard]] bool ended() const { return ended_; }
  /// The server is stopping: this is the reply's last pull, its last chance to answer (a 503,
  /// say); what it does not complete is abandoned.
  [[nodiscard]] bool stopping() const { return stopping_; }
  void set_stopping() { stopping_ = true; }

 private:
  void status_and_headers(const httplib::Response& r);

  std::string& out_;
  bool keep_alive_;
  bool head_only_;
  bool begun_ = false;
  bool ended_ = false;
  bool stopping_ = false;
};

/// A reply made over time: a stream of Server-Sent Events, or a whole answer that waits on work
/// done elsewhere (a generation). The server pulls it on its event loop whenever the client has
/// taken what it was given, and holds no more than `reply_buffer_bytes` of it beyond one pull:
/// a slow reader leaves the rest with the source (back-pressure).
class reply_source {
 public:
  virtual ~reply_source() = default;

  /// Called once, before the first pull, with what asks the server to pull again: safe on any
  /// thread, at any time (after the connection or the server is gone it does nothing).
  virtual void attach(std::function<void()> wake) = 0;

  /// Writes what is ready (without waiting) through `out`: whole(), or begin() then pieces;
  /// true once the reply is complete (after whole() or end()). The server also pulls a source
  /// that has not woken it about once a second, so that it can keep its own deadlines.
  virtual bool pull(reply_writer& out) = 0;

  /// The connection ended before the reply was complete: the client went away or was cut off
  /// (too slow to read), or the server is stopping. No pull follows.
  virtual void abandoned() = 0;
};

}  // namespace troupe::http
