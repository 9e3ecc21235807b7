// The official OpenAI Node client against a troupe serve job, unchanged: models, completions and
// chat, whole and streamed, each sampling and streaming field troupe reads, and errors. Prints
// one JSON line of what it saw.
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
// The rest of the API: logit_bias (token 65 is "A" in the byte vocabulary), penalties,
// min_tokens, seed 0, batched prompts with echo, content parts and stream usage.
const biased = await client.completions.create({
  model: "troupe-tiny", prompt: "Hello", max_tokens: 5, temperature: 0,
  logit_bias: { "65": 100 } });
out.biased_text = biased.choices[0].text;
const penalized = await client.completions.create({
  model: "troupe-tiny", prompt: "Hello", max_tokens: 6, frequency_penalty: 1.5,
  presence_penalty: 0.5, repetition_penalty: 1.3, min_tokens: 2 });
out.penalized_tokens = penalized.usage.completion_tokens;
const zero = async () => (await client.completions.create({
  model: "troupe-tiny", prompt: "Hello", max_tokens: 8, seed: 0 })).choices[0].text;
out.seed_zero_repeats = (await zero()) === (await zero());
const batch = await client.completions.create({
  model: "troupe-tiny", prompt: ["Hello", "Once"], max_tokens: 3, n: 2, echo: true, seed: 4 });
out.batch_choices = batch.choices.map((c) => c.index);
out.batch_echo = batch.choices.map((c) => c.text.startsWith(c.index < 2 ? "Hello" : "Once"));
out.batch_prompt_tokens = batch.usage.prompt_tokens;
const parts = await client.chat.completions.create({
  model: "troupe-tiny", max_completion_tokens: 3,
  messages: [{ role: "user", content: [{ type: "text", text: "Hi" }, { type: "text", text: "you" }] }] });
out.parts_finish = parts.choices[0].finish_reason;
let usage = null;
let emptyChoices = 0;
for await (const part of await client.chat.completions.create({
  model: "troupe-tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 4, stream: true,
  stream_options: { include_usage: true } })) {
  if (part.usage) usage = part.usage;
  if (part.choices.length === 0) emptyChoices += 1;
}
out.stream_usage = usage;
out.stream_usage_chunks = emptyChoices;
// Structured output: whatever the random model prefers, the text parses and fits the schema
// (schemas small enough for the tiny model's 64-token context).
const schema = {
  type: "object", required: ["city", "sunny"],
  properties: { city: { type: "string", maxLength: 3 }, sunny: { type: "boolean" } } };
out.structured = [];
for (const seed of [1, 2, 3]) {
  const r = await client.completions.create({
    model: "troupe-tiny", prompt: "W", max_tokens: 60, seed,
    response_format: { type: "json_schema", json_schema: { name: "weather", schema } } });
  const value = JSON.parse(r.choices[0].text);
  out.structured.push(typeof value.city === "string" && [...value.city].length <= 3 &&
    typeof value.sunny === "boolean" && r.choices[0].finish_reason === "stop");
}
const chatStructured = await client.chat.completions.create({
  model: "troupe-tiny", messages: [{ role: "user", content: "Ok?" }], max_tokens: 20,
  response_format: { type: "json_schema", json_schema: { name: "answer", schema: {
    type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] } } } });
out.chat_structured = typeof JSON.parse(chatStructured.choices[0].message.content).ok;
const object = await client.completions.create({
  model: "troupe-tiny", prompt: "{", max_tokens: 40, temperature: 0,
  response_format: { type: "json_object" } });
out.json_object_finish = object.choices[0].finish_reason;
out.json_object_text = object.choices[0].text;
// Tools: a named tool_choice makes the reply that function's arguments, whole and streamed;
// "auto" returns what the random model wrote (no <tool_call> block) as content.
const tools = [{ type: "function", function: { name: "set_light", description: "a lamp",
  parameters: { type: "object", required: ["on"], properties: { on: { type: "boolean" } } } } }];
const forced = await client.chat.completions.create({
  model: "troupe-tiny", messages: [{ role: "user", content: "Lamp" }], max_tokens: 16, tools,
  tool_choice: { type: "function", function: { name: "set_light" } } });
const call = forced.choices[0].message.tool_calls[0];
out.forced_call = [call.type, call.function.name, typeof JSON.parse(call.function.arguments).on,
                   call.id.startsWith("call_")];
// Streamed as OpenAI streams a call: announced (id, name) first, then its arguments in pieces,
// which the client joins.
const streamedCall = { index: null, id: null, name: null, arguments: "", finish: null };
for await (const part of await client.chat.completions.create({
  model: "troupe-tiny", messages: [{ role: "user", content: "Lamp" }], max_tokens: 16, tools,
  tool_choice: { type: "function", function: { name: "set_light" } }, stream: true })) {
  for (const c of part.choices[0]?.delta?.tool_calls ?? []) {
    streamedCall.index = c.index;
    streamedCall.id ??= c.id;
    streamedCall.name ??= c.function?.name;
    streamedCall.arguments += c.function?.arguments ?? "";
  }
  streamedCall.finish ??= part.choices[0]?.finish_reason;
}
out.streamed_call = [streamedCall.index, streamedCall.name,
                     typeof JSON.parse(streamedCall.arguments).on,
                     streamedCall.id.startsWith("call_"), streamedCall.finish];
const free = await client.chat.completions.create({
  model: "troupe-tiny", messages: [{ role: "user", content: "Lamp" }], max_tokens: 4, tools });
out.auto_reply = [typeof free.choices[0].message.content, free.choices[0].message.tool_calls ?? null];
// "required": a call of the tools, whatever the random model would rather say (one, by
// parallel_tool_calls: false, so that the list ends).
const required = await client.chat.completions.create({
  model: "troupe-tiny", messages: [{ role: "user", content: "Hi" }], tools, max_tokens: 64,
  tool_choice: "required", parallel_tool_calls: false });
const first = required.choices[0].message.tool_calls?.[0];
out.required_call = [required.choices[0].finish_reason, first?.function.name,
                     typeof JSON.parse(first?.function.arguments ?? "{}").on];
// Streamed, through the client's own helper that rebuilds the message from the deltas (and
// needs each choice's role): each call of the list as soon as its element closes.
const requiredStream = await client.beta.chat.completions.stream({
  model: "troupe-tiny", messages: [{ role: "user", content: "Hi" }], tools, max_tokens: 64,
  tool_choice: "required", parallel_tool_calls: false, stream: true }).finalChatCompletion();
const streamedFirst = requiredStream.choices[0].message.tool_calls?.[0];
out.required_stream = [requiredStream.choices[0].finish_reason, streamedFirst?.function.name,
                       typeof JSON.parse(streamedFirst?.function.arguments ?? "{}").on,
                       streamedFirst?.id.startsWith("call_"), requiredStream.choices[0].message.content];
const helped = await client.beta.chat.completions.stream({
  model: "troupe-tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 5, seed: 1,
  min_tokens: 5, stream: true }).finalChatCompletion();
out.chat_stream_helper = [helped.choices[0].message.role, typeof helped.choices[0].message.content];
// Embeddings: a batch of texts (the client asks for base64 and decodes it), and one as floats.
const embedded = await client.embeddings.create({ model: "troupe-tiny", input: ["Hello", "Hi there"] });
const vector = embedded.data[0].embedding;
const asFloats = await client.embeddings.create({
  model: "troupe-tiny", input: "Hello", encoding_format: "float" });
out.embeddings = [embedded.data.length, vector.length, embedded.usage.prompt_tokens,
                  Math.abs(Math.hypot(...vector) - 1) < 1e-5,
                  asFloats.data[0].embedding.every((x, i) => Math.abs(x - vector[i]) < 1e-6)];
try {
  await client.completions.create({ model: "nope", prompt: "x" });
} catch (e) {
  out.error_status = e.status;
  out.error_code = e.code;
}
console.log(JSON.stringify(out));
