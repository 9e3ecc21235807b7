#include "apps/cli/progress_display.hpp"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe::cli {
namespace {

std::string human(double v) {
  if (v >= 1e6) return absl::StrFormat("%.1fM", v / 1e6);
  if (v >= 1e4) return absl::StrFormat("%.1fk", v / 1e3);
  return absl::StrFormat("%.0f", v);
}

}  // namespace

std::string eta(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s / 60 % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::string render_bar(double done, double total, absl::string_view unit, double rate, int width) {
  std::string text;
  if (total > 0) {
    const double fraction = std::min(1.0, done / total);
    if (width > 0) {
      const int filled = static_cast<int>(fraction * width);
      absl::StrAppend(&text, "[", std::string(filled, '#'), std::string(width - filled, '-'), "] ");
    }
    absl::StrAppend(&text, absl::StrFormat("%3.0f%% ", fraction * 100), human(done), "/",
                    human(total), " ", unit);
  } else {
    absl::StrAppend(&text, human(done), " ", unit);
  }
  if (rate > 0) absl::StrAppend(&text, "  ", human(rate), " ", unit, "/s");
  if (rate > 0 && total > done) absl::StrAppend(&text, "  ETA ", eta((total - done) / rate));
  return text;
}

void progress_display::clear_bar() {
  if (bar_visible_) std::fputs("\r\033[K", out_);
  bar_visible_ = false;
}

void progress_display::show_progress(const nlohmann::json& event) {
  const double t = event.value("t", 0.0);
  const double done = event.value("done", 0.0);
  const double total = event.value("total", -1.0);
  const std::string unit = event.value("unit", std::string("items"));
  if (rate_t0_ < 0) {
    rate_t0_ = t;
    rate_done0_ = done;
  }
  const double rate = t > rate_t0_ ? (done - rate_done0_) / (t - rate_t0_) : 0;
  // The app's own figures (a trainer's loss and tokens/s) follow the bar.
  const std::string detail = event.value("detail", std::string());
  const std::string suffix = detail.empty() ? "" : "  " + detail;
  if (live_) {
    last_bar_ = render_bar(done, total, unit, rate, 30) + suffix;
    std::fputs("\r\033[K", out_);
    std::fputs(last_bar_.c_str(), out_);
    bar_visible_ = true;
  } else if (t - last_plain_t_ >= 5 || (total > 0 && done >= total)) {
    last_plain_t_ = t;
    std::fprintf(out_, "[%7.1fs] progress: %s%s\n", t,
                 render_bar(done, total, unit, rate, 0).c_str(), suffix.c_str());
  }
  std::fflush(out_);
}

void progress_display::on_event(const nlohmann::json& event) {
  const std::string type = event.value("event", std::string());
  if (type == "progress") return show_progress(event);
  const std::string level = event.value("severity", std::string("info"));
  if (level == "debug") return;
  clear_bar();
  std::fprintf(out_, "[%7.1fs] %s%s\n", event.value("t", 0.0),
               level == "info" ? "" : (level + ": ").c_str(),
               event.value("message", std::string()).c_str());
  if (live_ && !last_bar_.empty()) {
    std::fputs(last_bar_.c_str(), out_);
    bar_visible_ = true;
  }
  std::fflush(out_);
}

void progress_display::finish() {
  clear_bar();
  std::fflush(out_);
}

}  // namespace troupe::cli
