#pragma once

// Status helpers used on every fallible path (DESIGN.md "Errors and style").

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TROUPE_STATUS_CONCAT_INNER_(a, b) a##b
#define TROUPE_STATUS_CONCAT_(a, b) TROUPE_STATUS_CONCAT_INNER_(a, b)

/// Returns from the enclosing function when `expr` yields a non-OK status.
#define TROUPE_RETURN_IF_ERROR(expr)                                  \
  do {                                                                \
    if (absl::Status troupe_status_ = (expr); !troupe_status_.ok()) { \
      return troupe_status_;                                          \
    }                                                                 \
  } while (false)

/// Evaluates `rexpr` (a StatusOr), returns its error, or moves its value into `lhs`.
#define TROUPE_ASSIGN_OR_RETURN(lhs, rexpr) \
  TROUPE_ASSIGN_OR_RETURN_IMPL_(TROUPE_STATUS_CONCAT_(troupe_statusor_, __LINE__), lhs, rexpr)

#define TROUPE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.ok()) {                                     \
    return std::move(tmp).status();                    \
  }                                                    \
  lhs = std::move(tmp).value()

/// Aborts on a programmer error (a broken invariant), never on bad input.
#define TROUPE_CHECK(cond)                                                                 \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: TROUPE_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (false)
