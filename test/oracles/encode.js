// Encodes a corpus with Hugging Face tokenizers (the Rust core, through its Node binding), the
// reference titan's tokenizer must equal: node encode.js DIR CORPUS OUT
//
// DIR/tokenizer.json is loaded; when DIR/tokenizer_config.json exists its tokens are added the
// way torchtitan v0.2.2's HuggingFaceTokenizer adds them (_infer_special_tokens). The corpus is
// read as UTF-8 with invalid bytes replaced by U+FFFD per maximal subpart (Node's decoder, the
// same rule as Python's errors="replace"), and encoded with add_special_tokens=false.
// OUT gets the ids as uint32 little-endian; OUT.json what torchtitan infers: vocab size,
// encode("") with special tokens, bos/eos ids.
'use strict';
const fs = require('fs');
const path = require('path');
const tk = require('tokenizers');
const { Tokenizer, AddedToken } = tk;

// torchtitan's strategy 2a: vocab.json + merges.txt -> BPE with a ByteLevel pre-tokenizer
// (no prefix space) and a ByteLevel post-processor (the ByteLevel decoder torchtitan also sets
// does not touch encoding, and the Node binding has none).
async function from_vocab_files(dir) {
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'vocab.json'), 'utf8'));
  const merges = [];
  for (let line of fs.readFileSync(path.join(dir, 'merges.txt'), 'utf8').split('\n')) {
    line = line.trim();
    if (!line || line.startsWith('#')) continue;
    const parts = line.split(/\s+/);
    if (parts.length >= 2) merges.push([parts[0], parts[1]]);
  }
  const tok = new Tokenizer(tk.BPE.init(vocab, merges));
  tok.setPreTokenizer(tk.byteLevelPreTokenizer(false));
  tok.setPostProcessor(tk.byteLevelProcessing(true));
  return tok;
}

(async () => {
  const [dir, corpus_path, out] = process.argv.slice(2);
  const tok = fs.existsSync(path.join(dir, 'tokenizer.json'))
    ? Tokenizer.fromFile(path.join(dir, 'tokenizer.json')) : await from_vocab_files(dir);
  const config_path = path.join(dir, 'tokenizer_config.json');
  const config = fs.existsSync(config_path) ? JSON.parse(fs.readFileSync(config_path, 'utf8')) : null;
  let bos_token = null, eos_token = null, bos_id = null, eos_id = null;
  if (config) {
    const get = (key) => {
      const t = config[key];
      if (t && typeof t === 'object') return t.content;
      return t ?? null;
    };
    const cfg_bos = get('bos_token'), cfg_eos = get('eos_token');
    const tokens = [];
    const process_token = (content, spec, id) => {
      if (content === cfg_bos) { bos_token = content; bos_id = id ?? tok.tokenToId(content); }
      else if (content === cfg_eos) { eos_token = content; eos_id = id ?? tok.tokenToId(content); }
      if (spec && typeof spec === 'object' && (spec.__type === 'AddedToken' || 'content' in spec)) {
        tokens.push(new AddedToken(content, true, { singleWord: spec.single_word ?? false,
          leftStrip: spec.lstrip ?? false, rightStrip: spec.rstrip ?? false,
          normalized: spec.normalized ?? true }));
      } else {
        tokens.push(new AddedToken(content, true));
      }
    };
    for (const key of ['bos_token', 'eos_token', 'pad_token', 'unk_token', 'sep_token', 'cls_token', 'mask_token']) {
      if (config[key] != null) process_token(get(key), config[key], null);
    }
    for (const [id, spec] of Object.entries(config.added_tokens_decoder || {})) {
      if (spec && typeof spec === 'object' && 'content' in spec) process_token(spec.content, spec, Number(id));
    }
    if (tokens.length) {
      tok.addAddedTokens(tokens);
      if (bos_token) bos_id = tok.tokenToId(bos_token);
      if (eos_token) eos_id = tok.tokenToId(eos_token);
    }
  }
  const text = fs.readFileSync(corpus_path).toString('utf8');
  const enc = await tok.encode(text, null, { addSpecialTokens: false });
  const ids = Uint32Array.from(enc.getIds());
  fs.writeFileSync(out, Buffer.from(ids.buffer));
  const empty = (await tok.encode('')).getIds();
  fs.writeFileSync(out + '.json', JSON.stringify({
    vocab_size: tok.getVocabSize(true), empty_with_special: empty, bos_id, eos_id, count: ids.length,
  }));
  console.log(`${out}: ${ids.length} ids`);
})();
