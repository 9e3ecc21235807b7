#include "runtime/http/reply_source.hpp"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/http/request_head.hpp"

namespace troupe::http {

void reply_writer::status_and_headers(const httplib::Response& r) {
  const int status = r.status < 0 ? 200 : r.status;
  absl::StrAppend(&out_, "HTTP/1.1 ", status, " ", reason_phrase(status), "\r\n");
  for (const auto& [name, value] : r.headers) {
    // The framing headers are the writer's own.
    if (absl::EqualsIgnoreCase(name, "Content-Length") ||
        absl::EqualsIgnoreCase(name, "Transfer-Encoding") ||
        absl::EqualsIgnoreCase(name, "Connection")) {
      continue;
    }
    absl::StrAppend(&out_, name, ": ", value, "\r\n");
  }
  absl::StrAppend(&out_, "Connection: ", keep_alive_ ? "keep-alive" : "close", "\r\n");
}

void reply_writer::whole(const httplib::Response& response) {
  status_and_headers(response);
  absl::StrAppend(&out_, "Content-Length: ", response.body.size(), "\r\n\r\n");
  if (!head_only_) out_ += response.body;
  begun_ = ended_ = true;
}

void reply_writer::begin(const httplib::Response& head) {
  status_and_headers(head);
  out_ += head_only_ ? "\r\n" : "Transfer-Encoding: chunked\r\n\r\n";
  begun_ = true;
}

void reply_writer::write(absl::string_view bytes) {
  if (bytes.empty() || head_only_) return;
  absl::StrAppend(&out_, absl::Hex(bytes.size()), "\r\n", bytes, "\r\n");
}

void reply_writer::end() {
  if (!head_only_) out_ += "0\r\n\r\n";
  ended_ = true;
}

}  // namespace troupe::http
