// The official OpenAI Node client against a troupe serve job, unchanged: models, completions and
// chat, whole and streamed, and an error. Prints one JSON line of what it saw.
//   node check.mjs PORT
import OpenAI from "openai";

const client = new OpenAI({ baseURL: `http://127.0.0.1:${process.argv[2]}/v1`, apiKey: "unused" });
const out = {};
out.models = (await client.models.list()).data.map((m) => m.id);
const c = await client.completions.create({ model: "troupe-tiny", prompt: "Hello", max_tokens: 12, seed: 1 });
out.completion_tokens = c.usage.completion_tokens;
out.completion_finish = c.choices[0].finish_reason;
const chat = await client.chat.completions.create({
  model: "troupe-tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 6 });
out.chat_role = chat.choices[0].message.role;
let streamed = 0;
let finish = null;
for await (const part of await client.completions.create({
  model: "troupe-tiny", prompt: "Once", max_tokens: 10, stream: true })) {
  streamed += 1;
  finish = part.choices[0].finish_reason ?? finish;
}
out.stream_chunks = streamed;
out.stream_finish = finish;
let chatChunks = 0;
for await (const part of await client.chat.completions.create({
  model: "troupe-tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 5, stream: true })) {
  if (part.object === "chat.completion.chunk") chatChunks += 1;
}
out.chat_stream_chunks = chatChunks;
// n choices with log-probs and their top alternatives.
const many = await client.completions.create({
  model: "troupe-tiny", prompt: "Hello", max_tokens: 5, n: 3, logprobs: 2, seed: 7 });
out.n_choices = many.choices.map((c) => c.index);
out.n_distinct = new Set(many.choices.map((c) => c.text)).size;
out.completion_logprobs = many.choices[0].logprobs.token_logprobs.length;
out.completion_top = Object.keys(many.choices[0].logprobs.top_logprobs[0]).length;
out.logprobs_negative = many.choices.every((c) => c.logprobs.token_logprobs.every((v) => v <= 0));
const chatLp = await client.chat.completions.create({
  model: "troupe-tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 4, n: 2,
  logprobs: true, top_logprobs: 3 });
out.chat_choices = chatLp.choices.length;
out.chat_logprobs = chatLp.choices[0].logprobs.content.length;
out.chat_top = chatLp.choices[0].logprobs.content[0].top_logprobs.length;
let streamedChoices = new Set();
for await (const part of await client.completions.create({
  model: "troupe-tiny", prompt: "Once", max_tokens: 4, n: 2, stream: true })) {
  for (const c of part.choices) streamedChoices.add(c.index);
}
out.stream_choices = [...streamedChoices].sort();
try {
  await client.completions.create({ model: "nope", prompt: "x" });
} catch (e) {
  out.error_status = e.status;
  out.error_code = e.code;
}
console.log(JSON.stringify(out));
