#include "models/gpt/gpt_config.hpp"

#include "absl/strings/str_cat.h"

namespace troupe::models {

absl::Status gpt_config::validate() const {
  if (vocab < 2 || ctx < 1 || layers < 1 || dim < 1 || heads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: vocab (", vocab, "), ctx (", ctx, "), layers (", layers, "), dim (",
                     dim, ") and heads (", heads, ") must be positive and vocab at least 2"));
  }
  if (dim % heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: heads (", heads, ") must divide dim (", dim, ")"));
  }
  return absl::OkStatus();
}

}  // namespace troupe::models
