#include "actors/learned_reward.hpp"

#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "models/decoder/decoder_source.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {
namespace {

constexpr int rows_per_pass = 64;

}  // namespace

learned_reward::learned_reward(const models::decoder_config& model, reward_sequence sequence,
                               int threads)
    : model_(model),
      sequence_(std::move(sequence)),
      layout_(std::make_unique<models::decoder_layout>(model, models::layer_range::all(model),
                                                       models::decoder_head::value)),
      forward_(std::make_unique<models::decoder_cpu_batch>(*layout_, rows_per_pass, threads)) {}

absl::StatusOr<std::unique_ptr<learned_reward>> learned_reward::load(
    const models::decoder_config& model, const std::string& checkpoint, const std::string& setting,
    reward_sequence sequence, int threads) {
  std::unique_ptr<learned_reward> r(new learned_reward(model, std::move(sequence), threads));
  absl::StatusOr<std::vector<float>> params =
      models::read_decoder_weights(*r->layout_, checkpoint, setting);
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
      const absl::StatusOr<std::vector<int32_t>> sequence =
          sequence_(request.prompts[i], request.responses[i], request.ended[i] != 0);
      const auto named = [&] {
        return absl::StrCat("reward model: sequence ", i, " (prompt \"",
                            absl::CHexEscape(request.prompts[i]), "\", response \"",
                            absl::CHexEscape(request.responses[i]), "\")");
      };
      if (!sequence.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(named(), ": ", sequence.status().message()));
      }
      if (sequence->empty() || static_cast<int>(sequence->size()) > ctx) {
        return absl::InvalidArgumentError(absl::StrCat(named(), " is ", sequence->size(),
                                                       " tokens; it scores 1 to model.ctx = ", ctx,
                                                       " tokens"));
      }
      absl::c_copy(*sequence, tokens.begin() + static_cast<ptrdiff_t>(row) * ctx);
      last[row] = static_cast<int>(sequence->size()) - 1;
    }
    values.resize(tokens.size());
    forward_->values(params_.data(), rows, ctx, tokens.data(), values.data());
    for (int row = 0; row < rows; ++row)
      scores[first + row] = values[static_cast<size_t>(row) * ctx + last[row]];
  }
  return scores;
}

}  // namespace troupe::actors
