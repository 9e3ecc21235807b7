#include "actors/learned_reward.hpp"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "models/gpt/gpt_source.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {
namespace {

constexpr int rows_per_pass = 64;

}  // namespace

learned_reward::learned_reward(const models::gpt_config& model, std::string end_string, int threads)
    : model_(model),
      end_string_(std::move(end_string)),
      layout_(std::make_unique<models::gpt_layout>(model, models::layer_range::all(model),
                                                   models::gpt_head::value)),
      forward_(std::make_unique<models::gpt_cpu_batch>(*layout_, rows_per_pass, threads)) {}

absl::StatusOr<std::unique_ptr<learned_reward>> learned_reward::load(
    const models::gpt_config& model, const std::string& checkpoint, const std::string& setting,
    std::string end_string, int threads) {
  std::unique_ptr<learned_reward> r(new learned_reward(model, std::move(end_string), threads));
  absl::StatusOr<std::vector<float>> params =
      models::read_gpt_weights(*r->layout_, checkpoint, setting);
  if (!params.ok()) {
    return absl::Status(
        params.status().code(),
        absl::StrCat(setting, " ", checkpoint, ": ", params.status().message(),
                     "; the reward role needs a reward model's checkpoint (app: reward_model), "
                     "with its scalar head"));
  }
  r->params_ = *std::move(params);
  return r;
}

absl::StatusOr<std::vector<double>> learned_reward::score(const actor::reward_request& request) {
  const size_t n = request.prompts.size();
  if (request.responses.size() != n || request.ended.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward request: ", n, " prompts, ", request.responses.size(),
                     " responses and ", request.ended.size(), " end flags; they must pair up"));
  }
  const int ctx = model_.ctx;
  std::vector<double> scores(n);
  std::vector<int32_t> tokens;
  std::vector<float> values;
  std::vector<int> last;
  for (size_t first = 0; first < n; first += rows_per_pass) {
    const int rows = static_cast<int>(std::min<size_t>(rows_per_pass, n - first));
    tokens.assign(static_cast<size_t>(rows) * ctx, 0);
    last.assign(rows, 0);
    for (int row = 0; row < rows; ++row) {
      const size_t i = first + row;
      const std::string text = absl::StrCat(request.prompts[i], request.responses[i],
                                            request.ended[i] != 0 ? end_string_ : "");
      if (text.empty() || static_cast<int>(text.size()) > ctx) {
        return absl::InvalidArgumentError(
            absl::StrCat("reward model: sequence ", i, " (\"", absl::CHexEscape(text), "\") is ",
                         text.size(), " bytes; it scores 1 to model.ctx = ", ctx, " bytes"));
      }
      for (size_t t = 0; t < text.size(); ++t)
        tokens[static_cast<size_t>(row) * ctx + t] = static_cast<uint8_t>(text[t]);
      last[row] = static_cast<int>(text.size()) - 1;
    }
    values.resize(tokens.size());
    forward_->values(params_.data(), rows, ctx, tokens.data(), values.data());
    for (int row = 0; row < rows; ++row)
      scores[first + row] = values[static_cast<size_t>(row) * ctx + last[row]];
  }
  return scores;
}

}  // namespace troupe::actors
