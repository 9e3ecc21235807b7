// llama.cpp, prebuilt for this machine's CPU by node-llama-cpp, driven on token ids so that it
// computes exactly what troupe is given. Two commands, each printing one JSON line:
//
//   node llama_cpp.mjs logprobs MODEL.gguf '[ids...]'
//     {"architecture", "vocab", "logprobs": [[...] per position]}: every token's next-token log
//     probability after each prompt position (the test that llama.cpp reads troupe's GGUF as
//     troupe computes it).
//
//   node llama_cpp.mjs tokenize MODEL.gguf TEXT
//     {"ids": [...]}: the text's ids by the GGUF's own vocabulary (no BOS, special tokens as text).
//
//   node llama_cpp.mjs bench MODEL.gguf PROMPTS.json --max-tokens N --concurrency K
//       [--threads T] [--context C]
//     PROMPTS.json: a list of prompts, each a list of token ids. K sequences of one context
//     decode greedily, each taking the next prompt when it ends, every reply exactly N tokens
//     (no stop token), llama.cpp batching the sequences' steps as its server does. Prints
//     vLLM benchmark_serving's figures (ms): ttft, tpot, itl, e2el (mean/p50/p99),
//     request_throughput, output_throughput, and single_stream_decode_tokens_per_s (output
//     tokens after the first over the time after the first, one stream at a time).
import fs from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function fail(message) {
  process.stderr.write(`llama_cpp.mjs: ${message}\n`);
  process.exit(2);
}

// Prints one JSON line, then exits once stdout has taken all of it (a pipe takes a large line in
// pieces; exiting before would cut it).
function emit(value) {
  process.stdout.write(JSON.stringify(value) + "\n", () => process.exit(0));
}

function option(args, name, fallback) {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const v = Number(args[i + 1]);
  if (!Number.isInteger(v) || v < 0) fail(`${name} wants a whole number, not '${args[i + 1]}'`);
  return v;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

function summary(name, values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length);
  return {
    [`mean_${name}_ms`]: mean,
    [`p50_${name}_ms`]: percentile(sorted, 50),
    [`p99_${name}_ms`]: percentile(sorted, 99),
  };
}

async function open(modelPath, threads, sequences, contextSize) {
  if (!fs.existsSync(modelPath)) fail(`${modelPath}: no such file`);
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath });
  const context = await model.createContext({
    sequences,
    contextSize: contextSize * sequences,
    threads: threads > 0 ? { ideal: threads, min: threads } : undefined,
    batchSize: Math.max(512, contextSize),
  });
  return { llama, model, context };
}

async function logprobs(modelPath, ids) {
  const { model, context } = await open(modelPath, 0, 1, Math.max(64, ids.length + 1));
  const sequence = context.getSequence();
  const results = await sequence.controlledEvaluate(
    ids.map((id) => [id, { generateNext: { probabilities: true } }]),
  );
  const rows = results.map((r) => {
    const row = new Array(r.next.probabilities.size).fill(-Infinity);
    for (const [token, p] of r.next.probabilities) row[token] = Math.log(Math.max(p, 1e-45));
    return row;
  });
  return {
    architecture: model.fileInfo.metadata.general.architecture,
    vocab: rows[0]?.length ?? 0,
    logprobs: rows,
  };
}

// One sequence's greedy reply of exactly maxTokens tokens to `prompt`: per-token times (ms from
// the request's start).
async function reply(sequence, prompt, maxTokens) {
  await sequence.clearHistory();
  const start = performance.now();
  const times = [];
  for await (const token of sequence.evaluate(prompt, { temperature: 0 })) {
    times.push(performance.now() - start);
    if (times.length >= maxTokens) break;
  }
  return times;
}

async function bench(modelPath, promptsPath, args) {
  const prompts = JSON.parse(fs.readFileSync(promptsPath, "utf8"));
  if (!Array.isArray(prompts) || prompts.length === 0) fail(`${promptsPath}: no prompts`);
  const maxTokens = option(args, "--max-tokens", 64);
  const concurrency = option(args, "--concurrency", 1);
  const threads = option(args, "--threads", 0);
  const longest = Math.max(...prompts.map((p) => p.length));
  const contextSize = option(args, "--context", longest + maxTokens + 8);
  const { context } = await open(modelPath, threads, concurrency, contextSize);
  const sequences = Array.from({ length: concurrency }, () => context.getSequence());

  const replies = [];
  let next = 0;
  const start = performance.now();
  await Promise.all(
    sequences.map(async (sequence) => {
      while (next < prompts.length) {
        const prompt = prompts[next++];
        replies.push(await reply(sequence, prompt, maxTokens));
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;

  const ttft = replies.map((t) => t[0]);
  const e2el = replies.map((t) => t[t.length - 1]);
  const tpot = replies.filter((t) => t.length > 1).map((t) => (t[t.length - 1] - t[0]) / (t.length - 1));
  const itl = replies.flatMap((t) => t.slice(1).map((x, i) => x - t[i]));
  const output = replies.reduce((n, t) => n + t.length, 0);
  const decodeMs = replies.reduce((ms, t) => ms + (t[t.length - 1] - t[0]), 0);
  const decodeTokens = replies.reduce((n, t) => n + t.length - 1, 0);
  return {
    engine: "llama.cpp",
    concurrency,
    completed: replies.length,
    output_tokens: output,
    duration_s: seconds,
    request_throughput: replies.length / seconds,
    output_throughput: output / seconds,
    single_stream_decode_tokens_per_s: concurrency === 1 ? (1000 * decodeTokens) / decodeMs : null,
    ...summary("ttft", ttft),
    ...summary("tpot", tpot),
    ...summary("itl", itl),
    ...summary("e2el", e2el),
  };
}

const [command, modelPath, third, ...rest] = process.argv.slice(2);
if (command === "logprobs" && modelPath && third) {
  const ids = JSON.parse(third);
  if (!Array.isArray(ids) || ids.length === 0) fail("logprobs wants a JSON list of token ids");
  emit(await logprobs(modelPath, ids));
} else if (command === "tokenize" && modelPath && third !== undefined) {
  const { model } = await open(modelPath, 0, 1, 64);
  emit({ ids: Array.from(model.tokenize(third, false)) });
} else if (command === "bench" && modelPath && third) {
  emit(await bench(modelPath, third, rest));
} else {
  fail("usage: llama_cpp.mjs logprobs MODEL.gguf '[ids]' | tokenize MODEL.gguf TEXT | bench MODEL.gguf PROMPTS.json [--max-tokens N] [--concurrency K] [--threads T]");
}
