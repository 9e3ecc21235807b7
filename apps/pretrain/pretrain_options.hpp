#pragma once

#include <cstdint>
#include <string>

#include "actors/trainer.hpp"
#include "runtime/config/schema.hpp"

namespace troupe::apps {

/// `pretrain.train`: the optimization.
struct train_spec {
  int steps = 600;
  int stop_after = 0;   ///< end this launch after this step; the schedule still spans `steps`
  int batch = 16;       ///< sequences per optimizer step, over every data-parallel rank
  int micro_batch = 0;  ///< sequences per forward/backward pass on a rank; 0: the rank's share
  double lr = 4e-3;     ///< peak learning rate
  int warmup = 30;      ///< steps of linear warmup
  double min_lr_ratio = 0.1;  ///< the cosine decay ends at lr * min_lr_ratio
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double grad_clip = 1.0;  ///< 0 disables clipping
  int seed = 1;            ///< initial weights and the data shuffle
  int threads = 0;         ///< cores per trainer; 0: this machine's cores / dp
};

/// `pretrain.data`: the text and its held-out split.
struct data_spec {
  std::string path = "/usr/share/games/fortunes";
  /// Instead of `path`: a role of kind source (a plugin's, or source/text) whose records, joined
  /// by newlines, are the text. Each trainer rank reads it from an instance in its own process.
  std::string source;
  int64_t source_max_records = 0;  ///< read at most this many of its records; 0: all
  double source_timeout_s = 60;    ///< how long each of its answers may take
  /// text: byte windows of the text; sft: JSONL prompt/response (or chat) examples, the loss on
  /// the response only; pairs (app: reward_model): JSONL prompt/chosen/rejected preference pairs.
  std::string format = "text";
  /// format text: a directory with a Hugging Face tokenizer.json whose ids the model reads (at
  /// most model.vocab of them); empty: the text's bytes (model.vocab 256).
  std::string tokenizer;
  /// With `tokenizer`: when the directory holds no tokenizer.json yet, train a byte-level BPE of
  /// model.vocab ids on the training text into it first (the first trainer rank trains, the
  /// others and later runs read it).
  bool train_tokenizer = false;
  double val_fraction = 0.05;
  int eval_every = 100;    ///< steps between held-out evaluations; 0: only at the end
  int eval_windows = 256;  ///< held-out windows per evaluation
  int prefetch = 2;        ///< batches each data loader prepares ahead
};

/// `pretrain.checkpoint`.
struct checkpoint_spec {
  int every_steps = 0;  ///< 0: no checkpoints
  int keep = 3;         ///< committed checkpoints kept
  std::string dir;      ///< default: RUN_DIR/checkpoints
};

/// `pretrain.parallel`.
struct parallel_spec {
  int dp = 1;  ///< data-parallel ranks (replicas of the model, or of its pipeline)
  /// Pipeline stages: each replica's blocks split evenly over pp trainer ranks; roles.trainer
  /// has dp x pp ranks, rank r being replica r / pp's stage r % pp.
  int pp = 1;
  /// Tensor-parallel ranks: each stage's blocks split over tp trainer ranks (Megatron: heads and
  /// MLP units); roles.trainer has dp x pp x tp ranks, rank r being replica r / (pp tp)'s stage
  /// r / tp % pp's tensor-parallel rank r % tp.
  int tp = 1;
  int micro_batches = 1;  ///< a pipeline's (or tensor-parallel) replica's share, in micro-batches
  std::string schedule = "1f1b";  ///< the pipeline schedule: gpipe, 1f1b or zb1
  /// 0: plain data parallel; 1: optimizer state sharded; 2: gradients too; 3: parameters too
  int zero = 0;
  /// Elastic ZeRO-1/2: 1 keeps a copy of each rank's optimizer shard on the previous rank, so a
  /// lost rank's survives; 0: a loss rolls the group back to the last checkpoint in place.
  int shard_replicas = 0;
  int timeout_ms = 60000;  ///< rendezvous and every collective
  /// Gradient all-reduce during the backward pass: "auto" (when this machine has a core to spare
  /// beyond the trainers' threads), "on" or "off".
  std::string overlap = "auto";
  /// Recompute activations in the backward pass instead of keeping them: "none", "blocks"
  /// (keep each block's input only) or "every_k" (keep the input of every checkpoint_every-th
  /// block; a segment of that many blocks is recomputed at a time).
  std::string activation_checkpointing = "none";
  int checkpoint_every = 2;
};

/// The `pretrain:` section.
struct pretrain_options {
  train_spec train;
  data_spec data;
  checkpoint_spec checkpoint;
  parallel_spec parallel;
  /// A run directory (or checkpoint directory) to continue from; `troupe launch --resume` sets it.
  std::string resume;
  /// A run directory (or checkpoint directory) whose latest checkpoint's weights the run starts
  /// from instead of the seed's (a reward model: a language model's trunk, its own value head),
  /// or a Hugging Face model directory; the optimizer and the step start afresh. Empty with
  /// model.path: that model's weights.
  std::string init_from;
  /// app: dpo (TRL's DPOConfig): the reference model's run directory (or checkpoint directory,
  /// or Hugging Face model directory; empty: the initial weights'), the loss_type (sigmoid,
  /// hinge or ipo), beta, cDPO's label_smoothing and RPO's rpo_alpha.
  std::string reference;
  std::string loss_type = "sigmoid";
  double beta = 0.1;
  double label_smoothing = 0.0;
  double rpo_alpha = 0.0;

  /// Where the first weights come from: init_from, or else the Hugging Face model at
  /// `model_dir` (model.path); empty: the seed's.
  [[nodiscard]] const std::string& initial_weights(const std::string& model_dir) const {
    return init_from.empty() ? model_dir : init_from;
  }
  /// The reference DPO compares with: `reference`, or else the initial weights.
  [[nodiscard]] const std::string& reference_path(const std::string& model_dir) const {
    return reference.empty() ? initial_weights(model_dir) : reference;
  }
};

[[nodiscard]] config::object_schema<pretrain_options> pretrain_schema();

/// app: dpo's loss, from the section's loss_type, beta and label_smoothing.
[[nodiscard]] kernels::preference_options preference_options_of(const pretrain_options& o);

/// The trainer's options from the app's: the schedule, AdamW, clipping, ZeRO and the threads
/// each rank computes on. `trainers_here`: the trainers sharing `cores` (a fixed grid: every
/// trainer, over this machine's cores; an elastic rank: itself, over its worker's cores), which
/// the defaults of threads and overlap divide among them.
[[nodiscard]] actors::trainer_options trainer_options_of(const pretrain_options& o,
                                                         int trainers_here, int cores);
/// This machine's cores.
[[nodiscard]] int machine_cores();

}  // namespace troupe::apps
