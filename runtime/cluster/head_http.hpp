#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/cluster/head_server.hpp"
#include "runtime/config/app_spec.hpp"
#include "runtime/http/http_server.hpp"
#include "runtime/run/event_feed.hpp"
#include "runtime/run/event_log.hpp"

namespace troupe::cluster {

/// The head's HTTP endpoints (`cluster.http`), for Prometheus, the dashboard and `troupe top`:
///
///   GET /metrics            the whole cluster's metrics (head_view::metrics), Prometheus text
///   GET /api/status         what `troupe status --json` prints
///   GET /api/events         the run's events as Server-Sent Events, live (`?after=N` or a
///                           Last-Event-ID header resumes; `?follow=0` ends after those kept)
///   GET /api/series?name=F  the recent history of metric family F (series_history::of)
///   GET /                   the dashboard
///
/// With a token, every request must carry `Authorization: Bearer TOKEN`, or `access_token=TOKEN`
/// in its query (RFC 6750; the dashboard passes its own on to what it fetches).
class head_http {
 public:
  struct settings {
    std::string host = "127.0.0.1";
    int port = 0;  ///< 0 picks a free one
    std::string token;
    http::http_limits limits;
  };

  /// Listens on `s.host:s.port` and serves `view`, `history` and `events` from now on (a
  /// head_server's, or a test's). `view` and `history` must outlive the returned server.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<head_http>> start(
      settings s, const head_view& view, const metrics::series_history& history,
      run::event_log& events);
  ~head_http();

  /// "http://HOST:PORT".
  [[nodiscard]] std::string url() const;

 private:
  head_http(settings s, const head_view& view, const metrics::series_history& history);
  void install_routes();

  settings settings_;
  const head_view& view_;
  const metrics::series_history& history_;
  std::shared_ptr<run::event_feed> feed_ = std::make_shared<run::event_feed>();
  std::unique_ptr<http::http_server> server_;
};

/// Starts the head's HTTP endpoints where `spec` says (`cluster.http`, `cluster.http_token`),
/// or none (null) with "off". The URL goes to the event log (a `head_http` event) and, with a
/// run directory, into RUN_DIR/head_http_url.
[[nodiscard]] absl::StatusOr<std::unique_ptr<head_http>> start_head_http(
    const config::cluster_spec& spec, const head_server& head, run::event_log& events,
    const std::string& run_dir);

}  // namespace troupe::cluster
