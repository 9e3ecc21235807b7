#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "models/decoder/decoder_cpu_stage.hpp"
#include "models/decoder/decoder_layout.hpp"
#include "runtime/comm/collective_queue.hpp"
#include "runtime/comm/communicator.hpp"
#include "runtime/tensor/tensor.hpp"

namespace troupe::actors {

/// ZeRO-3 for one data-parallel rank, without CAF: the parameters and gradients sharded over
/// the group as FSDP and DeepSpeed stage 3 shard them. The units are the blocks and the
/// parameters outside them (the embeddings; the final norm and head); each is cut into `ranks`
/// equal chunks (the last one padded), rank r holding chunk r of every unit.
///
/// The buffers keep decoder_layout's offsets but are reserved address space
/// (tensor::reserved_host_allocator): this rank's chunks are always there, the rest of a unit
/// only while it is gathered, its pages handed back after.
/// - A block is all-gathered before its forward and again before its backward, and released
///   after each; the next block's gather runs on the communication thread while this one
///   computes (prefetch). The last block stays from its forward to its backward.
/// - The parameters outside the blocks, which both ends of a pass use, are gathered by
///   begin_step() and held until end_step(), as FSDP holds its root unit.
/// - The model adds each pass's gradients into local(); a block's are reduce-scattered right
///   after its backward, the rest by end_step(), and each rank adds its chunks' sums into
///   grads(), where its optimizer finds them.
/// - A unit that splits evenly over the ranks (a block of the usual shapes) is gathered straight
///   into place and reduce-scattered in place; another goes through padded staging buffers.
class zero3_parameters {
 public:
  /// INVALID_ARGUMENT for a tensor-parallel layout; RESOURCE_EXHAUSTED when the address space
  /// cannot be reserved.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<zero3_parameters>> create(
      const models::decoder_layout& layout, comm::communicator& group);

  /// The parameters (layout.total() floats): every element written here stays until released.
  [[nodiscard]] const tensor::tensor& params() const { return params_; }
  /// The summed gradients, over this rank's chunks (the rest is not there).
  [[nodiscard]] const tensor::tensor& grads() const { return grads_; }
  /// Where the model adds a pass's gradients.
  [[nodiscard]] float* local() const { return local_.data<float>(); }
  /// This rank's chunks of the units, in buffer order, empty ones left out: where its optimizer
  /// state and summed gradients are.
  [[nodiscard]] const std::vector<models::param_range>& owned() const { return owned_; }

  /// Before a step's `passes` forward and backward passes (gradients) or an evaluation's
  /// forward passes: zeroes this rank's summed gradients and gathers the parameters outside the
  /// blocks.
  [[nodiscard]] absl::Status begin_step(bool gradients, int passes);
  /// What a stage calls around each block (decoder_cpu_stage::block_hooks).
  [[nodiscard]] models::decoder_cpu_stage::block_hooks hooks();
  /// The gathers of a forward pass, computing nothing: an evaluation's rank without a batch
  /// takes part in the others' gathers.
  void gather_pass();
  /// After the passes: the rest of the gradients reduce-scattered (gradients), everything
  /// waited for, every unit but this rank's chunks released. The first failure of the step.
  [[nodiscard]] absl::Status end_step(bool gradients);

  /// Every parameter gathered (a checkpoint of the whole model), until release_all().
  [[nodiscard]] absl::Status gather_all();
  /// Hands back every page of parameters and local gradients outside this rank's chunks (after
  /// gather_all(), or after writing the whole model in, as a restore does).
  void release_all();

  /// Bytes of parameters and of gradients (local and summed) backed by memory now.
  struct resident {
    size_t params = 0, gradients = 0;
  };
  [[nodiscard]] resident resident_bytes() const;
  /// What a rank of `ranks` holds at most, in floats: its chunks (as many of parameters, of
  /// summed gradients and of each moment), and besides them the parameters gathered (a block in
  /// place and the next arriving, the units outside the blocks) and the local gradients (a
  /// block computing and one being reduce-scattered, the units outside the blocks).
  struct footprint {
    int64_t chunks = 0, gathered = 0, local = 0;
  };
  [[nodiscard]] static footprint memory(const models::decoder_layout& layout, int ranks);

 private:
  struct unit {
    models::param_range range;
    bool block = false;       // a block, or parameters outside the blocks
    int64_t chunk = 0;        // elements per rank
    models::param_range own;  // rank `rank`'s, clipped to the unit
    uint64_t scattered = 0;   // the ticket of its last reduce-scatter
  };
  zero3_parameters(const models::decoder_layout& layout, comm::communicator& group);
  // The units of `layout` (the parameters before the blocks, each block, those after them),
  // cut for rank `rank` of `ranks`.
  static std::vector<unit> units_of(const models::decoder_layout& layout, int rank, int ranks);

  [[nodiscard]] int block_unit(int layer) const { return first_block_ + layer - first_layer_; }
  // Queues unit u's all-gather (into place, or for a unit that does not split evenly into
  // gathered_).
  void start_gather(int u);
  // Waits for unit u's gather (starting it unless it is the one in flight) and copies it into
  // the parameters.
  void finish_gather(int u);
  // Queues unit u's reduce-scatter from local(), its sums added into grads().
  void start_scatter(int u);
  void release(float* buffer, int u, bool keep_own);
  void acquire(int layer, bool backward);
  void after(int layer, bool backward);
  void fail(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }

  const models::decoder_layout& layout_;
  int rank_, ranks_;
  std::vector<unit> units_;
  std::vector<int> outside_;  // the units outside the blocks
  int first_block_ = 0, first_layer_ = 0, last_layer_ = 0;
  std::vector<models::param_range> owned_;
  tensor::tensor params_, grads_, local_;  // reserved
  // A unit that splits evenly over the ranks is gathered into place and reduce-scattered in
  // place; another's gather arrives in gathered_ (ranks x chunk, padded) from this rank's chunk
  // in mine_, and its reduce-scatter works in scattered_ (none are made when not needed).
  tensor::tensor gathered_, mine_, scattered_;
  std::unique_ptr<comm::collective_queue> queue_;
  int in_flight_ = -1;  // the unit whose gather is queued, not yet copied in
  uint64_t in_flight_ticket_ = 0;
  int held_ = -1;  // a block kept from its forward to its backward
  bool training_ = false;
  int passes_left_ = 0;
  absl::Status status_;
};

}  // namespace troupe::actors
