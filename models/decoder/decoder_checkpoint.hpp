#pragma once

// A GPT checkpoint's files in a form no layout owns, so that a run resumes at any dp x pp x tp:
// the weights under GPT-2's names (one file, or one per pipeline stage), and the AdamW moments
// as slices of each named parameter. Whichever ranks wrote them, a rank takes what its own
// layout and shard hold.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/decoder/decoder_layout.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"

namespace troupe::models {

/// The weights file of pipeline stage `stage` ("model-stage-<stage>.safetensors"), or of
/// tensor-parallel rank `tp` of it ("model-stage-<stage>-tp-<rank>.safetensors"); a run without
/// either writes "model.safetensors".
[[nodiscard]] std::string stage_model_file(int stage, tensor_parallel tp = {});

/// The model's tensors in checkpoint `c`: model.safetensors, or every stage file merged by name
/// (the last stage's copy of the tied embedding is the first's), tensor-parallel parts put
/// together into whole tensors. NOT_FOUND when there is none; DATA_LOSS when a part is missing.
[[nodiscard]] absl::StatusOr<tensor::named_tensors> checkpoint_model(
    const checkpoint::checkpoint& c);

/// The moments m and v of parameters [begin, end) of `layout`'s buffer (m[0] is element begin)
/// as slices of the named parameters they hold ("m:<name>:<first element>"), with `steps`.
[[nodiscard]] tensor::named_tensors moments_file(const decoder_layout& layout, int64_t begin,
                                                 int64_t end, const float* m, const float* v,
                                                 int64_t steps);
/// The same for the moments of several ranges, one after another in m and v (a ZeRO-3 rank's
/// chunks).
[[nodiscard]] tensor::named_tensors moments_file(const decoder_layout& layout,
                                                 const std::vector<param_range>& ranges,
                                                 const float* m, const float* v, int64_t steps);

/// Assembles every parameter's moments of `layout` into m and v ([layout.total()] each, padding
/// left as it is) from the moment files of a checkpoint, whatever layouts (stages, tensor-
/// parallel ranks, ZeRO shards) wrote them, through the whole model `whole` (every layer, no
/// tensor parallelism; files of the flat format, "m" and "v" over [begin, end) of the saving
/// run's buffer, are read against it). Returns the step count they record. DATA_LOSS when files
/// disagree on it, or a parameter's moments are not all there.
[[nodiscard]] absl::StatusOr<int64_t> read_moments(const std::vector<tensor::named_tensors>& files,
                                                   const decoder_layout& layout,
                                                   const decoder_layout& whole, float* m, float* v);

}  // namespace troupe::models
