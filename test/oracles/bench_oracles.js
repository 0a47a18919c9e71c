// The reference tokenizers' single-threaded speed on a corpus, for scripts/bench_tokenizer.sh:
//   node bench_oracles.js hf FOLDER CORPUS        (Hugging Face tokenizers, FOLDER/tokenizer.json)
//   node bench_oracles.js tiktoken RANKFILE CORPUS (tiktoken with a rank file and Llama 3's regex)
// Prints "<name> cold S seconds N tokens" for the first encode of the whole corpus (read as
// UTF-8 once) and "<name> warm S seconds N tokens" for a second one.
'use strict';
const fs = require('fs');
const path = require('path');

const [which, source, corpus_path] = process.argv.slice(2);
const text = fs.readFileSync(corpus_path).toString('utf8');
const PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

(async () => {
  let encode;
  if (which === 'hf') {
    const { Tokenizer } = require('tokenizers');
    const tok = Tokenizer.fromFile(path.join(source, 'tokenizer.json'));
    encode = async () => (await tok.encode(text, null, { addSpecialTokens: false })).getIds().length;
  } else {
    const { Tiktoken } = require('tiktoken');
    const lines = fs.readFileSync(source, 'utf8').split('\n').filter((l) => l);
    const tokens = [];
    lines.forEach((l, i) => {
      const [b64, rank] = l.split(' ');
      if (Number(rank) !== i) throw new Error('ranks must be 0, 1, 2, ...');
      tokens.push(b64);
    });
    const enc = new Tiktoken('! 0 ' + tokens.join(' '), {}, PATTERN);
    encode = async () => enc.encode_ordinary(text).length;
  }
  for (const round of ['cold', 'warm']) {
    const start = process.hrtime.bigint();
    const n = await encode();
    const s = Number(process.hrtime.bigint() - start) / 1e9;
    console.log(`${which} ${round} ${s.toFixed(4)} seconds ${n} tokens`);
  }
})();
