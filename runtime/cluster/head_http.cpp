#include "runtime/cluster/head_http.hpp"

#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/cluster/dashboard_html.hpp"

namespace troupe::cluster {
namespace {

using namespace std::chrono_literals;

std::string error_json(absl::string_view message) {
  return nlohmann::json{{"error", message}}.dump();
}

// The run's events after `after` as Server-Sent Events: live (woken by the feed, with a comment
// at every idle pull so that a closed connection is found), or only those kept.
class event_stream : public http::reply_source {
 public:
  event_stream(std::shared_ptr<run::event_feed> feed, uint64_t after, bool follow)
      : feed_(std::move(feed)), after_(after), follow_(follow) {}

  void attach(std::function<void()> wake) override {
    wake_ = std::make_shared<const std::function<void()>>(std::move(wake));
    if (follow_) feed_->watch(wake_);
  }
  bool pull(http::reply_writer& out) override {
    if (!out.begun()) {
      httplib::Response head;
      head.set_header("Content-Type", "text/event-stream");
      head.set_header("Cache-Control", "no-cache");
      out.begin(head);
    }
    std::string chunk;
    for (const auto& e : feed_->after(after_)) {
      absl::StrAppend(&chunk, "id: ", e.id, "\ndata: ", e.json, "\n\n");
      after_ = e.id;
    }
    if (chunk.empty() && follow_) chunk = ": waiting\n\n";
    out.write(chunk);
    return !follow_;
  }
  void abandoned() override {}

 private:
  std::shared_ptr<run::event_feed> feed_;
  uint64_t after_;
  bool follow_;
  std::shared_ptr<const std::function<void()>> wake_;  // watched by the feed while it lives
};

}  // namespace

absl::StatusOr<std::unique_ptr<head_http>> head_http::start(settings s, const head_view& view,
                                                            const metrics::series_history& history,
                                                            run::event_log& events) {
  std::unique_ptr<head_http> h(new head_http(std::move(s), view, history));
  events.add_listener([feed = h->feed_](const nlohmann::json& e) { feed->add(e); });
  h->install_routes();
  auto port = h->server_->start(h->settings_.host, h->settings_.port);
  if (!port.ok()) {
    return absl::Status(port.status().code(),
                        absl::StrCat("cluster.http: ", port.status().message()));
  }
  h->settings_.port = *port;
  return h;
}

head_http::head_http(settings s, const head_view& view, const metrics::series_history& history)
    : settings_(std::move(s)),
      view_(view),
      history_(history),
      server_(std::make_unique<http::http_server>(
          settings_.limits, [](int, const std::string& message) { return error_json(message); })) {}

head_http::~head_http() {
  server_.reset();  // stops serving and joins its threads
}

std::string head_http::url() const {
  return absl::StrCat("http://", settings_.host, ":", settings_.port);
}

void head_http::install_routes() {
  auto& server = *server_;
  server.set_pre_routing([this](const httplib::Request& req, httplib::Response& res) {
    // The header, or (for a browser's page and its event stream, which cannot set headers)
    // RFC 6750's access_token query parameter.
    // /health answers without one: it is what probes and load balancers ask, and says nothing.
    if (settings_.token.empty() || req.path == "/health" ||
        req.get_header_value("Authorization") == absl::StrCat("Bearer ", settings_.token) ||
        req.get_param_value("access_token") == settings_.token) {
      return false;
    }
    res.status = 401;
    res.set_content(error_json("missing or wrong bearer token (Authorization: Bearer ...)"),
                    "application/json");
    return true;
  });
  server.route("GET", "/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  server.route("GET", "/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(view_.metrics().text, "text/plain; version=0.0.4; charset=utf-8");
  });
  server.route("GET", "/api/status", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(view_.status().dump(), "application/json");
  });
  server.route("GET", "/api/series", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.get_param_value("name");
    if (name.empty()) {
      res.status = 400;
      res.set_content(nlohmann::json{{"error", "name the metric: /api/series?name=FAMILY"},
                                     {"families", history_.families()}}
                          .dump(),
                      "application/json");
      return;
    }
    size_t points = 0;  // all kept
    if (const std::string n = req.get_param_value("points");
        !n.empty() && !absl::SimpleAtoi(n, &points)) {
      res.status = 400;
      res.set_content(error_json(absl::StrCat("points: '", n, "' is not a count")),
                      "application/json");
      return;
    }
    res.set_content(history_.of(name, points).dump(), "application/json");
  });
  server.route_deferred(
      "GET", "/api/events",
      [this](const httplib::Request& req,
             httplib::Response& res) -> std::shared_ptr<http::reply_source> {
        uint64_t after = 0;
        const std::string from = req.has_header("Last-Event-ID")
                                     ? req.get_header_value("Last-Event-ID")
                                     : req.get_param_value("after");
        if (!from.empty() && !absl::SimpleAtoi(from, &after)) {
          res.status = 400;
          res.set_content(error_json(absl::StrCat("after: '", from, "' is not an event number")),
                          "application/json");
          return nullptr;
        }
        return std::make_shared<event_stream>(feed_, after, req.get_param_value("follow") != "0");
      });
  server.route("GET", "/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(dashboard_html, "text/html; charset=utf-8");
  });
  server.set_not_found([](const httplib::Request& req, httplib::Response& res) {
    res.set_content(error_json(absl::StrCat("no ", req.path,
                                            " here: / (the dashboard), /metrics, /api/status, "
                                            "/api/events, /api/series?name=F")),
                    "application/json");
  });
}

absl::StatusOr<std::unique_ptr<head_http>> start_head_http(const config::cluster_spec& spec,
                                                           const head_server& head,
                                                           run::event_log& events,
                                                           const std::string& run_dir) {
  if (spec.http == "off") return nullptr;
  const auto address = config::parse_host_port(spec.http);
  if (!address) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster.http: '", spec.http, "' is not HOST:PORT (port 0 picks a free one) or off"));
  }
  auto http =
      head_http::start({.host = address->first, .port = address->second, .token = spec.http_token},
                       head.view(), head.history(), events);
  if (!http.ok()) return http.status();
  const std::string url = (*http)->url();
  if (!run_dir.empty()) {
    std::ofstream(std::filesystem::path(run_dir) / "head_http_url") << url << "\n";
  }
  events.emit(run::severity::info, "head_http", absl::StrCat("dashboard and /metrics at ", url),
              {{"url", url}});
  return http;
}

}  // namespace troupe::cluster
