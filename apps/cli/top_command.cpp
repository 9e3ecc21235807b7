// troupe top: the head's picture of the job in a terminal, redrawn every second.

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "apps/cli/top_view.hpp"
#include "httplib.h"

namespace troupe::cli {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> stop_top{false};

// The head's URL: --head, else the run directory's head_http_url (the given one, or the newest
// under ./runs).
absl::StatusOr<std::string> head_url(const top_args& args) {
  if (!args.head.empty()) {
    return absl::StartsWith(args.head, "http://") || absl::StartsWith(args.head, "https://")
               ? args.head
               : absl::StrCat("http://", args.head);
  }
  fs::path file;
  if (!args.run_dir.empty()) {
    file = fs::path(args.run_dir) / "head_http_url";
  } else {
    std::error_code ec;
    fs::file_time_type newest{};
    for (const auto& dir : fs::directory_iterator("runs", ec)) {
      const fs::path candidate = dir.path() / "head_http_url";
      if (!fs::exists(candidate, ec)) continue;
      const auto written = fs::last_write_time(candidate, ec);
      if (file.empty() || written > newest) {
        file = candidate;
        newest = written;
      }
    }
  }
  std::string url;
  if (file.empty() || !std::getline(std::ifstream(file), url) || url.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no head to watch", file.empty() ? "" : absl::StrCat(" (", file.string(), " is missing)"),
        ": give --head URL (a job prints it: 'dashboard and /metrics at URL') or the job's run "
        "directory"));
  }
  return url;
}

// GET `path` as JSON.
absl::StatusOr<nlohmann::json> get_json(httplib::Client& head, const std::string& url,
                                        const std::string& path) {
  auto r = head.Get(path);
  if (!r) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach the head at ", url, ": ", httplib::to_string(r.error())));
  }
  if (r->status == 401) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the head at ", url, " wants its bearer token: --token, or TROUPE_HTTP_TOKEN"));
  }
  if (r->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("the head at ", url, " answered ", path, " with ", r->status, ": ", r->body));
  }
  auto parsed = nlohmann::json::parse(r->body, nullptr, false);
  if (parsed.is_discarded()) {
    return absl::DataLossError(absl::StrCat("the head's ", path, " is not JSON"));
  }
  return parsed;
}

absl::StatusOr<top_snapshot> fetch(httplib::Client& head, const std::string& url) {
  top_snapshot s;
  auto status = get_json(head, url, "/api/status");
  if (!status.ok()) return status.status();
  s.status = std::move(*status);
  const auto series = [&](const std::string& name) {
    return get_json(head, url, "/api/series?points=6&name=" + name);
  };
  auto messages = series("troupe_actor_messages_total");
  auto mailbox = series("troupe_actor_mailbox_depth");
  auto age = series("troupe_actor_handler_age_seconds");
  auto stuck = series("troupe_actor_stuck");
  for (const auto* answer : {&messages, &mailbox, &age, &stuck})
    if (!answer->ok()) return answer->status();
  s.actors = top_actor_rows(*messages, *mailbox, *age, *stuck);
  for (const std::string& name : top_figure_families()) {
    auto figure = series(name);
    if (!figure.ok()) return figure.status();
    for (const auto& one : figure->value("series", nlohmann::json::array())) {
      const auto& points = one["points"];
      if (!points.empty() && points.back()[1].is_number()) {
        s.figures.emplace_back(name, points.back()[1].get<double>());
        break;
      }
    }
  }
  return s;
}

// The terminal in non-canonical mode without echo while `top` runs, so that `q` arrives at
// once; restored on the way out.
class raw_terminal {
 public:
  raw_terminal() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~raw_terminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }

  // Waits up to `ms` for a key; true if it was `q`.
  [[nodiscard]] bool quit_pressed(int ms) const {
    if (!active_) {
      for (int waited = 0; waited < ms && !stop_top.load(); waited += 100)
        usleep(100'000);
      return false;
    }
    pollfd in{STDIN_FILENO, POLLIN, 0};
    char key = 0;
    return poll(&in, 1, ms) > 0 && read(STDIN_FILENO, &key, 1) == 1 && (key == 'q' || key == 'Q');
  }

 private:
  termios saved_{};
  bool active_ = false;
};

}  // namespace

int top_command(const top_args& args) {
  auto url = head_url(args);
  if (!url.ok()) {
    std::fprintf(stderr, "troupe top: %s\n", std::string(url.status().message()).c_str());
    return exit_usage_error;
  }
  httplib::Client head(*url);
  head.set_connection_timeout(5, 0);
  head.set_read_timeout(5, 0);
  std::string token = args.token;
  if (token.empty() && std::getenv("TROUPE_HTTP_TOKEN") != nullptr) {
    token = std::getenv("TROUPE_HTTP_TOKEN");
  }
  if (!token.empty()) head.set_bearer_token_auth(token);
  const char* term = std::getenv("TERM");
  const bool redraw =
      isatty(STDOUT_FILENO) && term != nullptr && std::string(term) != "dumb" && !args.once;
  std::signal(SIGINT, [](int) { stop_top = true; });
  std::signal(SIGTERM, [](int) { stop_top = true; });
  raw_terminal terminal;
  while (!stop_top.load()) {
    auto snapshot = fetch(head, *url);
    if (!snapshot.ok()) {
      std::fprintf(stderr, "troupe top: %s\n", std::string(snapshot.status().message()).c_str());
      return exit_runtime_failure;
    }
    const std::string picture = render_top(*snapshot);
    std::printf("%s%s", redraw ? "\x1b[H\x1b[2J" : "", picture.c_str());
    if (redraw) std::printf("\n(q quits)");
    std::fflush(stdout);
    if (args.once) return exit_ok;
    if (!redraw) std::printf("\n");
    if (terminal.quit_pressed(1000)) break;
  }
  if (redraw) std::printf("\n");
  return exit_ok;
}

}  // namespace troupe::cli
