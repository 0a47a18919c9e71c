// Writes the tokenizer test corpus (bytes, deterministic): node make_corpus.js OUT
//
// Sections, each repeated in seeded random combinations until the file passes 1.5 MB:
// English prose with contractions in both cases (and 'ſ, which case-folds to 's), CJK (Chinese,
// Japanese, Korean) with and without spaces, emoji with skin tones, ZWJ families, flags and
// keycaps, combining marks (decomposed accents, stacked marks, Devanagari, Thai), RTL scripts
// (Arabic, Hebrew with points, Arabic-Indic digits, bidi marks), digit runs of every length
// 1..40 in several scripts, whitespace runs of every kind with and without a following word
// (NBSP, U+3000, NEL, U+180E, U+2028, tabs), \r\n and lone \r, special-token strings of Llama 3,
// GPT-2 and SentencePiece tokenizers inside text, code and URLs, very long words, letters new in
// Unicode 15/16, and invalid UTF-8 (stray continuation bytes, truncated sequences, overlong
// forms, surrogates, bytes F5..FF, values past U+10FFFF), text that canonical normalization (NFC,
// NFD) changes: marks out of canonical order, stacked Vietnamese and Greek diacritics, Hangul
// jamo (L+V, LV+T, U+11A7, old jamo), composition exclusions, singletons (U+212B ANGSTROM SIGN),
// non-starter decompositions, CJK compatibility ideographs, blocked marks, and random mixes of
// letters, marks and jamo. Then every Unicode scalar value once,
// in order, in lines of 64 (the regex classes for all of Unicode), those of the unassigned and
// private-use planes sampled.
'use strict';
const fs = require('fs');

let seed = 0x2545f491;
function rand() {  // xorshift32
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const prose = [
  "It's the dog's bone, isn't it? They'll say we'd've known. I'm sure you're right, we've won.",
  "IT'S LOUD. THEY'LL GO. WE'VE SEEN IT. I'M OK. YOU'RE LATE. HE'D KNOW. SHE'S HERE. DON'T!",
  "It'S mIxEd: we'Ve, they'Ll, I'M, you'rE, he'D, it'ſ (long s folds to s) and don'T.",
  "Quotes ’s and ‘t are not ASCII apostrophes; ''s and 's' and '' and ' s stay odd.",
  "Glued: 'sand 'Sand 'SAND 'llama 'LLAMA 'Llama 'dx 'Dx 'ſo 'tis 'TIS 'reef 'REEF 'mm 'MM 'vex 'VEX 'ddd",
  "I'MPOSSIBLE WE'VEry THEY'LLAMA SHE'SAND it'sand you'REEF he'Dx O'TOOLE o'toole",
  'The quick brown fox jumps over the lazy dog. "Well," she said, "that\'s that."',
  'Numbers: 3.14159, 1,000,000, 2024-06-01, 12:30:45, v1.2.3, 0x1F, 1e-9, -42, +7, 50%.',
  'Mr. O\'Neill\'s cat—named “Whiskers”—didn\'t like the rain… or the “snow”!',
];
const cjk = [
  '我们今天去公园散步，天气非常好。机器学习是人工智能的一个分支。',
  '東京都の天気は晴れです。ひらがなとカタカナ、漢字を混ぜて書きます。ｶﾀｶﾅ半角。',
  '한국어 문장입니다. 오늘은 날씨가 좋네요! 안녕하세요?',
  '中文English混合text测试123数字，标点！？《书名》「引号」',
  '這是繁體中文的句子，包含一些罕見字：𠀀𠀁𪚥𰻞。',
];
const emoji = [
  '👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 🏳️‍🌈 flag, 🇫🇷🇯🇵🇺🇸 flags, 1️⃣ 2️⃣ #️⃣ keycaps',
  '😀😃😄😁😆 🤦🏼‍♂️ 👍🏿 ❤️‍🔥 🧑‍🤝‍🧑 ☺︎ ☺️ 🫠 🪿',
  'emoji🙂inside😉words and ✨sparkles✨ and 🤖🤖🤖 runs',
];
const marks = [
  'Cafe\u0301 vs Café, nai\u0308ve, Z\u0351\u0300\u0301\u0302a\u0303\u0304\u0305l\u0306\u0307g\u0308o\u0309\u030a',
  'हिन्दी भाषा में लिखा गया वाक्य। क्षत्रिय स्त्री',
  'ภาษาไทยไม่มีช่องว่างระหว่างคำ ก่อน่ะ',
  'Ελληνικά κείμενα και ο̈ τόνοι. Русский текст с ударе́нием. Ǆemal ǅ ǆ',
  'a\u200bb\u200cc\u200dd\ufeffe \u00ad soft\u00adhyphen',
];
const rtl = [
  'مرحبا بالعالم! هذا نص عربي مع أرقام ١٢٣٤٥٦٧٨٩٠ و 123.',
  'שָׁלוֹם עוֹלָם, זה טקסט בעברית עם ניקוד.',
  '\u202bRTL embed\u202c \u200fmark\u200e LTR mark ‏ فارسی: ۱۲۳۴',
];
const specials = [
  '<|begin_of_text|>Hello<|end_of_text|>',
  'text <|eot_id|> more<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>',
  'reserved: <|reserved_special_token_5|><|reserved_special_token_250|> <|reserved_special_token_251|>',
  'partial <|eot_id| and <|begin_of_text and |> and <|<|eot_id|>|>',
  '<|endoftext|>GPT-2 style<|endoftext|> <|endoftext|> x<|endoftext|>y',
  '<s>sentencepiece</s> <unk> <s> </s><s>',
  'masked [MASK] token, [MASK][MASK] and  [MASK]  spaced, lord lordship overlord lord.',
  'word<|eot_id|>word <|eot_id|> word',
];
const code = [
  'def f(x):\n    return x ** 2  # square\n\nclass A:\n\tpass\n',
  '{"key": [1, 2, 3], "nested": {"a": null, "b": true}}\n',
  'https://example.com/path?query=1&b=two#frag mailto:someone@example.org',
  'for (int i = 0; i < n; ++i) { sum += a[i]; }  // C++\r\n',
  '    indented\n        more\n\t\ttabs\n',
];
const newer = [  // letters and numbers added in Unicode 15 and 16
  '\u{10D50}\u{10D51}\u{10D52} garay, \u{11F04}\u{11F05} kawi, \u{1E4D0}\u{1E4D1} nag mundari',
  '\u{31350}\u{31351} cjk ext h, \u{2EBF0} ext i, \u{1D2C0}\u{1D2C1} kaktovik, \u{10D40}\u{10D41} digits',
];
const normal_forms = [  // text NFC and NFD change, or must leave alone
  'Vie\u0323\u0302t Vie\u0302\u0323t Việt, Tie\u0302\u0301ng Tiếng, Nguye\u0302\u0303n, \u01B0\u031B\u0300ng',
  'ca\u0301\u0323 a\u0323\u0301 s\u0307\u0323 q\u0307\u0323 o\u0308\u0331\u0304 e\u0301\u0301 a\u0334\u0301 \u0301a A\u030A',
  '\u1100\u1161\u11A8 \u1112\u1161\u11AB\u1100\u1173\u11AF \uAC00\u11A8 \uAC00\u11A7 \u1100\u1161\u11A7 \u1100\u1176 \u1100\u1100\u1161 \uD4DB\u11A8',
  'exclusions \u0958\u0959 \u0915\u093C \uFB1D \u05D9\u05B4 \u2ADC \u{1D15E}\u{1D160} \u0F43 \u0F73\u0F75\u0F81 \u0344',
  'singletons \u212B \u2126 \u212A \u0340\u0341 \u0374 \u037E \u1FEF \u2000 \u2329\u232A',
  'CJK compatibility \uF900\uF91D\uFA10\uFA6D\u{2F800}\u{2FA1D} 豈 更',
  'Greek \u03B1\u0313\u0300\u0345 \u1F80\u0301 \u03C9\u0345\u0342\u0314 \u0390 \u1FD3 \u03D3',
  'starters \u0B47\u0B3E\u0B57 \u0DD9\u0DCF\u0DCA \u{11099}\u{110BA} \u{11131}\u{11127} \u0CC6\u0CC2\u0CD5',
];
function normal_form_mix() {
  // Letters, marks (in any order) and jamo at random: what composes, reorders or is blocked.
  const bases = ['a', 'e', 'o', 'u', 'A', 'S', 'w', 'y', 'α', 'ω', 'и', 'ε', 'ơ', 'ư', 'Å', 'ệ', 'ᾀ'];
  const marks = ['\u0300', '\u0301', '\u0302', '\u0303', '\u0308', '\u030A', '\u0323', '\u0327',
    '\u031B', '\u0334', '\u0345', '\u0313', '\u0342', '\u05B4', '\u093C', '\u0E48', '\u302A'];
  let s = '';
  const n = int(1, 12);
  for (let i = 0; i < n; i++) {
    if (rand() < 0.25) {
      s += String.fromCodePoint(0x1100 + int(0, 19), 0x1161 + int(-1, 21));
      if (rand() < 0.6) s += String.fromCodePoint(0x11a7 + int(0, 28));
    } else {
      s += pick(bases);
      for (let k = int(0, 4); k > 0; k--) s += pick(marks);
    }
    if (rand() < 0.2) s += ' ';
  }
  return s;
}
const ws = [' ', '  ', '\t', '\u00a0', '\u3000', '\u0085', '\u180e', '\u2028', '\u2029', '\u2003', '\u200a', '\u202f', '\u205f', '\v', '\f'];

function digits() {
  const n = int(1, 40);
  const sets = ['0123456789', '٠١٢٣٤٥٦٧٨٩', '०१२३४५६७८९', '０１２３４５６７８９', '²³¹¼½¾', 'ⅠⅡⅢⅣⅫ'];
  const set = [...(rand() < 0.7 ? sets[0] : pick(sets))];
  let s = '';
  for (let i = 0; i < n; i++) s += pick(set);
  return pick(['', ' ', 'x', '$', '-', 'v']) + s + pick(['', ' ', '.', 'px', ',', '\n']);
}
function whitespace() {
  let s = '';
  const n = int(1, 20);
  for (let i = 0; i < n; i++) s += rand() < 0.6 ? ' ' : pick(ws);
  return s + pick(['', 'word', '\n', 'x', '!', '\r\n', '']);
}
function newlines() {
  return pick(['\r\n', '\r', '\n', '\n\n', '\r\n\r\n', ' \r\n', '  \n  ', '\n \n', '\r\r\n', '.\r\n']);
}
function invalid() {
  return Buffer.from(pick([
    [0x80], [0xbf, 0x80], [0xc0, 0xaf], [0xc1, 0xbf], [0xe0, 0x80, 0xaf], [0xed, 0xa0, 0x80],
    [0xed, 0xbf, 0xbf], [0xf0, 0x8f, 0xbf, 0xbf], [0xf4, 0x90, 0x80, 0x80], [0xf5], [0xff],
    [0xfe, 0xfe], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xc3], [0xe6, 0x97], [0x61, 0xc3, 0x28],
    [0xf8, 0x88, 0x80, 0x80, 0x80], [0xef, 0xbf, 0xbe], [0x00], [0x01, 0x1b, 0x7f],
  ]));
}
function long_word() {
  const base = pick(['abc', 'xyz', 'α', '字', 'a1', 'ZZ', '=', '-']);
  return base.repeat(int(50, 400));
}
function random_text() {
  // Random code points from chosen blocks: unseen pieces, so no cache makes the test easy.
  const blocks = [[0x61, 0x7a], [0x41, 0x5a], [0x30, 0x39], [0x4e00, 0x9fff], [0x3040, 0x30ff],
                  [0xac00, 0xd7a3], [0x0600, 0x06ff], [0x0400, 0x04ff], [0x1f300, 0x1faff],
                  [0x20, 0x2f], [0x0300, 0x036f], [0x0900, 0x097f], [0x2000, 0x206f]];
  let s = '';
  const n = int(3, 30);
  for (let i = 0; i < n; i++) {
    const [lo, hi] = pick(blocks);
    s += String.fromCodePoint(int(lo, hi));
    if (rand() < 0.15) s += ' ';
  }
  return s;
}

const out = fs.openSync(process.argv[2], 'w');
let size = 0;
const write = (x) => { const b = Buffer.isBuffer(x) ? x : Buffer.from(x, 'utf8'); fs.writeSync(out, b); size += b.length; };
const makers = [
  () => pick(prose), () => pick(cjk), () => pick(emoji), () => pick(marks), () => pick(rtl),
  () => pick(specials), () => pick(code), () => pick(newer), digits, whitespace, newlines,
  invalid, random_text, random_text, () => (rand() < 0.05 ? long_word() : pick(prose)),
  () => pick(normal_forms), normal_form_mix,
];
while (size < 1_600_000) {
  write(pick(makers)());
  if (rand() < 0.5) write(pick([' ', '', '\n', '', ' ']));
}
// Every scalar value, 64 to a line, but in planes 4-13 (unassigned in Unicode 16) and 15-16
// (private use) only every 61st: no regex class holds them, and they were half the corpus.
let line = '';
let count = 0;
const sampled = (c) => (c >= 0x40000 && c <= 0xdffff) || c >= 0xf0000;
for (let c = 0; c <= 0x10ffff; c++) {
  if (c >= 0xd800 && c <= 0xdfff) continue;
  if (sampled(c) && c % 61 !== 0) continue;
  line += String.fromCodePoint(c);
  if (++count % 64 === 0) { write(line + '\n'); line = ''; }
}
write(line);
fs.closeSync(out);
console.log(`${process.argv[2]}: ${size} bytes`);
