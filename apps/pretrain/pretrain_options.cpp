#include "apps/pretrain/pretrain_options.hpp"

#include <algorithm>
#include <thread>

namespace troupe::apps {
namespace {

config::object_schema<train_spec> train_schema() {
  config::object_schema<train_spec> s;
  s.add("steps", &train_spec::steps).range(1, 100000000).help("optimizer steps in all");
  s.add("stop_after", &train_spec::stop_after)
      .range(0, 100000000)
      .help(
          "end this launch after this step (evaluated and checkpointed) and continue later "
          "with --resume; the learning-rate schedule still spans `steps`. 0 = run to the end");
  s.add("batch", &train_spec::batch)
      .range(1, 1 << 20)
      .help("sequences per optimizer step over every data-parallel rank (a multiple of dp)");
  s.add("micro_batch", &train_spec::micro_batch)
      .range(0, 1 << 20)
      .help(
          "sequences per forward/backward pass on a rank; gradients accumulate over the "
          "passes; 0 = the rank's whole share");
  s.add("lr", &train_spec::lr).range(0.0, 10.0).help("peak learning rate");
  s.add("warmup", &train_spec::warmup).range(0, 100000000).help("steps of linear warmup");
  s.add("min_lr_ratio", &train_spec::min_lr_ratio)
      .range(0.0, 1.0)
      .help("cosine decay ends at lr * min_lr_ratio at the last step");
  s.add("weight_decay", &train_spec::weight_decay)
      .range(0.0, 10.0)
      .help("AdamW decoupled weight decay (matrices and embeddings)");
  s.add("beta1", &train_spec::beta1).range(0.0, 0.999999).help("AdamW first-moment decay");
  s.add("beta2", &train_spec::beta2).range(0.0, 0.999999).help("AdamW second-moment decay");
  s.add("grad_clip", &train_spec::grad_clip)
      .range(0.0, 1e6)
      .help("global gradient-norm limit; 0 disables clipping");
  s.add("seed", &train_spec::seed).range(0, 1 << 30).help("initial weights and data shuffle");
  s.add("threads", &train_spec::threads)
      .range(0, 1024)
      .help(
          "cores each trainer computes on; 0 = this machine's cores / the grid's trainers "
          "(elastic: its worker's cores)");
  return s;
}

config::object_schema<data_spec> data_schema() {
  config::object_schema<data_spec> s;
  s.add("path", &data_spec::path)
      .non_empty()
      .help("a text file, or a directory whose text files are read in name order");
  s.add("source", &data_spec::source)
      .help(
          "instead of path: a role of kind source (e.g. a plugin's) whose records, joined by "
          "newlines, are the text; each trainer rank reads it in its own process");
  s.add("source_max_records", &data_spec::source_max_records)
      .range(0, int64_t{1} << 40)
      .help("read at most this many records of data.source; 0 = until it ends");
  s.add("source_timeout_s", &data_spec::source_timeout_s)
      .range(0.001, 86400)
      .help("how long each answer of data.source may take");
  s.add("format", &data_spec::format)
      .one_of({"text", "sft", "pairs"})
      .help(
          "text: windows of the text; sft: one JSONL example a line, {prompt, response} or "
          "{messages} (the chat template), the loss on the response only; pairs (app: "
          "reward_model): one preference pair a line, {prompt, chosen, rejected}");
  s.add("tokenizer", &data_spec::tokenizer)
      .help(
          "format text: a directory with a Hugging Face tokenizer.json, whose ids the model "
          "reads; empty = the text's bytes");
  s.add("train_tokenizer", &data_spec::train_tokenizer)
      .help(
          "train a byte-level BPE of model.vocab ids on the training text into data.tokenizer "
          "first, unless it already holds a tokenizer.json");
  s.add("val_fraction", &data_spec::val_fraction)
      .range(0.001, 0.5)
      .help("the last part of the text, held out for evaluation");
  s.add("eval_every", &data_spec::eval_every)
      .range(0, 100000000)
      .help("steps between held-out evaluations; 0 = only after the last step");
  s.add("eval_windows", &data_spec::eval_windows)
      .range(1, 1 << 24)
      .help("held-out windows of ctx tokens per evaluation");
  s.add("prefetch", &data_spec::prefetch)
      .range(1, 64)
      .help("batches each data loader may prepare ahead (credits the trainer grants)");
  return s;
}

config::object_schema<checkpoint_spec> checkpoint_schema() {
  config::object_schema<checkpoint_spec> s;
  s.add("every_steps", &checkpoint_spec::every_steps)
      .range(0, 100000000)
      .help("steps between checkpoints (and one after the last step); 0 = none");
  s.add("keep", &checkpoint_spec::keep).range(1, 100000).help("committed checkpoints kept");
  s.add("dir", &checkpoint_spec::dir)
      .help("where checkpoints go; default RUN_DIR/checkpoints. Every process must see it");
  return s;
}

config::object_schema<parallel_spec> parallel_schema() {
  config::object_schema<parallel_spec> s;
  s.add("dp", &parallel_spec::dp)
      .range(1, 4096)
      .help("data-parallel ranks; dp x pp x tp must equal roles.trainer.count");
  s.add("pp", &parallel_spec::pp)
      .range(1, 1024)
      .help("pipeline stages: each replica's blocks split evenly over pp trainer ranks");
  s.add("tp", &parallel_spec::tp)
      .range(1, 1024)
      .help("tensor-parallel ranks: each stage's heads and MLP units split over tp trainer ranks");
  s.add("micro_batches", &parallel_spec::micro_batches)
      .range(1, 1 << 16)
      .help("pipeline: micro-batches a replica's share of a step is split into");
  s.add("schedule", &parallel_spec::schedule)
      .one_of({"gpipe", "1f1b", "zb1"})
      .help(
          "pipeline: gpipe (every forward, then every backward), 1f1b (at most pp micro-batches "
          "of activations held per stage) or zb1 (1f1b's memory, backwards split so that the "
          "weight gradients fill the bubbles)");
  s.add("zero", &parallel_spec::zero)
      .range(0, 3)
      .help(
          "0 = plain data parallel, 1 = optimizer state sharded, 2 = gradients sharded too, 3 = "
          "parameters too (each block gathered while it runs)");
  s.add("shard_replicas", &parallel_spec::shard_replicas)
      .range(0, 1)
      .help(
          "elastic ZeRO-1/2: 1 keeps a copy of each optimizer shard on another rank, refreshed "
          "every step, so a lost rank costs no rollback; 0 rolls back to the last checkpoint");
  s.add("timeout_ms", &parallel_spec::timeout_ms)
      .range(100, 86400000)
      .help("limit for forming the group and for every collective");
  s.add("overlap", &parallel_spec::overlap)
      .one_of({"auto", "on", "off"})
      .help(
          "all-reduce gradient buckets while the backward pass goes on; auto = when a core is "
          "left beyond the trainers' threads");
  s.add("activation_checkpointing", &parallel_spec::activation_checkpointing)
      .one_of({"none", "blocks", "every_k"})
      .help(
          "recompute activations in the backward pass: blocks = keep each block's input only, "
          "every_k = keep every checkpoint_every-th block's and recompute that many at a time; "
          "the same arithmetic, so the same results");
  s.add("checkpoint_every", &parallel_spec::checkpoint_every)
      .range(1, 1 << 16)
      .help("every_k: blocks per recomputed segment");
  return s;
}

}  // namespace

config::object_schema<pretrain_options> pretrain_schema() {
  config::object_schema<pretrain_options> s;
  s.add("train", &pretrain_options::train, train_schema()).help("the optimization");
  s.add("data", &pretrain_options::data, data_schema()).help("the text and its held-out split");
  s.add("checkpoint", &pretrain_options::checkpoint, checkpoint_schema())
      .help("asynchronous checkpoints");
  s.add("parallel", &pretrain_options::parallel, parallel_schema())
      .help("data, pipeline and tensor parallelism");
  s.add("resume", &pretrain_options::resume)
      .help("a run directory to continue from (troupe launch --resume sets it)");
  s.add("init_from", &pretrain_options::init_from)
      .help(
          "a run directory whose latest checkpoint's weights the run starts from (a reward model "
          "takes a language model's trunk); the optimizer and the step start afresh");
  s.add("reference", &pretrain_options::reference)
      .help(
          "app: dpo: the reference model's run directory (default: init_from); its "
          "log-probabilities of the pairs are computed once and cached beside the data");
  s.add("loss_type", &pretrain_options::loss_type)
      .one_of({"sigmoid", "hinge", "ipo"})
      .help("app: dpo: TRL's loss_type: sigmoid (DPO; cDPO with label_smoothing), hinge, ipo");
  s.add("beta", &pretrain_options::beta)
      .range(1e-6, 1e6)
      .help("app: dpo: the KL penalty's strength (TRL's beta)");
  s.add("label_smoothing", &pretrain_options::label_smoothing)
      .range(0.0, 0.4999)
      .help("app: dpo, loss_type sigmoid: cDPO's share of labels assumed flipped");
  s.add("rpo_alpha", &pretrain_options::rpo_alpha)
      .range(0.0, 1e6)
      .help(
          "app: dpo: RPO's weight of the chosen responses' negative log-likelihood per token, "
          "added to the loss (TRL's rpo_alpha); 0 = none");
  return s;
}

kernels::preference_options preference_options_of(const pretrain_options& o) {
  return {.type = *kernels::parse_preference_loss(o.loss_type),
          .beta = o.beta,
          .label_smoothing = o.label_smoothing,
          .rpo_alpha = o.rpo_alpha};
}

int machine_cores() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

actors::trainer_options trainer_options_of(const pretrain_options& o, int trainers_here,
                                           int cores) {
  trainers_here = std::max(1, trainers_here);
  cores = std::max(1, cores);
  actors::trainer_options t;
  // The trainer counts rows: a preference pair (a reward model's sample) is two.
  const int rows = o.data.format == "pairs" ? 2 : 1;
  t.global_batch = rows * o.train.batch;
  t.micro_batch = rows * o.train.micro_batch;
  t.threads = o.train.threads > 0 ? o.train.threads : std::max(1, cores / trainers_here);
  t.lr = {static_cast<float>(o.train.lr), o.train.warmup, o.train.steps,
          static_cast<float>(o.train.min_lr_ratio)};
  t.adamw.beta1 = static_cast<float>(o.train.beta1);
  t.adamw.beta2 = static_cast<float>(o.train.beta2);
  t.adamw.weight_decay = static_cast<float>(o.train.weight_decay);
  t.grad_clip = static_cast<float>(o.train.grad_clip);
  t.zero = static_cast<actors::zero_stage>(o.parallel.zero);
  t.shard_replicas = o.parallel.shard_replicas > 0;
  const std::string& checkpointing = o.parallel.activation_checkpointing;
  t.checkpoint_segment = checkpointing == "blocks"    ? 1
                         : checkpointing == "every_k" ? o.parallel.checkpoint_every
                                                      : 0;
  t.overlap_comm = o.parallel.overlap == "on" ||
                   (o.parallel.overlap == "auto" && cores > t.threads * trainers_here);
  t.seed = static_cast<uint64_t>(o.train.seed);
  if (o.parallel.pp > 1 || o.parallel.tp > 1) {
    t.pipeline.stages = o.parallel.pp;
    t.pipeline.micro_batches = o.parallel.micro_batches;
    t.pipeline.schedule = *actors::parse_pipeline_schedule(o.parallel.schedule);
  }
  return t;
}

}  // namespace troupe::apps
