#include "apps/pretrain/pretrain_app.hpp"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "actors/pair_reference.hpp"
#include "actors/source_reader.hpp"
#include "actors/trainer_actor.hpp"
#include "apps/pretrain/corpus_tokenizer.hpp"
#include "apps/pretrain/pretrain_driver.hpp"
#include "apps/pretrain/pretrain_driver_actor.hpp"
#include "apps/pretrain/pretrain_options.hpp"
#include "models/decoder/decoder_source.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/base/status.hpp"
#include "runtime/config/environment.hpp"

namespace troupe::apps {
namespace {

constexpr absl::string_view trainer_role = "trainer";

// The trainer role has no options; the app's section configures it.
struct gpt_trainer_options {};

// Where an error about `section`.group.key points: the key, or else its group, or else the
// section (workers get the config with every default, which no line holds).
YAML::Node located(const YAML::Node& section, const char* group, const char* key) {
  const YAML::Node g = section[group].IsDefined() ? section[group] : section;
  return g[key].IsDefined() ? g[key] : g;
}

absl::StatusOr<const pretrain_options*> pretrain_options_in(const app::app_plan& plan) {
  if ((plan.spec.app != "pretrain" && plan.spec.app != "reward_model" && plan.spec.app != "dpo") ||
      plan.app_options == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the trainer role belongs to app: pretrain, reward_model or dpo, not app: ",
                     plan.spec.app));
  }
  return static_cast<const pretrain_options*>(plan.app_options.get());
}

// The data as data.format says: text, or supervised examples or preference pairs in the
// tokens of the config's `model` (its vocabulary is loaded for them alone).
absl::StatusOr<actors::text_corpus> load_corpus(const data_spec& d, int ctx,
                                                const std::optional<config::model_spec>& model) {
  if (d.format == "sft" || d.format == "pairs") {
    TROUPE_ASSIGN_OR_RETURN(const auto vocabulary, models::vocabulary_of(model));
    return d.format == "sft"
               ? actors::text_corpus::load_sft(d.path, d.val_fraction, ctx, *vocabulary)
               : actors::text_corpus::load_pairs(d.path, d.val_fraction, ctx, *vocabulary);
  }
  return actors::text_corpus::load(d.path, d.val_fraction, ctx);
}

// data.source: this rank's own instance of the source role (`role`/`ctx.index`, on a thread of
// its own, since this blocks), read from record 0 to its end; the text is its records joined
// by newlines. A source answers by position, so every rank reads the same text.
absl::StatusOr<actors::text_corpus> read_source_corpus(actor::role_context& ctx, const data_spec& d,
                                                       int window) {
  const app::resolved_role* role = ctx.plan.find_role(d.source);
  if (role == nullptr) {  // check_data_source refuses such a config
    return absl::FailedPreconditionError(
        absl::StrCat("data.source names no role '", d.source, "'"));
  }
  actor::role_context reader = ctx;
  reader.role = d.source;
  reader.detached = true;
  const std::string name =
      absl::StrCat("data.source ", reader.actor_name(), " (source/", role->spec.impl, ")");
  TROUPE_ASSIGN_OR_RETURN(caf::actor source,
                          role->entry->factory.spawn(reader, role->options.get()));
  auto records = actors::read_records(
      ctx.system, caf::actor_cast<actor::source_actor>(source), name,
      static_cast<uint64_t>(d.source_max_records),
      std::chrono::milliseconds(static_cast<int64_t>(d.source_timeout_s * 1000)));
  caf::anon_send_exit(source, caf::exit_reason::user_shutdown);
  TROUPE_RETURN_IF_ERROR(records.status());
  return actors::text_corpus::from_text(absl::StrJoin(*records, "\n"), d.val_fraction, window,
                                        name);
}

absl::StatusOr<caf::actor> spawn_gpt_trainer(actor::role_context& ctx, const gpt_trainer_options&) {
  TROUPE_ASSIGN_OR_RETURN(const pretrain_options* o, pretrain_options_in(ctx.plan));
  TROUPE_ASSIGN_OR_RETURN(const models::decoder_config model,
                          models::decoder_config_of(ctx.plan.spec.model));
  TROUPE_ASSIGN_OR_RETURN(actors::text_corpus corpus,
                          o->data.source.empty()
                              ? load_corpus(o->data, model.ctx, ctx.plan.spec.model)
                              : read_source_corpus(ctx, o->data, model.ctx));
  const std::string model_dir = models::hf_model_dir(ctx.plan.spec.model);
  if (!model_dir.empty() && o->data.format == "text") {  // text read as the model's ids
    TROUPE_ASSIGN_OR_RETURN(auto tokenizer,
                            tokenizers::tokenizer::load(model_dir + "/tokenizer.json"));
    TROUPE_RETURN_IF_ERROR(tokenize_corpus(corpus, *tokenizer, model.ctx,
                                           o->data.source.empty() ? o->data.path : o->data.source));
  } else if (!o->data.tokenizer.empty()) {
    bool trained = false;
    TROUPE_ASSIGN_OR_RETURN(auto tokenizer,
                            corpus_tokenizer(o->data, corpus, model.vocab, &trained));
    if (trained) {
      ctx.events.emit(run::severity::info, "tokenizer_trained",
                      absl::StrCat("trained a byte-level BPE of ", tokenizer->vocab_size(),
                                   " ids on the training text into ", o->data.tokenizer),
                      {{"dir", o->data.tokenizer}, {"vocab_size", tokenizer->vocab_size()}});
    }
    TROUPE_RETURN_IF_ERROR(tokenize_corpus(corpus, *tokenizer, model.ctx, o->data.path));
  }
  const bool dpo = ctx.plan.spec.app == "dpo";
  const auto* role = ctx.plan.find_role(trainer_role);
  const bool elastic = role != nullptr && role->spec.elastic.has_value();
  std::shared_ptr<comm::rendezvous_store> store;
  const int pp = o->parallel.pp, tp = o->parallel.tp, grid = o->parallel.dp * pp * tp;
  if (grid > 1 || elastic) {
    if (!ctx.rendezvous) {
      return absl::FailedPreconditionError(
          "a grid of more than one trainer needs a rendezvous, and this process has none");
    }
    TROUPE_ASSIGN_OR_RETURN(store, ctx.rendezvous());
  }
  actors::trainer_actor_spec spec;
  spec.model = model;
  // An elastic rank is the one trainer of its worker process, and computes on the cores its
  // worker offers (`troupe worker --resources cores=N`; a launch's local workers split the
  // machine): a joiner on another machine uses that machine's. A fixed grid's trainers share
  // this machine's cores.
  spec.options = elastic ? trainer_options_of(*o, 1, ctx.cores > 0 ? ctx.cores : machine_cores())
                         : trainer_options_of(*o, grid, machine_cores());
  if (dpo) {
    // The reference's log-probabilities of every pair, computed by the first rank to get here
    // (on its cores) and cached beside the data for the others and the next runs.
    actors::pair_reference_source source;
    TROUPE_ASSIGN_OR_RETURN(
        actors::pair_reference reference,
        actors::cached_pair_reference(corpus, o->data.path, o->reference_path(model_dir),
                                      !o->reference.empty()   ? "dpo.reference"
                                      : !o->init_from.empty() ? "dpo.init_from"
                                                              : "model.path",
                                      model, spec.options.threads, &source));
    TROUPE_RETURN_IF_ERROR(corpus.attach_reference(std::move(reference)));
    ctx.events.emit(run::severity::info, "dpo_reference",
                    absl::StrCat("the reference's log-probabilities of the pairs: ",
                                 source.computed ? "computed into " : "read from ", source.cache),
                    {{"cache", source.cache}, {"computed", source.computed}});
    spec.options.preference = preference_options_of(*o);
  }
  // An elastic rank's place comes with the driver's (regroup); it starts alone. In a grid each
  // dimension's group is the ranks that differ in it alone: the data-parallel group a stage's
  // tensor-parallel rank across the replicas, the pipeline group a replica's stages (of one
  // tensor-parallel rank), the tensor-parallel group a stage's ranks.
  const grid_place at = grid_place_of(ctx.index, pp, tp);
  spec.rank = elastic ? 0 : at.replica;
  spec.ranks = elastic ? 1 : o->parallel.dp;
  spec.elastic = elastic;
  spec.options.elastic = elastic;
  if (const std::string& initial = o->initial_weights(model_dir); elastic && !initial.empty()) {
    TROUPE_ASSIGN_OR_RETURN(
        const models::weights_source source,
        models::find_weights(initial, model, o->init_from.empty() ? "model.path" : "init_from"));
    spec.initial_weights = source.dir;
  }
  spec.options.pipeline.stage = at.stage;
  spec.tp = {at.tp_rank, tp};
  spec.group.name = pp > 1 || tp > 1
                        ? absl::StrCat("pretrain/dp/stage-", at.stage, "/tp-", at.tp_rank)
                        : "pretrain/dp";
  spec.group.timeout = std::chrono::milliseconds(o->parallel.timeout_ms);
  spec.group.host = ctx.host;
  spec.pipe.name = absl::StrCat("pretrain/pp/replica-", at.replica, "/tp-", at.tp_rank);
  spec.pipe.timeout = spec.group.timeout;
  spec.pipe.host = ctx.host;
  spec.tensor.name = absl::StrCat("pretrain/tp/replica-", at.replica, "/stage-", at.stage);
  spec.tensor.timeout = spec.group.timeout;
  spec.tensor.host = ctx.host;
  spec.corpus = std::make_shared<const actors::text_corpus>(std::move(corpus));
  spec.data_seed = static_cast<uint64_t>(o->train.seed);
  spec.prefetch = o->data.prefetch;
  spec.eval_windows = o->data.eval_windows;
  TROUPE_ASSIGN_OR_RETURN(config::test_hooks hooks, config::test_hooks_from_environment());
  spec.pacer = run::work_pacer(std::move(hooks));
  return caf::actor_cast<caf::actor>(
      actors::spawn_trainer(ctx.system, ctx.metrics, ctx.actor_name(), store, std::move(spec)));
}

// An elastic trainer role: the world follows the trainers, within [min, max].
void check_elastic(const pretrain_options& o, const app::resolved_role& trainer,
                   const config::parse_context& ctx, const YAML::Node& section) {
  const YAML::Node parallel = section["parallel"];
  // Compared with the default, not "is it written": workers get the config with every default.
  if (o.parallel.dp != parallel_spec{}.dp) {
    ctx.child("parallel")
        .child("dp")
        .error(
            parallel.IsDefined() && parallel["dp"].IsDefined() ? parallel["dp"] : section,
            absl::StrCat("is ", o.parallel.dp,
                         ", but roles.trainer.elastic makes the data-parallel world the trainers "
                         "that are alive (within elastic.min and max); remove it"));
  }
  if (o.parallel.shard_replicas != 0 && o.parallel.zero == 0) {
    ctx.child("parallel")
        .child("shard_replicas")
        .error(parallel["shard_replicas"].IsDefined() ? parallel["shard_replicas"] : section,
               "is 1, but with parallel.zero 0 every rank holds the whole optimizer state "
               "already; it applies to zero 1 or 2");
  }
  if (o.train.batch < trainer.spec.elastic->max) {
    ctx.child("train").child("batch").error(
        section["train"].IsDefined() ? section["train"] : section,
        absl::StrCat("is ", o.train.batch, ", but roles.trainer.elastic.max ",
                     trainer.spec.elastic->max, " ranks each need a sequence of every step"));
  }
}

// A pipeline's and a tensor-parallel grid's shape: the blocks split evenly over the stages, the
// heads over the tensor-parallel ranks, each replica's share of a step into the micro-batches;
// a fixed group (the elastic one is data parallel only).
void check_grid(const pretrain_options& o, const models::decoder_config& model, bool elastic,
                const config::parse_context& ctx, const YAML::Node& section) {
  const auto at = [&](const char* key) { return located(section, "parallel", key); };
  const auto parallel_ctx = ctx.child("parallel");
  const parallel_spec& p = o.parallel;
  if (p.pp == 1 && p.tp == 1) {
    if (p.micro_batches != 1) {
      parallel_ctx.child("micro_batches")
          .error(at("micro_batches"),
                 absl::StrCat("is ", p.micro_batches,
                              ", but it splits a pipeline's (or tensor-parallel) work and "
                              "parallel.pp and tp are 1; use train.micro_batch to accumulate "
                              "gradients over smaller passes"));
    }
    return;
  }
  if (model.layers % p.pp != 0) {
    parallel_ctx.child("pp").error(at("pp"),
                                   absl::StrCat("is ", p.pp, ", but model.layers ", model.layers,
                                                " do not split evenly over ", p.pp, " stages"));
  }
  if (model.heads % p.tp != 0) {
    parallel_ctx.child("tp").error(
        at("tp"),
        absl::StrCat("is ", p.tp, ", but model.heads ", model.heads, " do not split evenly over ",
                     p.tp, " tensor-parallel ranks (each holds whole heads)"));
  } else if (model.kv_head_count() % p.tp != 0) {
    parallel_ctx.child("tp").error(
        at("tp"), absl::StrCat("is ", p.tp, ", but model.kv_heads ", model.kv_head_count(),
                               " do not split evenly over ", p.tp,
                               " tensor-parallel ranks (each holds whole key/value heads)"));
  } else if (model.ffn_width() % p.tp != 0) {
    parallel_ctx.child("tp").error(
        at("tp"), absl::StrCat("is ", p.tp, ", but model.ffn ", model.ffn_width(),
                               " does not split evenly over ", p.tp, " tensor-parallel ranks"));
  } else if (model.vocab % p.tp != 0) {
    parallel_ctx.child("tp").error(
        at("tp"),
        absl::StrCat("is ", p.tp, ", but model.vocab ", model.vocab, " does not split evenly over ",
                     p.tp, " tensor-parallel ranks (each holds a block of the vocabulary)"));
  }
  for (const auto& [key, n] : {std::pair{"pp", p.pp}, {"tp", p.tp}}) {
    if (elastic && n > 1) {
      parallel_ctx.child(key).error(
          at(key), absl::StrCat("is ", n,
                                ", but roles.trainer.elastic regroups the data-parallel "
                                "dimension only; make the group fixed (roles.trainer.count) or "
                                "set ",
                                key, " 1"));
    }
  }
  if (o.train.batch % p.dp == 0 && o.train.batch / p.dp % p.micro_batches != 0) {
    parallel_ctx.child("micro_batches")
        .error(at("micro_batches"),
               absl::StrCat("is ", p.micro_batches, ", but each replica's share of a step is ",
                            o.train.batch / p.dp, " sequences (train.batch ", o.train.batch,
                            " over dp ", p.dp, "), which it does not divide"));
  }
  if (p.schedule == "zb1" && p.activation_checkpointing != "none") {
    parallel_ctx.child("schedule")
        .error(at("schedule"),
               absl::StrCat("is zb1, which defers each weight gradient until after the input "
                            "gradient has gone on, and needs every block's activations until "
                            "then; parallel.activation_checkpointing ",
                            p.activation_checkpointing,
                            " frees them: use schedule 1f1b with checkpointing, or none"));
  }
  if (o.train.micro_batch != 0) {
    ctx.child("train")
        .child("micro_batch")
        .error(located(section, "train", "micro_batch"),
               absl::StrCat("is ", o.train.micro_batch,
                            ", but a pipeline's (or tensor-parallel) passes are its "
                            "micro-batches; set parallel.micro_batches instead"));
  }
}

// ZeRO-3 shards a whole model over a fixed data-parallel group, a block at a time.
void check_zero3(const pretrain_options& o, bool elastic, const config::parse_context& ctx,
                 const YAML::Node& section) {
  const YAML::Node at = located(section, "parallel", "zero");
  const auto zero_ctx = ctx.child("parallel").child("zero");
  const parallel_spec& p = o.parallel;
  if (p.pp > 1 || p.tp > 1) {
    zero_ctx.error(at, absl::StrCat("is 3, but parallel.pp is ", p.pp, " and tp ", p.tp,
                                    ": ZeRO-3 shards a whole model's parameters over the "
                                    "data-parallel group; use zero 1 or 2 with a grid"));
  }
  if (elastic) {
    zero_ctx.error(at,
                   "is 3, but roles.trainer.elastic regroups with ZeRO 0-2 only (a lost rank's "
                   "parameter shard has no copy); use zero 1 or 2, or a fixed group");
  }
  if (p.activation_checkpointing == "every_k") {
    zero_ctx.error(at,
                   "is 3, which gathers one block at a time, but activation_checkpointing "
                   "every_k recomputes several at once; use blocks");
  }
  const int share = o.train.batch / p.dp;
  if (o.train.batch % p.dp == 0 && o.train.micro_batch > 0 && share % o.train.micro_batch != 0) {
    ctx.child("train")
        .child("micro_batch")
        .error(located(section, "train", "micro_batch"),
               absl::StrCat("is ", o.train.micro_batch,
                            ", but with parallel.zero 3 it must divide each "
                            "rank's ",
                            share, " sequences (every rank's gathers pair up pass by pass)"));
  }
}

// DPO's own keys: refused in the other apps, and checked against each other in app: dpo, which
// starts from a policy.
void check_dpo_keys(const std::string& app, const pretrain_options& o, const std::string& model_dir,
                    const config::parse_context& ctx, const YAML::Node& section) {
  const auto at = [&](const char* key) {
    return section[key].IsDefined() ? section[key] : section;
  };
  if (app != "dpo") {
    // Compared with the defaults, not "is it written": workers get the config with every default.
    const pretrain_options defaults;
    for (const auto& [key, set] :
         {std::pair{"reference", o.reference != defaults.reference},
          {"loss_type", o.loss_type != defaults.loss_type},
          {"beta", o.beta != defaults.beta},
          {"label_smoothing", o.label_smoothing != defaults.label_smoothing},
          {"rpo_alpha", o.rpo_alpha != defaults.rpo_alpha}}) {
      if (set) {
        ctx.child(key).error(at(key), absl::StrCat("is set, but it configures app: dpo's loss, and "
                                                   "this is app: ",
                                                   app, "; remove it"));
      }
    }
    return;
  }
  if (o.initial_weights(model_dir).empty()) {
    ctx.child("init_from")
        .error(section,
               "is not set, but DPO trains a policy that already answers (TRL starts from the SFT "
               "model): set dpo.init_from to its run directory, e.g. runs/sft-..., or model.path "
               "to a Hugging Face model");
  }
  if (o.label_smoothing != 0 && o.loss_type != "sigmoid") {
    ctx.child("label_smoothing")
        .error(at("label_smoothing"), absl::StrCat("is ", o.label_smoothing,
                                                   ", but it is cDPO's, which loss_type sigmoid "
                                                   "has; loss_type is ",
                                                   o.loss_type, ": remove it"));
  }
}

// app: reward_model and app: dpo train on preference pairs, and app: pretrain on anything else;
// on pairs a data-parallel group (ZeRO 0-2) of whole models, fixed or elastic.
void check_app_data(const std::string& app, const pretrain_options& o, const std::string& model_dir,
                    const config::parse_context& ctx, const YAML::Node& section) {
  const bool pairs = o.data.format == "pairs";
  check_dpo_keys(app, o, model_dir, ctx, section);
  if (app != "pretrain" && !pairs) {
    ctx.child("data").child("format").error(
        located(section, "data", "format"),
        absl::StrCat("is ", o.data.format, ", but app: ", app,
                     " trains on preference pairs: set data.format: pairs (JSONL {prompt, "
                     "chosen, rejected})"));
  }
  if (app == "pretrain" && pairs) {
    ctx.child("data").child("format").error(
        located(section, "data", "format"),
        "is pairs, which trains a reward model or a DPO policy: use app: reward_model or "
        "app: dpo (with this section as reward_model: or dpo:)");
  }
  if (!pairs) return;
  const parallel_spec& p = o.parallel;
  if (p.pp > 1 || p.tp > 1 || p.zero == 3) {
    ctx.child("parallel")
        .error(
            section["parallel"].IsDefined() ? section["parallel"] : section,
            absl::StrCat("has pp ", p.pp, ", tp ", p.tp, " and zero ", p.zero, ", but app: ", app,
                         " trains whole models on data-parallel ranks: use pp 1, tp 1 and "
                         "zero 0-2"));
  }
  if (p.activation_checkpointing != "none") {
    ctx.child("parallel")
        .child("activation_checkpointing")
        .error(located(section, "parallel", "activation_checkpointing"),
               absl::StrCat("is set, but app: ", app, " keeps its activations: remove it"));
  }
}

// data.source names a role of kind source, one instance of which each trainer rank reads in its
// own process (so the supervisor starts none: pretrain_app_factory's embedded_roles), for text.
void check_data_source(const app::app_plan& plan, const pretrain_options& o,
                       const config::parse_context& ctx, const YAML::Node& section) {
  const config::parse_context data = ctx.child("data");
  const YAML::Node at = located(section, "data", "source");
  const app::resolved_role* role = plan.find_role(o.data.source);
  if (role == nullptr) {
    data.child("source").error(
        at, absl::StrCat("names no role '", o.data.source, "'; add roles.", o.data.source,
                         ": {kind: source, impl: ...} (a plugin's, or text), or use data.path"));
    return;
  }
  if (role->spec.kind != "source") {
    data.child("source").error(at, absl::StrCat("names role '", o.data.source, "' of kind ",
                                                role->spec.kind, "; it must be of kind source"));
    return;
  }
  if (role->spec.count != 1 || role->spec.elastic) {
    data.child("source").error(
        at, absl::StrCat("names role '", o.data.source,
                         "', which has a count or elastic: each trainer rank reads an instance "
                         "of it in its own process; remove them from roles.",
                         o.data.source));
  }
  if (o.data.format != "text") {
    data.child("format").error(
        located(section, "data", "format"),
        absl::StrCat("is ", o.data.format,
                     ", but data.source gives text (its records joined by "
                     "newlines): use format text, or data.path for JSONL files"));
  }
  // Compared with the default, not "is it written": workers get the config with every default.
  if (o.data.path != data_spec{}.path) {
    data.child("path").error(located(section, "data", "path"),
                             "is set, and so is data.source: the text comes from one of them; "
                             "remove one");
  }
}

// The roles must be exactly the trainer ranks (and data.source's), and the shapes must fit
// together.
void check_pretrain_plan(const app::app_plan& plan, const void* opaque,
                         const config::parse_context& ctx, const YAML::Node& section) {
  const auto& o = *static_cast<const pretrain_options*>(opaque);
  const auto resolved = models::decoder_config_of(plan.spec.model);
  if (!resolved.ok()) ctx.error(section, std::string(resolved.status().message()));
  const models::decoder_config model = resolved.value_or(models::decoder_config{});
  const std::string model_dir = models::hf_model_dir(plan.spec.model);
  if (!model_dir.empty()) {
    // The model brings its weights (unless init_from names others), tokenizer and template.
    if (absl::Status s = models::check_model_dir(plan.spec.model); !s.ok()) {
      ctx.error(section, absl::StrCat("model.path: ", s.message()));
    }
    if (!o.data.tokenizer.empty() || o.data.train_tokenizer) {
      ctx.child("data")
          .child("tokenizer")
          .error(located(section, "data", "tokenizer"),
                 absl::StrCat("is set, but model.path ", model_dir,
                              " reads its data with its own tokenizer: remove data.tokenizer and "
                              "data.train_tokenizer"));
    }
  } else if (!o.data.tokenizer.empty() || o.data.train_tokenizer) {
    if (absl::Status s = apps::check_corpus_tokenizer(o.data, model.vocab); !s.ok()) {
      ctx.child("data").error(section["data"].IsDefined() ? section["data"] : section,
                              std::string(s.message()));
    }
  } else if (model.vocab != 256) {
    ctx.error(section, absl::StrCat("the data is byte-level text, so model.vocab must be 256, not ",
                                    model.vocab, " (or name a tokenizer in data.tokenizer)"));
  }
  check_app_data(plan.spec.app, o, model_dir, ctx, section);
  if (!o.data.source.empty()) check_data_source(plan, o, ctx, section);
  const auto* trainer = plan.find_role(trainer_role);
  // init_from is checked here when a run of model.path's shape names it, or when elastic ranks
  // read it as they start on whichever worker (else the driver reads it at the start; a shipped
  // config may name a run that a step before it makes).
  const bool elastic = trainer != nullptr && trainer->spec.elastic.has_value();
  if (resolved.ok() && !o.init_from.empty() && (!model_dir.empty() || elastic)) {
    if (auto source = models::find_weights(o.init_from, model, "init_from"); !source.ok()) {
      ctx.child("init_from")
          .error(section["init_from"].IsDefined() ? section["init_from"] : section,
                 std::string(source.status().message()));
    }
  }
  if (trainer == nullptr || trainer->spec.kind != "trainer") {
    ctx.error(section, absl::StrCat("app: ", plan.spec.app,
                                    " needs a role 'trainer' of kind trainer, e.g. "
                                    "roles: {trainer: {kind: trainer, impl: gpt, count: 2}}"));
  } else if (trainer->spec.elastic) {
    check_elastic(o, *trainer, ctx, section);
  } else if (const int grid = o.parallel.dp * o.parallel.pp * o.parallel.tp;
             trainer->spec.count != grid) {
    ctx.child("parallel")
        .child("dp")
        .error(section["parallel"]["dp"].IsDefined() ? section["parallel"]["dp"] : section,
               grid != o.parallel.dp
                   ? absl::StrCat(
                         "is ", o.parallel.dp, " and parallel.pp is ", o.parallel.pp, " and tp ",
                         o.parallel.tp, ", but roles.trainer.count is ", trainer->spec.count,
                         ": the grid is dp x pp x tp trainer actors; set the count to ", grid)
                   : absl::StrCat("is ", o.parallel.dp, " but roles.trainer.count is ",
                                  trainer->spec.count,
                                  ": each data-parallel rank is one trainer actor; set both to "
                                  "the same number"));
  }
  check_grid(o, model, trainer != nullptr && trainer->spec.elastic, ctx, section);
  if (o.parallel.zero == 3)
    check_zero3(o, trainer != nullptr && trainer->spec.elastic, ctx, section);
  if (trainer != nullptr && !trainer->spec.elastic && o.parallel.shard_replicas != 0) {
    const YAML::Node parallel = section["parallel"];
    ctx.child("parallel")
        .child("shard_replicas")
        .error(parallel["shard_replicas"].IsDefined() ? parallel["shard_replicas"] : section,
               "is 1, but the trainer group is fixed: a lost rank fails the job whatever the "
               "replicas hold; make the role elastic (roles.trainer.elastic: {min, max}) or "
               "remove it");
  }
  for (const auto& role : plan.roles) {
    if (role.spec.name != trainer_role && role.spec.name != o.data.source) {
      ctx.error(section, absl::StrCat("app: ", plan.spec.app,
                                      " runs only the 'trainer' role (and the role data.source "
                                      "names); remove role '",
                                      role.spec.name, "'"));
    }
  }
  const auto train_ctx = ctx.child("train");
  const YAML::Node train = section["train"].IsDefined() ? section["train"] : section;
  if (!(trainer != nullptr && trainer->spec.elastic) && o.train.batch % o.parallel.dp != 0) {
    train_ctx.child("batch").error(
        train,
        absl::StrCat("is ", o.train.batch, ", not a multiple of parallel.dp ", o.parallel.dp));
  }
  if (o.train.warmup >= o.train.steps) {
    train_ctx.child("warmup").error(
        train, absl::StrCat("is ", o.train.warmup, " but only ", o.train.steps, " steps run"));
  }
}

std::string megabytes(int64_t bytes) {
  return absl::StrFormat("%.1f MB", static_cast<double>(bytes) / 1e6);
}

// troupe check: the grid (which blocks each trainer holds) and what each rank holds in memory.
// What the run trains on, read as the trainers will: the text's or the examples' count, or why
// they cannot be read (a check does not need the data to exist yet).
std::string describe_data(const pretrain_options& o, int ctx,
                          const std::optional<config::model_spec>& model) {
  const bool sft = o.data.format == "sft";
  const absl::StatusOr<actors::text_corpus> corpus = load_corpus(o.data, ctx, model);
  if (!corpus.ok()) {
    return absl::StrCat(
        "data: not readable now: ", corpus.status().message(),
        sft ? " (troupe data sft CONFIG --out FILE writes an RLHF task's examples)" : "");
  }
  if (corpus->pairs()) {
    return absl::StrCat("data: pairs, ", corpus->train_pairs().size(), " preference pairs and ",
                        corpus->val_pairs().size(), " held out");
  }
  const std::string model_dir = models::hf_model_dir(model);
  if (!sft) {
    return absl::StrCat(
        "data: text, ", corpus->train().size(), " bytes and ", corpus->val().size(), " held out",
        !model_dir.empty() ? absl::StrCat(", read as the ids of ", model_dir, "/tokenizer.json")
        : o.data.tokenizer.empty()
            ? ""
            : absl::StrCat(", read as the ids of ", o.data.tokenizer, "/tokenizer.json",
                           o.data.train_tokenizer ? " (trained first if absent)" : ""));
  }
  int64_t trained = 0;
  for (const actors::sft_example& e : corpus->train_examples())
    trained += e.trained_targets();
  return absl::StrCat(
      "data: sft, ", corpus->train_examples().size(), " examples and ",
      corpus->val_examples().size(), " held out; the loss on ",
      absl::StrFormat("%.1f", static_cast<double>(trained) /
                                  static_cast<double>(corpus->train_examples().size())),
      model_dir.empty() ? " response bytes an example"
                        : absl::StrCat(" response tokens an example, rendered by ", model_dir,
                                       "'s chat template"));
}

std::vector<std::string> describe_pretrain_plan(const app::app_plan& plan, const void* opaque) {
  const auto& o = *static_cast<const pretrain_options*>(opaque);
  const models::decoder_config model = models::decoder_config_of(plan.spec.model)
                                           .value_or(models::decoder_config{});  // checked already
  std::vector<std::string> out = {
      o.data.source.empty()
          ? describe_data(o, model.ctx, plan.spec.model)
          : absl::StrCat("data: text, the records of role ", o.data.source, " (source/",
                         plan.find_role(o.data.source)->spec.impl,
                         ") joined by newlines, read by each trainer rank as it starts")};
  const auto* trainer = plan.find_role(trainer_role);
  if (trainer == nullptr || trainer->spec.elastic) return out;
  const int dp = o.parallel.dp, pp = o.parallel.pp, tp = o.parallel.tp;
  const int per_stage = model.layers / pp, heads = model.heads / tp;
  if (pp > 1 || tp > 1) {
    out.push_back(absl::StrCat("grid: ", describe_grid(dp, pp, tp), "; each replica's ",
                               o.train.batch / dp, " sequences in ", o.parallel.micro_batches,
                               " micro-batches",
                               pp > 1 ? absl::StrCat(", schedule ", o.parallel.schedule) : ""));
  } else {
    out.push_back(absl::StrCat("grid: dp ", dp, " (zero ", o.parallel.zero, ")",
                               o.parallel.zero == 3 && dp > 1
                                   ? "; each rank holds its shard of every block, the whole "
                                     "block only while it runs"
                                   : ""));
  }
  for (int rank = 0; rank < dp * pp * tp; ++rank) {
    const grid_place at = grid_place_of(rank, pp, tp);
    const models::layer_range range{at.stage * per_stage, (at.stage + 1) * per_stage};
    const models::decoder_layout layout(model, range, models::decoder_head::lm, {at.tp_rank, tp});
    actors::trainer_options t = trainer_options_of(o, dp * pp * tp, machine_cores());
    t.pipeline.stage = at.stage;
    const actors::trainer_memory m = actors::trainer::memory(layout, t, dp);
    std::string holds = absl::StrCat("blocks ", layout.range().first, "-", layout.range().last - 1);
    if (tp > 1) {
      absl::StrAppend(&holds, " (heads ", at.tp_rank * heads, "-", (at.tp_rank + 1) * heads - 1,
                      " of ", model.heads, " and their share of the MLP)");
    }
    // A tensor-parallel rank's block of the vocabulary: its rows of the tied embedding, and the
    // logits it computes.
    const std::string vocab =
        tp > 1 ? absl::StrCat(" (vocabulary ", layout.vocab_first(), "-",
                              layout.vocab_first() + layout.local_vocab() - 1, ")")
               : "";
    if (layout.range().has_embedding()) absl::StrAppend(&holds, ", the embeddings", vocab);
    if (layout.range().has_head(model)) {
      absl::StrAppend(&holds, ", the final norm and the head",
                      pp > 1 && at.stage > 0 ? " (a copy of the tied embedding)" : "",
                      layout.range().has_embedding() ? std::string() : vocab);
    }
    out.push_back(absl::StrCat("trainer/", rank, ": replica ", at.replica,
                               pp > 1 ? absl::StrCat(", stage ", at.stage) : "",
                               tp > 1 ? absl::StrCat(", tp rank ", at.tp_rank) : "", ": ", holds,
                               "; parameters ", megabytes(m.parameters), ", gradients ",
                               megabytes(m.gradients), ", optimizer ", megabytes(m.optimizer),
                               ", activations ", megabytes(m.activations)));
  }
  return out;
}

}  // namespace

actor::role_factory pretrain_app_factory(absl::string_view app) {
  auto factory = actor::make_role_factory<pretrain_options>(
      app == "reward_model" ? "trains a GPT reward model (a scalar head) on preference pairs"
      : app == "dpo" ? "trains a GPT policy on preference pairs with DPO against a frozen reference"
                     : "trains a GPT from scratch on data-parallel trainer actors",
      pretrain_schema(),
      [](actor::role_context& ctx, const pretrain_options& options) -> absl::StatusOr<caf::actor> {
        TROUPE_ASSIGN_OR_RETURN(config::test_hooks hooks, config::test_hooks_from_environment());
        return spawn_pretrain_driver(ctx, options, run::work_pacer(std::move(hooks)));
      });
  factory.check_plan = check_pretrain_plan;
  factory.describe_plan = describe_pretrain_plan;
  factory.embedded_roles = [](const void* opaque) {
    const auto& o = *static_cast<const pretrain_options*>(opaque);
    return o.data.source.empty() ? std::vector<std::string>{}
                                 : std::vector<std::string>{o.data.source};
  };
  return factory;
}

actor::role_factory gpt_trainer_factory() {
  auto factory = actor::make_role_factory<gpt_trainer_options>(
      "one data-parallel rank of app: pretrain (GPT on the CPU, Gloo collectives)",
      config::object_schema<gpt_trainer_options>(), spawn_gpt_trainer);
  // Its state is the run's: a lost rank fails a fixed group's job, and an elastic group goes on
  // without it. Either way the app's driver, which watches its trainers, decides: it names a
  // fixed rank's place in the grid and the command that resumes the run (the supervisor's own
  // failure, when the membership knew first, would say neither).
  factory.restartable = false;
  factory.app_decides_loss = true;
  return factory;
}

}  // namespace troupe::apps
