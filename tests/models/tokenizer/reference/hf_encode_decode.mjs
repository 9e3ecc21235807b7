// HF tokenizers' own Rust implementation (npm `tokenizers`) as the reference for the serving
// tests (tests/integration/serve_hf_test.cpp): what a model's tokenizer makes of a request.
//
//   node hf_encode_decode.mjs TOKENIZER_JSON REQUESTS_JSON
//
// REQUESTS_JSON is a list of {"encode": text} (ids with the special tokens the tokenizer adds,
// as vLLM's /tokenize and completions encode a prompt; "special": false for a chat prompt,
// whose template wrote them) and {"decode": [ids]} (text without special tokens, as vLLM
// decodes an output). Prints the list of answers as JSON: ids, or text.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');

const [file, requests] = process.argv.slice(2);
if (!requests) {
  console.error('usage: node hf_encode_decode.mjs TOKENIZER_JSON REQUESTS_JSON');
  process.exit(2);
}
const tokenizer = Tokenizer.fromFile(file);
const answers = [];
for (const r of JSON.parse(readFileSync(requests, 'utf8'))) {
  if ('encode' in r) {
    const special = r.special ?? true;
    answers.push((await tokenizer.encode(r.encode, null, { addSpecialTokens: special })).getIds());
  } else {
    answers.push(await tokenizer.decode(r.decode, true));
  }
}
console.log(JSON.stringify(answers));
