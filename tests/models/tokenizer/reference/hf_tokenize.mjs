// HF tokenizers' own Rust implementation (npm `tokenizers`, the official binding), as the
// reference for troupe's tokenizer (tests/models/tokenizer/hf_reference_test.cpp).
//
//   node hf_tokenize.mjs TOKENIZER_JSON CORPUS OUT
//
// CORPUS holds one text per line, hex-encoded bytes (any bytes: invalid UTF-8 is read as a
// Node Buffer decodes it, each maximal invalid subsequence as U+FFFD). OUT gets one JSON line
// per text: its ids without and with special tokens, and the decode of the ids with and
// without skipping special tokens.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');

const [file, corpus, out] = process.argv.slice(2);
if (!out) {
  console.error('usage: node hf_tokenize.mjs TOKENIZER_JSON CORPUS OUT');
  process.exit(2);
}
const tokenizer = Tokenizer.fromFile(file);
const lines = readFileSync(corpus, 'utf8').split('\n').filter((l) => l.length > 0 || false);
const results = [];
for (const hex of lines) {
  const text = Buffer.from(hex === '-' ? '' : hex, 'hex').toString('utf8');
  const ids = (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
  const withSpecial = (await tokenizer.encode(text, null, { addSpecialTokens: true })).getIds();
  results.push(JSON.stringify({
    ids,
    with_special: withSpecial,
    text: await tokenizer.decode(ids, false),
    text_skip: await tokenizer.decode(withSpecial, true),
  }));
}
writeFileSync(out, results.join('\n') + '\n');
