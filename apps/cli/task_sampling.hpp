#pragma once

// What `troupe data preferences` and `troupe eval` share: a policy checkpoint's engine on an RLHF
// config's task, and its responses to the task's prompts, scored by the task's rule.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/inference_engine.hpp"
#include "apps/cli/data_task.hpp"

namespace troupe::cli {

/// The serving engine on a policy checkpoint, with the layout and weights it runs on.
struct task_policy {
  std::unique_ptr<models::decoder_layout> layout;
  std::vector<float> params;
  std::unique_ptr<actors::inference_engine> engine;
};

/// The policy at `policy` (a run or checkpoint directory; `setting` names it in errors) with the
/// task's model, its engine on this machine's cores.
[[nodiscard]] absl::StatusOr<task_policy> load_task_policy(const data_task& task,
                                                           const std::string& policy,
                                                           const std::string& setting);

/// One response: its text as data records it (task_codec::example_text) and the rule's score.
struct task_response {
  std::string text;
  double score = 0;
};

/// `samples` responses to each of `prompts` at `temperature` (0: greedy), response k of prompt p
/// sampled with its own stream from `seed`, each ended where `codec` ends a response or at the
/// task's longest response.
[[nodiscard]] absl::StatusOr<std::vector<std::vector<task_response>>> sample_responses(
    actors::inference_engine& engine, const tasks::text_task& task, const tasks::task_codec& codec,
    const std::vector<std::string>& prompts, int samples, double temperature, uint64_t seed);

/// Whether JSON can hold `text` (a policy may sample bytes that are not UTF-8).
[[nodiscard]] bool is_utf8(const std::string& text);

}  // namespace troupe::cli
