#include "runtime/run/event_log.hpp"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace troupe::run {

const char* to_string(severity level) {
  switch (level) {
    case severity::debug:
      return "debug";
    case severity::info:
      return "info";
    case severity::warning:
      return "warning";
    case severity::error:
      return "error";
  }
  return "info";
}

event_log::event_log() : start_(std::chrono::steady_clock::now()) {}

event_log::~event_log() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::StatusOr<std::unique_ptr<event_log>> event_log::open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot create the event log: ", std::strerror(errno)));
  }
  auto log = std::make_unique<event_log>();
  log->file_ = f;
  return log;
}

void event_log::emit(severity level, absl::string_view type, absl::string_view message,
                     nlohmann::json fields) {
  nlohmann::json event = {{"t", elapsed_seconds()},
                          {"event", type},
                          {"severity", to_string(level)},
                          {"message", message}};
  event.update(fields);
  std::lock_guard<std::mutex> lock(mu_);
  write(event);
}

void event_log::write(const nlohmann::json& event) {
  if (file_ != nullptr) {
    const std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::fwrite(line.data(), 1, line.size(), file_);
    std::fputc('\n', file_);
    std::fflush(file_);
  }
  for (const auto& fn : listeners_)
    fn(event);
}

void event_log::forward(nlohmann::json event) {
  event["t"] = elapsed_seconds();
  std::lock_guard<std::mutex> lock(mu_);
  write(event);
}

void event_log::add_listener(listener fn) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.push_back(std::move(fn));
}

double event_log::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace troupe::run
