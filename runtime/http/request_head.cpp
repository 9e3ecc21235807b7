#include "runtime/http/request_head.hpp"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace troupe::http {
namespace {

constexpr auto npos = absl::string_view::npos;

// RFC 9110's token characters, which a method and a header name are made of.
bool is_token(absl::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) continue;
    if (absl::string_view("!#$%&'*+-.^_`|~").find(c) == npos) return false;
  }
  return true;
}

head_error bad(absl::string_view what) {
  return {400, absl::StrCat("malformed request: ", what)};
}

}  // namespace

head_scan scan_request_head(absl::string_view received, const http_limits& limits,
                            size_t* head_bytes) {
  const size_t line_end = received.find("\r\n");
  if ((line_end == npos ? received.size() : line_end) > limits.max_url_bytes) {
    return head_scan::url_too_long;
  }
  if (line_end == npos) return head_scan::incomplete;
  // Header lines one by one, all of them within max_header_bytes.
  for (size_t at = line_end + 2;;) {
    const size_t end = received.find("\r\n", at);
    if ((end == npos ? received.size() : end) > limits.max_header_bytes) {
      return head_scan::headers_too_large;
    }
    if (end == npos) return head_scan::incomplete;
    if (end == at) {  // the blank line that ends the head
      if (head_bytes != nullptr) *head_bytes = end + 2;
      return head_scan::complete;
    }
    at = end + 2;
  }
}

std::variant<request_head, head_error> parse_request_head(absl::string_view head,
                                                          const http_limits& limits) {
  request_head out;
  httplib::Request& req = out.request;
  const size_t line_end = head.find("\r\n");
  if (line_end == npos) return bad("no request line");
  const std::vector<absl::string_view> line = absl::StrSplit(head.substr(0, line_end), ' ');
  if (line.size() != 3 || !is_token(line[0]) || line[1].empty() || line[1][0] != '/') {
    return bad("the request line must be METHOD /path HTTP/1.1");
  }
  if (line[2] != "HTTP/1.1" && line[2] != "HTTP/1.0") {
    return head_error{505,
                      absl::StrCat("HTTP version '", line[2], "' is not served; use HTTP/1.1")};
  }
  req.method = std::string(line[0]);
  req.target = std::string(line[1]);
  req.version = std::string(line[2]);
  out.keep_alive = req.version == "HTTP/1.1";
  const size_t query = req.target.find('?');
  req.path = httplib::detail::decode_url(req.target.substr(0, query), false);
  if (query != std::string::npos)
    httplib::detail::parse_query_text(req.target.substr(query + 1), req.params);

  bool has_length = false;
  for (size_t at = line_end + 2; at < head.size();) {
    const size_t end = head.find("\r\n", at);
    if (end == npos || end == at) break;
    const absl::string_view header = head.substr(at, end - at);
    at = end + 2;
    const size_t colon = header.find(':');
    if (colon == npos || !is_token(header.substr(0, colon))) {
      return bad(absl::StrCat("header line '", header.substr(0, 64), "' is not 'Name: value'"));
    }
    const std::string name(header.substr(0, colon));
    const std::string value(absl::StripAsciiWhitespace(header.substr(colon + 1)));
    if (absl::EqualsIgnoreCase(name, "Content-Length")) {
      uint64_t n = 0;
      if (!absl::SimpleAtoi(value, &n) || !absl::ascii_isdigit(value.empty() ? 'x' : value[0]) ||
          (has_length && n != out.body_bytes)) {
        return bad(absl::StrCat("Content-Length '", value, "' is not one byte count"));
      }
      if (n > limits.max_body_bytes) {
        return head_error{413,
                          absl::StrCat("the request body is over ", limits.max_body_bytes, " bytes",
                                       limits.where("max_body_bytes")),
                          static_cast<size_t>(std::min<uint64_t>(n, SIZE_MAX))};
      }
      out.body_bytes = static_cast<size_t>(n);
      has_length = true;
    } else if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
      return head_error{411, absl::StrCat("a body sent with Transfer-Encoding '", value,
                                          "' is not taken; send it with a Content-Length")};
    } else if (absl::EqualsIgnoreCase(name, "Connection")) {
      for (absl::string_view option : absl::StrSplit(value, ',')) {
        option = absl::StripAsciiWhitespace(option);
        if (absl::EqualsIgnoreCase(option, "close")) out.keep_alive = false;
        if (absl::EqualsIgnoreCase(option, "keep-alive")) out.keep_alive = true;
      }
    } else if (absl::EqualsIgnoreCase(name, "Expect")) {
      if (!absl::EqualsIgnoreCase(value, "100-continue")) {
        return head_error{417, absl::StrCat("Expect: '", value, "' cannot be met")};
      }
      out.expects_continue = true;
    }
    req.headers.emplace(name, value);
  }
  return out;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace troupe::http
