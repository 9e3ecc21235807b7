#include "runtime/actor/status_bridge.hpp"

#include <cstdlib>
#include <memory>
#include <typeinfo>

#include <cxxabi.h>

#include "absl/strings/str_cat.h"

namespace troupe::actor {
namespace {

constexpr caf::atom_value troupe_category = caf::atom("troupe");

std::string context_text(const caf::error& error) {
  const caf::message& ctx = error.context();
  if (ctx.match_elements<std::string>()) return ctx.get_as<std::string>(0);
  return ctx.empty() ? std::string() : caf::to_string(ctx);
}

std::string type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type.name());
}

}  // namespace

caf::error to_error(const absl::Status& status) {
  if (status.ok()) return caf::error{};
  return caf::error(static_cast<uint8_t>(status.code()), troupe_category,
                    caf::make_message(std::string(status.message())));
}

absl::Status to_status(const caf::error& error) {
  if (!error) return absl::OkStatus();
  if (error.category() == troupe_category) {
    return absl::Status(static_cast<absl::StatusCode>(error.code()), context_text(error));
  }
  if (error.category() == caf::atom("system")) {
    const auto code = static_cast<caf::sec>(error.code());
    std::string text = caf::to_string(code);
    if (auto ctx = context_text(error); !ctx.empty()) absl::StrAppend(&text, ": ", ctx);
    switch (code) {
      case caf::sec::request_timeout:
        return absl::DeadlineExceededError(text);
      case caf::sec::request_receiver_down:
        return absl::UnavailableError(text);
      case caf::sec::unexpected_message:
      case caf::sec::unexpected_response:
        return absl::InvalidArgumentError(text);
      default:
        return absl::InternalError(text);
    }
  }
  if (error.category() == caf::atom("exit")) {
    return absl::AbortedError(absl::StrCat(
        "actor exited: ", caf::to_string(static_cast<caf::exit_reason>(error.code()))));
  }
  return absl::InternalError(caf::to_string(error));
}

void add_troupe_error_category(caf::actor_system_config& config) {
  config.add_error_category(troupe_category, [](uint8_t code, caf::atom_value,
                                                const caf::message& ctx) {
    const std::string text =
        ctx.match_elements<std::string>() ? ctx.get_as<std::string>(0) : caf::to_string(ctx);
    return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(code)), ": ", text);
  });
}

caf::error exception_to_error(std::exception_ptr& exception) {
  try {
    std::rethrow_exception(exception);
  } catch (const std::exception& e) {
    return to_error(absl::InternalError(
        absl::StrCat("unhandled exception (", type_name(typeid(e)), "): ", e.what())));
  } catch (...) {
    return to_error(absl::InternalError("unhandled exception of a non-std type"));
  }
}

}  // namespace troupe::actor
