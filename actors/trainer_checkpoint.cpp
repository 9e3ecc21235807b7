#include "actors/trainer.hpp"

// The trainer's checkpoints: the files a rank writes (its weights, the moments of its shard as
// slices of named parameters) and the restore from whichever layout and ranks wrote them. The
// step itself is in trainer.cpp.

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/decoder/decoder_checkpoint.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {

tensor::named_tensors trainer::optimizer_state() const {
  return models::moments_file(layout_, optimizer_->ranges(), optimizer_->first_moment().data(),
                              optimizer_->second_moment().data(), optimizer_->steps());
}

absl::Status trainer::restore(const tensor::named_tensors& weights,
                              const std::vector<tensor::named_tensors>& optimizer_states) {
  TROUPE_RETURN_IF_ERROR(tensor::zero(params_));
  TROUPE_RETURN_IF_ERROR(layout_.from_named(weights, params_.data<float>()));
  // Reassemble the moments of every parameter of this layout from the saved slices (whichever
  // layout and ranks wrote them), then take this rank's.
  const int64_t padded = shard_ * ranks_;
  std::vector<float> m(std::max<int64_t>(padded, layout_.total()), 0.0f), v(m.size(), 0.0f);
  const models::decoder_layout whole(layout_.config(), models::layer_range::all(layout_.config()),
                                     layout_.head());
  TROUPE_ASSIGN_OR_RETURN(const int64_t steps, models::read_moments(optimizer_states, layout_,
                                                                    whole, m.data(), v.data()));
  int64_t at = 0;
  for (const models::param_range& r : optimizer_->ranges()) {
    const int64_t n = r.end - r.begin;
    std::memcpy(optimizer_->first_moment().data() + at, m.data() + r.begin, n * sizeof(float));
    std::memcpy(optimizer_->second_moment().data() + at, v.data() + r.begin, n * sizeof(float));
    at += n;
  }
  if (zero3_) zero3_->release_all();  // the weights were written whole: keep this rank's chunks
  if (replica_.defined()) {           // the next rank's shard, as that rank restores it
    float* r = replica_.data<float>();
    std::memcpy(r, m.data() + replica_begin_, shard_ * sizeof(float));
    std::memcpy(r + shard_, v.data() + replica_begin_, shard_ * sizeof(float));
  }
  optimizer_->set_steps(steps);
  undo_.armed = false;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, tensor::named_tensors>>>
trainer::checkpoint_files() {
  std::vector<std::pair<std::string, tensor::named_tensors>> files;
  if (zero3_) {
    // The whole model gathered for rank 0 to write, then handed back (as FSDP's full state
    // dict); each rank writes the moments of its chunks.
    const absl::Status gathered = zero3_->gather_all();
    if (gathered.ok() && rank_ == 0) {
      files.emplace_back("model.safetensors", layout_.to_named(params_.data<float>()));
    }
    zero3_->release_all();
    TROUPE_RETURN_IF_ERROR(gathered);
    files.emplace_back(absl::StrCat("optimizer-", rank_, ".safetensors"), optimizer_state());
    return files;
  }
  // A pipeline's stages and tensor-parallel ranks each write their own weights, under names no
  // other writes.
  const models::tensor_parallel tp = layout_.tp();
  const std::string stage = pipeline_
                                ? absl::StrCat(options_.pipeline.stage, "-",
                                               tp.size > 1 ? absl::StrCat("tp", tp.rank, "-") : "")
                                : "";
  if (rank_ == 0) {
    files.emplace_back(pipeline_ ? models::stage_model_file(options_.pipeline.stage, tp)
                                 : std::string("model.safetensors"),
                       layout_.to_named(params_.data<float>()));
  }
  if (rank_ == 0 || options_.zero != zero_stage::none) {
    files.emplace_back(absl::StrCat("optimizer-", stage, rank_, ".safetensors"), optimizer_state());
  }
  return files;
}

absl::Status trainer::load_weights(const tensor::named_tensors& weights,
                                   const std::string& origin) {
  // A critic starting from a policy's checkpoint keeps the value head it was initialised with.
  const bool trunk_only = layout_.has_value_head() && !weights.get("classifier.weight").ok();
  if (!trunk_only) TROUPE_RETURN_IF_ERROR(tensor::zero(params_));
  float* params = params_.data<float>();
  absl::Status s =
      trunk_only ? layout_.trunk_from_named(weights, params) : layout_.from_named(weights, params);
  if (zero3_) zero3_->release_all();
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(origin, ": ", s.message()));
  return absl::OkStatus();
}

tensor::tensor trainer::weights() const {
  absl::StatusOr<tensor::tensor> view = params_.narrow(0, 0, layout_.total());
  TROUPE_CHECK(view.ok());  // the buffer is padded past total()
  return *std::move(view);
}

absl::Status trainer::restore(const checkpoint::checkpoint& saved) {
  absl::StatusOr<tensor::named_tensors> weights = models::checkpoint_model(saved);
  if (!weights.ok()) return absl::DataLossError(weights.status().message());
  std::vector<tensor::named_tensors> states;
  for (const auto& [name, contents] : saved.files) {
    if (absl::StartsWith(name, "optimizer-")) states.push_back(contents);
  }
  if (absl::Status s = restore(*weights, states); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(saved.dir, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace troupe::actors
