// OpenAI's tiktoken (its WASM build, with the cl100k_base ranks it ships) as the reference for
// titan's rank-file tokenizer: node tiktoken_oracle.js CORPUS OUT_IDS OUT_RANKS
// OUT_RANKS gets cl100k_base in tiktoken's rank-file format ("<base64 token> <rank>" per line,
// the format of Meta's Llama 3 tokenizer.model); OUT_IDS the corpus's encode_ordinary ids as
// uint32 little-endian (the corpus read as UTF-8, invalid bytes replaced as in encode.js).
// With LLAMA3_RANKS OUT_LLAMA3: also the ids tiktoken gives with that rank file (Meta's Llama 3
// tokenizer.model format) and Llama 3's pattern, as Meta's tokenizer.py builds its encoding.
'use strict';
const fs = require('fs');
const { get_encoding } = require('tiktoken');
const cl100k = require('tiktoken/encoders/cl100k_base.json');

const [corpus_path, out_ids, out_ranks, llama3_ranks, out_llama3] = process.argv.slice(2);
// The package keeps the ranks as one line "<name> <first rank> <base64> <base64> ...".
const fields = cl100k.bpe_ranks.split(' ');
const first = Number(fields[1]);
const lines = fields.slice(2).map((b64, i) => `${b64} ${first + i}`);
fs.writeFileSync(out_ranks, lines.join('\n') + '\n');
const enc = get_encoding('cl100k_base');
const text = fs.readFileSync(corpus_path).toString('utf8');
const ids = Uint32Array.from(enc.encode_ordinary(text));
fs.writeFileSync(out_ids, Buffer.from(ids.buffer));
enc.free();
if (llama3_ranks) {
  const { Tiktoken } = require('tiktoken');
  const lines = fs.readFileSync(llama3_ranks, 'utf8').split('\n').filter((l) => l);
  const tokens = lines.map((l, i) => {
    const [b64, rank] = l.split(' ');
    if (Number(rank) !== i) throw new Error('ranks must be 0, 1, 2, ...');
    return b64;
  });
  const llama3 = new Tiktoken('! 0 ' + tokens.join(' '), {}, cl100k.pat_str);  // the same pattern
  fs.writeFileSync(out_llama3, Buffer.from(Uint32Array.from(llama3.encode_ordinary(text)).buffer));
  llama3.free();
}
console.log(`${out_ids}: ${ids.length} ids; ${out_ranks}: ${lines.length} ranks`);
