#pragma once

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/job_runner.hpp"
#include "runtime/actor/role_registry.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/plugin/plugin_loader.hpp"
#include "runtime/run/run_dir.hpp"

namespace troupe::cli {

/// Prints "COMMAND: MESSAGE" on stderr and returns `code`: how a command reports why it stopped.
inline int fail(const char* command, int code, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", command, message.c_str());
  return code;
}

/// troupe's exit codes.
enum exit_code : int {
  exit_ok = 0,
  exit_runtime_failure = 1,
  exit_usage_error = 2,  // bad arguments or a bad config
  exit_interrupted = 130,
};

/// Arguments shared by the commands that read a config.
struct config_args {
  std::string config;
  std::vector<std::string> overrides;
  std::vector<std::string> plugin_dirs;
  /// When set, the config itself (a command that writes one), with `config` as its name.
  std::string config_text;
};

struct launch_args : config_args {
  std::optional<std::string> run_dir;
  /// A run directory to continue from: sets the app's `resume` option.
  std::optional<std::string> resume;
  /// Under srun: task 0 runs the head and the app, the others join it (slurm_launch.cpp).
  bool slurm = false;
};

/// `troupe launch`: validate, run the app, print one JSON summary line on stdout.
[[nodiscard]] int launch_command(const launch_args& args);

/// Chooses the cluster a job runs on once its run directory exists (nullopt: one process).
using cluster_setup = std::function<std::optional<apps::cluster_options>(const run::run_dir&)>;

/// Runs a validated plan: run directory, event log, progress on stderr, the JSON summary line on
/// stdout. Returns the exit code.
[[nodiscard]] int run_job(const app::app_plan& plan, const std::string& config_name,
                          const std::optional<std::string>& run_dir, const cluster_setup& cluster);

/// Arguments of `troupe serve MODEL_DIR`, vLLM's flags where it has them.
struct serve_args {
  std::string model;  ///< a Hugging Face model directory
  std::string host = "127.0.0.1";
  int port = 8000;
  std::optional<int> max_model_len;
  std::optional<std::string> served_model_name;  ///< default: MODEL_DIR as given
  int workers = 1;                               ///< inference worker processes
  std::optional<std::string> quantization;       ///< serve.engine.quantization
  /// vLLM's --speculative-config: a JSON object, serve.engine.speculative_config.
  std::optional<std::string> speculative_config;
  std::optional<std::string> run_dir;
  std::vector<std::string> overrides;
  std::vector<std::string> plugin_dirs;
};

/// `troupe serve MODEL_DIR`: app: serve of the model in MODEL_DIR (model.path), behind the
/// OpenAI-compatible API; the config it runs is configs/serve_tiny.yaml's with these settings.
[[nodiscard]] int serve_command(const serve_args& args);

/// `troupe check`: validate only.
[[nodiscard]] int check_command(const config_args& args);

/// `troupe plugins list`: every role, built-in or from the plugins found.
[[nodiscard]] int plugins_list_command(const std::vector<std::string>& plugin_dirs, bool json);

/// `troupe plugins new NAME --kind stage|reward|source [--dir DIR]`: writes DIR/NAME, a plugin
/// project built against the installed SDK, with its own test (apps/cli/plugin_project.hpp).
struct plugins_new_args {
  std::string name;
  std::string kind = "stage";
  std::string dir = ".";
};
[[nodiscard]] int plugins_new_command(const plugins_new_args& args);

/// `troupe version`.
[[nodiscard]] int version_command(bool json);

struct head_args {
  /// Where to listen; unset: with --config, its cluster.listen when the config sets one, else
  /// tcp://127.0.0.1:7070.
  std::optional<std::string> listen;
  std::string token;
  std::string keys;  ///< CURVE keys directory (else TROUPE_KEYS)
  /// Without a config: where the head serves HTTP (cluster.http), and its bearer token.
  std::string http = "127.0.0.1:0";
  std::string http_token;
  /// With a config, the head runs that app on the workers that join.
  std::optional<config_args> app;
  std::optional<std::string> run_dir;
};

/// `troupe head`: serve a cluster (and run an app on it, with --config).
[[nodiscard]] int head_command(const head_args& args);

struct worker_args {
  std::string join = "tcp://127.0.0.1:7070";
  std::string token;
  std::string keys;  ///< CURVE keys directory (else TROUPE_KEYS)
  std::string bind_host = "127.0.0.1";
  std::string resources;
  std::vector<std::string> plugin_dirs;
  /// `--slurm-job JOB`: join the running job JOB of `troupe launch --slurm`, found through its
  /// rendezvous file in SLURM_SUBMIT_DIR (else this directory), instead of --join.
  std::string slurm_job;
  /// Ignore SIGINT and SIGTERM, and stop only with the head (a Slurm task: scancel signals the
  /// head and its workers at once, and the head must be able to finish its stop).
  bool stop_with_head = false;
};

/// `troupe worker`: join a cluster and host the actors the head places here.
[[nodiscard]] int worker_command(const worker_args& args);

/// `troupe launch CONFIG --slurm` (slurm_launch.cpp, docs/launch.md#slurm).
[[nodiscard]] int slurm_launch_command(const launch_args& args);

/// Joins the job whose head's task wrote `rendezvous_path`, waiting up to `wait` for it, as
/// `worker` (its join, token and bind address come from the file).
[[nodiscard]] int join_slurm_job(const std::string& rendezvous_path, std::chrono::seconds wait,
                                 worker_args worker);

struct status_args {
  std::string head = "tcp://127.0.0.1:7070";
  std::string token;
  std::string keys;  ///< CURVE keys directory (else TROUPE_KEYS)
  bool json = false;
};

/// `troupe status`: the members of a cluster, their actors and heartbeats.
[[nodiscard]] int status_command(const status_args& args);

struct top_args {
  std::string head;     ///< the head's HTTP URL or HOST:PORT; empty: from the run directory
  std::string run_dir;  ///< a job's run directory (its head_http_url); empty: the newest in runs/
  std::string token;    ///< the head's bearer token (else TROUPE_HTTP_TOKEN)
  bool once = false;
};

/// `troupe top`: the members, the job's key figures and the busiest actors, from the head's
/// HTTP endpoints, redrawn every second (`q` quits), or printed once with --once.
[[nodiscard]] int top_command(const top_args& args);

struct export_args {
  std::string run_dir;  ///< a run directory, or (--format gguf) a Hugging Face model directory
  std::string format = "safetensors";  ///< or gguf
  std::string outtype = "f32";         ///< gguf: f32, f16, bf16 or q8_0
  std::string out;
  /// A committed step; by default the newest checkpoint that reads cleanly.
  std::optional<int64_t> step;
};

/// `troupe export`: a run's checkpoint as Hugging Face weights (model.safetensors, config.json,
/// its tokenizer) in the directory `out`; or, with --format gguf, a run or a Hugging Face model
/// as the one GGUF file `out` that llama.cpp loads (models/gguf).
[[nodiscard]] int export_command(const export_args& args);

/// `troupe quantize MODEL_DIR --bits 8|4 --out DIR`: the Hugging Face model's block weights
/// quantized (symmetric, rounded to nearest) and written as a GPTQ checkpoint, which troupe serve,
/// transformers and vLLM load; its tokenizer files copied beside it.
struct quantize_args {
  std::string model;
  int bits = 8;
  int group_size = 0;  ///< 0: int8 one scale per output channel, int4 128
  std::string out;
};
[[nodiscard]] int quantize_command(const quantize_args& args);

/// Arguments of `troupe tokenizer train`.
struct tokenizer_train_args {
  std::string corpus;  ///< a text file, or a directory of them (the fortunes package's layout)
  std::string out;
  int vocab_size = 4096;
  int min_frequency = 2;
  std::vector<std::string> special_tokens = {"<|endoftext|>"};
  std::string eos_token;      ///< one of special_tokens; empty: the first
  std::string chat_template;  ///< a Jinja file; empty: none
};

/// `troupe tokenizer train CORPUS --vocab-size N --out DIR`: a byte-level BPE trained on the
/// corpus, written as DIR/tokenizer.json (Hugging Face's format) and DIR/tokenizer_config.json
/// (the eos token, and the chat template when given, checked to end a reply with the eos token).
[[nodiscard]] int tokenizer_train_command(const tokenizer_train_args& args);

/// `troupe data sft CONFIG`: supervised examples of an RLHF config's task (rlhf.task), one JSON
/// line {"prompt", "response"} each, for pretrain.data.format sft.
struct data_args : config_args {
  int64_t examples = 10000;
  uint64_t seed = 1;
  std::string out;
};
[[nodiscard]] int data_sft_command(const data_args& args);

/// `troupe data preferences CONFIG --policy DIR`: preference pairs of an RLHF config's task for
/// app: reward_model and DPO, one JSON line {"prompt", "chosen", "rejected"} each. For each of
/// `examples` prompts (of the stream `seed`), `samples` responses sampled from the policy
/// checkpoint at `temperature`, scored by the task's rule; its best and its worst make the pair
/// (a tie, none). `held_out` (when set) gets the pairs of the next `held_out_prompts` prompts.
struct preferences_args : data_args {
  std::string policy;
  int samples = 4;
  double temperature = 1.0;
  std::string held_out;
  int64_t held_out_prompts = 0;
  /// The rejected response: the worst, or one of those scored below the best at random.
  std::string rejected = "worst";
};
[[nodiscard]] int data_preferences_command(const preferences_args& args);

/// `troupe eval CONFIG --policy DIR`: the policy checkpoint's greedy response to each of
/// `examples` prompts of an RLHF config's task (prompts [first, first + examples) of the stream
/// `seed`: `troupe data preferences`' held-out ones follow its --prompts), scored by the task's
/// rule; prints their mean score. `out` (when set) gets each prompt, response and score.
struct eval_args : data_args {
  std::string policy;
  int64_t first = 0;
  /// With a text file: `troupe eval MODEL_DIR --text FILE` scores the Hugging Face model's
  /// perplexity on it instead, in f32 and with each of `quantizations` ("int8", "int4") of its
  /// block weights (eval_perplexity.cpp).
  std::string text;
  std::vector<std::string> quantizations = {"int8", "int4"};
  int group_size = 0;
  int window = 0;          ///< 0: the model's context, at most 1024
  int64_t max_tokens = 0;  ///< 0: the whole text
};
[[nodiscard]] int eval_command(const eval_args& args);
/// `troupe eval MODEL_DIR --text FILE`: eval_args' perplexity mode, one JSON line.
[[nodiscard]] int eval_perplexity_command(const eval_args& args);

/// The token a cluster uses: the config's, else TROUPE_CLUSTER_TOKEN, else a fresh random one.
[[nodiscard]] std::string cluster_token(const config::cluster_spec& spec);

/// The token to present to the head at `endpoint`: `given`, else TROUPE_CLUSTER_TOKEN, else the
/// one a head on this machine recorded.
[[nodiscard]] std::string token_for(const std::string& endpoint, const std::string& given);

/// A head's credentials: the token, and under `cluster.auth: curve` (or with `keys_flag`) the
/// keypair from `keys_flag`, else cluster.keys, else TROUPE_KEYS.
[[nodiscard]] absl::StatusOr<cluster::cluster_credentials> head_credentials(
    const config::cluster_spec& spec, const std::string& keys_flag);

/// A client's credentials for the head at `endpoint`: token_for, and the keypair in `keys_flag`
/// or TROUPE_KEYS when either is set.
[[nodiscard]] absl::StatusOr<cluster::cluster_credentials> client_credentials(
    const std::string& endpoint, const std::string& token, const std::string& keys_flag);

struct keys_args {
  std::string out;
};

/// `troupe keys generate --out DIR`: a CURVE keypair for a cluster (docs/security.md).
[[nodiscard]] int keys_generate_command(const keys_args& args);

/// The role registry with troupe's built-ins and a plugin loader searching the default
/// directories (`plugins/` next to the binary, then TROUPE_PLUGIN_PATH), then `extra_dirs`.
struct roles_and_plugins {
  explicit roles_and_plugins(const std::vector<std::string>& extra_dirs);

  /// Loads and validates `args.config` with its overrides; errors are config errors (exit 2).
  [[nodiscard]] absl::StatusOr<app::app_plan> load(const config_args& args);

  actor::role_registry registry;
  plugin::plugin_loader plugins;
};

/// The plan `troupe launch` runs: the config, with `--resume DIR` as the app's `resume` option
/// for apps that have one.
[[nodiscard]] absl::StatusOr<app::app_plan> load_launch_plan(roles_and_plugins& env,
                                                             const launch_args& args);

}  // namespace troupe::cli
