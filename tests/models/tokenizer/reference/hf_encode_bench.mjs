// The baseline of bench/tokenizer_bench: HF tokenizers' Rust implementation (npm `tokenizers`,
// the official binding) encoding a list of texts on one thread.
//
//   TOKENIZERS_PARALLELISM=false node hf_encode_bench.mjs TOKENIZER_JSON TEXTS
//
// TEXTS holds one text per line, hex-encoded. The whole list is encoded twice by one
// encodeBatch call each (one native call, so the binding's per-call cost is not what is timed):
// the first pass with the tokenizer's word cache empty, the second with it filled. Prints
// {"cold_s", "warm_s", "ids", "hash"}: the passes' seconds and the ids' count and FNV-1a hash
// (over each id as 4 little-endian bytes), which tokenizer_bench compares with its own.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');

const [file, textsFile] = process.argv.slice(2);
if (!textsFile) {
  console.error('usage: node hf_encode_bench.mjs TOKENIZER_JSON TEXTS');
  process.exit(2);
}
if (process.env.TOKENIZERS_PARALLELISM !== 'false') {
  console.error('hf_encode_bench.mjs: set TOKENIZERS_PARALLELISM=false (one thread against one)');
  process.exit(2);
}
const tokenizer = Tokenizer.fromFile(file);
const texts = readFileSync(textsFile, 'utf8').split('\n').filter((l) => l.length > 0)
  .map((hex) => Buffer.from(hex === '-' ? '' : hex, 'hex').toString('utf8'));
const options = { addSpecialTokens: false };

let t0 = process.hrtime.bigint();
const encodings = await tokenizer.encodeBatch(texts, options);
const cold = Number(process.hrtime.bigint() - t0) / 1e9;
t0 = process.hrtime.bigint();
await tokenizer.encodeBatch(texts, options);
const warm = Number(process.hrtime.bigint() - t0) / 1e9;

let hash = 0xcbf29ce484222325n;
let count = 0;
const prime = 0x100000001b3n;
const mask = (1n << 64n) - 1n;
for (const e of encodings) {
  for (const id of e.getIds()) {
    for (let b = 0; b < 4; ++b) {
      hash = ((hash ^ BigInt((id >>> (8 * b)) & 0xff)) * prime) & mask;
    }
    ++count;
  }
}
console.log(JSON.stringify({ cold_s: cold, warm_s: warm, ids: count, hash: hash.toString() }));
