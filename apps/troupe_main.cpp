// The troupe command line: launch apps from YAML configs, validate configs, list plugins.

#include <csignal>
#include <cstdio>

#include "CLI/CLI.hpp"
#include "apps/cli/commands.hpp"

int main(int argc, char** argv) {
  using namespace troupe::cli;
  // A write to a dead peer's socket must be an error, not the end of this process: Gloo writes
  // with writev and no MSG_NOSIGNAL (docs/elastic.md).
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"troupe: an actor runtime for pretraining, RLHF and serving"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");

  launch_args launch;
  auto* launch_cmd = app.add_subcommand("launch", "Run an app from a YAML config");
  launch_cmd->add_option("config", launch.config, "App config (YAML)")->required();
  launch_cmd->add_option("--set", launch.overrides, "Override a config value: key.path=value");
  launch_cmd->add_option("--run-dir", launch.run_dir,
                         "Run directory (default: runs/<app>-<date>-<time>)");
  launch_cmd->add_option("--plugin-dir", launch.plugin_dirs, "Extra plugin directory");
  launch_cmd->add_option("--resume", launch.resume,
                         "Continue from a run directory's newest good checkpoint (pretrain)");
  launch_cmd->add_flag("--slurm", launch.slurm,
                       "Under srun: task 0 runs the head and the app, the other tasks join it as "
                       "workers (docs/launch.md)");

  serve_args serve;
  auto* serve_cmd = app.add_subcommand(
      "serve", "Serve a Hugging Face model directory over the OpenAI-compatible API (app: serve)");
  serve_cmd
      ->add_option("model", serve.model,
                   "The model directory (config.json, safetensors, "
                   "tokenizer.json)")
      ->required();
  serve_cmd->add_option("--host", serve.host, "The address to listen on")->capture_default_str();
  serve_cmd->add_option("--port", serve.port, "The port (0 picks a free one)")
      ->capture_default_str();
  serve_cmd->add_option("--max-model-len", serve.max_model_len,
                        "The context served, prompt and output (default: the model's)");
  serve_cmd->add_option("--served-model-name", serve.served_model_name,
                        "The name clients ask for (default: the directory as given)");
  serve_cmd->add_option("--workers", serve.workers, "Inference worker processes")
      ->capture_default_str();
  serve_cmd
      ->add_option("--quantization", serve.quantization,
                   "Weight-only quantization of the block weights on the CPU: int8 or int4 "
                   "(serve.engine.quantization)")
      ->check(CLI::IsMember({"none", "int8", "int4"}));
  serve_cmd->add_option("--speculative-config", serve.speculative_config,
                        "Speculative decoding, as vLLM's flag: a JSON object such as "
                        "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
                        "\"prompt_lookup_max\": 4}' (serve.engine.speculative_config)");
  serve_cmd->add_option("--set", serve.overrides,
                        "Override a setting of the config it runs: key.path=value");
  serve_cmd->add_option("--run-dir", serve.run_dir,
                        "Run directory (default: runs/serve-<date>-<time>)");
  serve_cmd->add_option("--plugin-dir", serve.plugin_dirs, "Extra plugin directory");

  config_args check;
  auto* check_cmd = app.add_subcommand("check", "Validate a config without running it");
  check_cmd->add_option("config", check.config, "App config (YAML)")->required();
  check_cmd->add_option("--set", check.overrides, "Override a config value: key.path=value");
  check_cmd->add_option("--plugin-dir", check.plugin_dirs, "Extra plugin directory");

  std::vector<std::string> plugin_dirs;
  bool plugins_json = false;
  auto* plugins_cmd = app.add_subcommand("plugins", "Inspect plugins");
  plugins_cmd->require_subcommand(1);
  auto* list_cmd = plugins_cmd->add_subcommand("list", "List plugins and every role they add");
  list_cmd->add_option("--plugin-dir", plugin_dirs, "Extra plugin directory");
  list_cmd->add_flag("--json", plugins_json, "Print JSON");
  plugins_new_args plugin_project;
  auto* new_cmd = plugins_cmd->add_subcommand(
      "new", "Write a plugin project that builds against the installed troupe");
  new_cmd->add_option("name", plugin_project.name, "The plugin's (and its role's) name")
      ->required();
  new_cmd->add_option("--kind", plugin_project.kind, "stage, reward or source (default stage)");
  new_cmd->add_option("--dir", plugin_project.dir,
                      "Where the project's directory goes (default: the current one)");

  export_args export_run;
  quantize_args quantize;
  auto* quantize_cmd = app.add_subcommand(
      "quantize",
      "Quantize a Hugging Face model's block weights to int8 or int4 and write a GPTQ checkpoint");
  quantize_cmd
      ->add_option("model", quantize.model, "The model directory (config.json, safetensors)")
      ->required();
  quantize_cmd->add_option("--bits", quantize.bits, "8 or 4")
      ->check(CLI::IsMember({8, 4}))
      ->capture_default_str();
  quantize_cmd->add_option("--group-size", quantize.group_size,
                           "Inputs per scale, dividing every layer's inputs (0: int8 one per "
                           "output channel, int4 128)");
  quantize_cmd->add_option("--out", quantize.out, "The GPTQ checkpoint's directory")->required();

  auto* export_cmd =
      app.add_subcommand("export",
                         "Write a run's checkpoint as Hugging Face weights, or a run or a Hugging "
                         "Face model as a GGUF file for llama.cpp");
  export_cmd
      ->add_option("run_dir", export_run.run_dir,
                   "A run directory (its checkpoints/); with --format gguf also a Hugging Face "
                   "model directory")
      ->required();
  export_cmd
      ->add_option("--format", export_run.format,
                   "safetensors (a Hugging Face directory) or gguf (one file)")
      ->capture_default_str();
  export_cmd
      ->add_option("--outtype", export_run.outtype,
                   "gguf: the weight matrices' type, f32, f16, bf16 or q8_0 (norms stay f32)")
      ->capture_default_str();
  export_cmd->add_option("--out", export_run.out, "Output directory (gguf: the file)")->required();
  export_cmd->add_option("--step", export_run.step,
                         "Checkpoint step (default: the newest that reads cleanly)");

  tokenizer_train_args tokenizer_train;
  auto* tokenizer_cmd = app.add_subcommand("tokenizer", "Make tokenizers");
  tokenizer_cmd->require_subcommand(1);
  auto* tokenizer_train_cmd = tokenizer_cmd->add_subcommand(
      "train", "Train a byte-level BPE on a text corpus; write a Hugging Face tokenizer.json");
  tokenizer_train_cmd
      ->add_option("corpus", tokenizer_train.corpus,
                   "A text file, or a directory of them (records split at lines of '%')")
      ->required();
  tokenizer_train_cmd->add_option("--vocab-size", tokenizer_train.vocab_size, "Ids in all")
      ->capture_default_str();
  tokenizer_train_cmd
      ->add_option("--min-frequency", tokenizer_train.min_frequency,
                   "Merge only pairs seen at least this often")
      ->capture_default_str();
  tokenizer_train_cmd->add_option("--special", tokenizer_train.special_tokens,
                                  "Special tokens, given the first ids (default <|endoftext|>)");
  tokenizer_train_cmd->add_option(
      "--eos", tokenizer_train.eos_token,
      "The end-of-sequence token, one of --special (default the first): where a reply ends");
  tokenizer_train_cmd->add_option(
      "--chat-template", tokenizer_train.chat_template,
      "A Jinja chat template file, written into tokenizer_config.json (e.g. "
      "configs/chat/chatml.jinja)");
  tokenizer_train_cmd->add_option("--out", tokenizer_train.out, "Output directory")->required();

  data_args data;
  auto* data_cmd = app.add_subcommand("data", "Write data sets the apps train on");
  data_cmd->require_subcommand(1);
  auto* data_sft_cmd = data_cmd->add_subcommand(
      "sft", "Supervised examples (JSONL prompt/response) of an RLHF config's task");
  data_sft_cmd->add_option("config", data.config, "An RLHF config: its rlhf.task")->required();
  data_sft_cmd->add_option("--set", data.overrides, "Override a config value: key.path=value");
  data_sft_cmd->add_option("--examples", data.examples, "How many")->capture_default_str();
  data_sft_cmd->add_option("--seed", data.seed, "The examples' stream")->capture_default_str();
  data_sft_cmd->add_option("--out", data.out, "The JSONL file to write")->required();
  preferences_args prefs;
  prefs.seed = 7;  // a prompt stream of its own (the RL prompts' is rlhf.data.seed)
  auto* data_prefs_cmd = data_cmd->add_subcommand(
      "preferences",
      "Preference pairs (JSONL prompt/chosen/rejected) of an RLHF config's task, sampled from a "
      "policy and ranked by the task's rule");
  data_prefs_cmd->add_option("config", prefs.config, "An RLHF config: its rlhf.task and model")
      ->required();
  data_prefs_cmd->add_option("--set", prefs.overrides, "Override a config value: key.path=value");
  data_prefs_cmd->add_option("--policy", prefs.policy, "The policy: a run or checkpoint directory")
      ->required();
  data_prefs_cmd->add_option("--prompts", prefs.examples, "Prompts, one pair each at most")
      ->capture_default_str();
  data_prefs_cmd->add_option("--samples", prefs.samples, "Responses sampled per prompt")
      ->capture_default_str();
  data_prefs_cmd->add_option("--temperature", prefs.temperature, "Sampling temperature")
      ->capture_default_str();
  data_prefs_cmd->add_option("--seed", prefs.seed, "The prompts' stream")->capture_default_str();
  data_prefs_cmd->add_option("--out", prefs.out, "The JSONL file to write")->required();
  data_prefs_cmd->add_option("--held-out", prefs.held_out,
                             "A JSONL file for the pairs of the next --held-out-prompts prompts");
  data_prefs_cmd
      ->add_option("--rejected", prefs.rejected,
                   "The rejected response: worst, or random (one scored below the best)")
      ->capture_default_str();
  data_prefs_cmd
      ->add_option("--held-out-prompts", prefs.held_out_prompts,
                   "Prompts after --prompts' for --held-out")
      ->capture_default_str();

  eval_args evaluation;
  evaluation.seed = 7;  // troupe data preferences' prompt stream
  evaluation.examples = 500;
  auto* eval_cmd = app.add_subcommand(
      "eval",
      "Score a policy's greedy responses to an RLHF config's task prompts by its rule; with "
      "--text, a Hugging Face model's perplexity on a text, in f32 and with quantized weights");
  eval_cmd
      ->add_option("config", evaluation.config,
                   "An RLHF config: its rlhf.task and model; with --text, a Hugging Face model "
                   "directory")
      ->required();
  eval_cmd->add_option("--set", evaluation.overrides, "Override a config value: key.path=value");
  eval_cmd->add_option("--policy", evaluation.policy,
                       "The policy: a run or checkpoint directory (needed without --text)");
  eval_cmd->add_option("--prompts", evaluation.examples, "How many prompts")->capture_default_str();
  eval_cmd
      ->add_option("--first", evaluation.first,
                   "The first prompt's index in the stream (troupe data preferences' held-out "
                   "prompts start at its --prompts)")
      ->capture_default_str();
  eval_cmd->add_option("--seed", evaluation.seed, "The prompts' stream")->capture_default_str();
  eval_cmd->add_option("--out", evaluation.out, "A JSONL file for each prompt, response and score");
  eval_cmd->add_option("--text", evaluation.text,
                       "A text file: score the model's perplexity on it (held-out text)");
  eval_cmd
      ->add_option("--quantization", evaluation.quantizations,
                   "With --text: the weight quantizations to score besides f32: int8, int4, "
                   "or none")
      ->capture_default_str();
  eval_cmd->add_option("--group-size", evaluation.group_size,
                       "With --text: inputs per quantization scale (0: int8 per output channel, "
                       "int4 128), as serve.engine.quantization_group_size");
  eval_cmd->add_option("--window", evaluation.window,
                       "With --text: tokens per scored window (0: the model's context, at most "
                       "1024)");
  eval_cmd->add_option("--max-tokens", evaluation.max_tokens,
                       "With --text: score at most this many of its first tokens (0: all)");

  bool version_json = false;
  auto* version_cmd = app.add_subcommand("version", "Show versions and CUDA devices");
  version_cmd->add_flag("--json", version_json, "Print JSON");

  head_args head;
  config_args head_app;
  auto* head_cmd = app.add_subcommand("head", "Serve a cluster that workers join");
  head_cmd->add_option("--listen", head.listen,
                       "Endpoint to listen on (default: with --config, its cluster.listen when "
                       "it sets one, else tcp://127.0.0.1:7070)");
  head_cmd->add_option("--token", head.token,
                       "Secret workers need (default: TROUPE_CLUSTER_TOKEN or a random one)");
  head_cmd->add_option("--keys", head.keys,
                       "Use CURVE with the keys `troupe keys generate` wrote here (default: "
                       "cluster.keys, then TROUPE_KEYS, when cluster.auth is curve)");
  head_cmd
      ->add_option("--http", head.http,
                   "Without --config: where to serve /metrics, /api/* and the dashboard "
                   "(HOST:PORT, port 0 picks one; off: none); with it, cluster.http")
      ->capture_default_str();
  head_cmd->add_option("--http-token", head.http_token,
                       "Without --config: the bearer token the HTTP endpoints ask for");
  head_cmd->add_option("--config", head_app.config, "Run this app on the workers that join");
  head_cmd->add_option("--set", head_app.overrides, "With --config: override a config value");
  head_cmd->add_option("--run-dir", head.run_dir, "With --config: the run directory");
  head_cmd->add_option("--plugin-dir", head_app.plugin_dirs, "Extra plugin directory");

  worker_args worker;
  auto* worker_cmd = app.add_subcommand("worker", "Join a cluster and host actors");
  worker_cmd->add_option("--join", worker.join, "The head's endpoint")->capture_default_str();
  worker_cmd->add_option("--token", worker.token,
                         "The cluster's secret (default: TROUPE_CLUSTER_TOKEN, or the one a head "
                         "on this machine recorded)");
  worker_cmd->add_option("--keys", worker.keys,
                         "The cluster's CURVE keys directory (default: TROUPE_KEYS; needed when "
                         "the head uses cluster.auth: curve)");
  worker_cmd->add_option("--bind", worker.bind_host, "Address peers reach this worker at")
      ->capture_default_str();
  worker_cmd->add_option("--resources", worker.resources,
                         "What this worker offers, e.g. cores=8,memory=32G,gpus=1 "
                         "(default: this machine's cores and memory, no GPUs)");
  worker_cmd->add_option("--plugin-dir", worker.plugin_dirs, "Extra plugin directory");
  worker_cmd->add_option("--slurm-job", worker.slurm_job,
                         "Join the running `troupe launch --slurm` job JOB (its rendezvous file "
                         "in SLURM_SUBMIT_DIR, else here) instead of --join");

  status_args status;
  auto* status_cmd = app.add_subcommand("status", "Show a cluster's members and actors");
  status_cmd->add_option("--head", status.head, "The head's endpoint")->capture_default_str();
  status_cmd->add_option("--token", status.token, "The cluster's secret");
  status_cmd->add_option("--keys", status.keys,
                         "The cluster's CURVE keys directory (default: TROUPE_KEYS)");
  status_cmd->add_flag("--json", status.json, "Print JSON");

  top_args top;
  auto* top_cmd =
      app.add_subcommand("top", "Watch a job: members, key figures and busiest actors, live");
  top_cmd->add_option("run_dir", top.run_dir,
                      "The job's run directory (default: the newest under runs/ with a head)");
  top_cmd->add_option("--head", top.head, "The head's HTTP address (HOST:PORT or URL)");
  top_cmd->add_option("--token", top.token,
                      "The head's bearer token (cluster.http_token; default TROUPE_HTTP_TOKEN)");
  top_cmd->add_flag("--once", top.once, "Print the picture once and exit");

  keys_args keys;
  auto* keys_cmd = app.add_subcommand("keys", "Make the keys of a CURVE cluster");
  keys_cmd->require_subcommand(1);
  auto* keys_generate_cmd = keys_cmd->add_subcommand(
      "generate", "Write a cluster's CURVE keypair (cluster.auth: curve; docs/security.md)");
  keys_generate_cmd->add_option("--out", keys.out, "The directory to write the keys into")
      ->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? exit_ok : exit_usage_error;
  }

  if (*launch_cmd) return launch_command(launch);
  if (*serve_cmd) return serve_command(serve);
  if (*check_cmd) return check_command(check);
  if (*list_cmd) return plugins_list_command(plugin_dirs, plugins_json);
  if (*new_cmd) return plugins_new_command(plugin_project);
  if (*version_cmd) return version_command(version_json);
  if (*data_sft_cmd) return data_sft_command(data);
  if (*data_prefs_cmd) return data_preferences_command(prefs);
  if (*eval_cmd) return eval_command(evaluation);
  if (*export_cmd) return export_command(export_run);
  if (*quantize_cmd) return quantize_command(quantize);
  if (*tokenizer_train_cmd) return tokenizer_train_command(tokenizer_train);
  if (*head_cmd) {
    if (!head_app.config.empty()) head.app = head_app;
    return head_command(head);
  }
  if (*worker_cmd) return worker_command(worker);
  if (*status_cmd) return status_command(status);
  if (*top_cmd) return top_command(top);
  if (*keys_generate_cmd) return keys_generate_command(keys);
  return exit_usage_error;
}
