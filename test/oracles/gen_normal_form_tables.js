// Writes lib/tokenizer/normal_form_tables.inc: the tables of Unicode canonical normalization
// (NFD, NFC) exactly as Hugging Face tokenizers applies it. The Rust crate inside the `tokenizers`
// package (unicode-normalization-alignments) carries its own Unicode version, so the tables are
// read off that package's NFD and NFC normalizers (normalizeString) rather than off any Unicode
// data file:
//
//   decompositions  NFD(c) for every code point c that NFD changes (Hangul syllables aside: those
//                   decompose by formula), fully decomposed and canonically ordered.
//   combining order the code points that canonical ordering moves (non-starters), each with a rank
//                   that orders them as their canonical combining classes do (equal class, equal
//                   rank). The binding shows no class numbers, only their order: NFD("x y") swaps
//                   x and y exactly when class(y) < class(x), both non-zero. The algorithms only
//                   compare classes and test them for zero, so ranks serve as classes.
//   compositions    the primary composites P (NFC(P) = P but NFD(P) != P) with the pair <L, C>
//                   that composes into P: C the last code point of NFD(P), L = NFC(the rest). NFC
//                   composes NFD(P)'s code points one by one in order into P, so its last step
//                   is L + C -> P.
//
// Then the tables are checked: a model of the algorithms over them (decompose, order, compose)
// must equal the package on every code point in context and on random mixes of marks, starters
// and jamo; any difference stops the script. Run by hand after changing the `tokenizers` version:
// node test/oracles/gen_normal_form_tables.js
'use strict';
const fs = require('fs');
const path = require('path');
const tk = require('tokenizers');

function normalizer(type) {
  const json = {
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: { type },
    pre_tokenizer: null, post_processor: null, decoder: null,
    model: { type: 'WordLevel', vocab: { '[UNK]': 0 }, unk_token: '[UNK]' },
  };
  const n = tk.Tokenizer.fromString(JSON.stringify(json)).getNormalizer();
  return (s) => n.normalizeString(s);
}
const nfd = normalizer('NFD');
const nfc = normalizer('NFC');
const cps = (s) => [...s].map((ch) => ch.codePointAt(0));
const str = (a) => String.fromCodePoint(...a);
const fail = (what) => { console.error(`gen_normal_form_tables: ${what}`); process.exit(1); };

const S_BASE = 0xac00, S_COUNT = 11172, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11a7;
const L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT;
const is_syllable = (c) => c >= S_BASE && c < S_BASE + S_COUNT;

// Every scalar value but "\n" (the separator: a starter that nothing decomposes to or composes
// with), each normalized alone.
const scalars = [];
for (let c = 0; c <= 0x10ffff; c++) if ((c < 0xd800 || c > 0xdfff) && c !== 0x0a) scalars.push(c);
const alone = (f) => f(scalars.map((c) => String.fromCodePoint(c)).join('\n')).split('\n');
const nfd_alone = alone(nfd), nfc_alone = alone(nfc);
if (nfd_alone.length !== scalars.length || nfc_alone.length !== scalars.length) {
  fail('a code point normalized to a newline');
}

// Decompositions.
const decomposition = new Map();  // c -> code points
scalars.forEach((c, i) => {
  if (nfd_alone[i] !== String.fromCodePoint(c) && !is_syllable(c)) decomposition.set(c, cps(nfd_alone[i]));
});

// Non-starters: of the code points NFD leaves alone, those that U+0334 (the lowest non-zero
// class, 1) moves in front of, or that move in front of U+0345 (the highest, 240).
const plain = scalars.filter((c, i) => nfd_alone[i] === String.fromCodePoint(c));
const moved = (pairs) => {
  const out = nfd(pairs.map(([x, y]) => str([x, y])).join('\n')).split('\n');
  return pairs.map(([x, y], i) => x !== y && out[i] === str([y, x]));
};
const probe_low = moved(plain.map((c) => [c, 0x334]));
const probe_high = moved(plain.map((c) => [0x345, c]));
const non_starters = plain.filter((c, i) => probe_low[i] || probe_high[i] || c === 0x334 ||
                                   c === 0x345);

// Their order: x before y when NFD("y x") swaps them; equal when neither order swaps.
const compare = (x, y) => {
  const [yx, xy] = moved([[y, x], [x, y]]);
  return yx ? -1 : xy ? 1 : 0;
};
const sorted = non_starters.slice().sort(compare);
const rank = new Map();
let r = 0;
sorted.forEach((c, i) => {
  if (i === 0 || compare(sorted[i - 1], c) !== 0) ++r;
  rank.set(c, r);
});
if (r > 255) fail(`${r} combining ranks do not fit a byte`);
// Every pair must swap exactly as the ranks say (a comparator that is no order would show here).
for (const x of non_starters) {
  const got = moved(non_starters.map((y) => [x, y]));
  non_starters.forEach((y, i) => {
    if (got[i] !== rank.get(y) < rank.get(x)) fail(`U+${x.toString(16)} U+${y.toString(16)}: ranks disagree (${got[i]}, ${rank.get(x)}, ${rank.get(y)})`);
  });
}
const rank_of = (c) => rank.get(c) || 0;

// Compositions.
const compositions = [];
scalars.forEach((c, i) => {
  if (!decomposition.has(c) || nfc_alone[i] !== String.fromCodePoint(c)) return;
  const d = decomposition.get(c);
  const first = cps(nfc(str(d.slice(0, -1))));
  const second = d[d.length - 1];
  if (first.length !== 1 || nfc(str([first[0], second])) !== String.fromCodePoint(c)) {
    fail(`U+${c.toString(16)}: no pair composes into it`);
  }
  compositions.push([first[0], second, c]);
});
compositions.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
const composite = new Map(compositions.map(([a, b, c]) => [`${a},${b}`, c]));

// The model of the algorithms the C++ code implements, over these tables.
function model_nfd(text) {
  const out = [];
  for (const c of cps(text)) {
    let parts = [c];
    if (is_syllable(c)) {
      const s = c - S_BASE;
      parts = [L_BASE + Math.floor(s / N_COUNT), V_BASE + Math.floor((s % N_COUNT) / T_COUNT)];
      if (s % T_COUNT) parts.push(T_BASE + (s % T_COUNT));
    } else if (decomposition.has(c)) {
      parts = decomposition.get(c);
    }
    for (const p of parts) {
      let k = out.length;
      out.push(p);
      const pr = rank_of(p);
      while (pr !== 0 && k > 0 && rank_of(out[k - 1]) > pr) {
        [out[k - 1], out[k]] = [out[k], out[k - 1]];
        --k;
      }
    }
  }
  return out;
}
function compose(a, b) {
  if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT) {
    return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
  }
  if (is_syllable(a) && (a - S_BASE) % T_COUNT === 0 && b > T_BASE && b < T_BASE + T_COUNT) {
    return a + (b - T_BASE);
  }
  return composite.get(`${a},${b}`);
}
function model_nfc(text) {
  const out = [];
  let starter = -1, last = -1;  // last: the rank of the last code point kept since the starter
  for (const c of model_nfd(text)) {
    const cr = rank_of(c);
    if (starter >= 0 && (last < 0 || last < cr)) {
      const p = compose(out[starter], c);
      if (p !== undefined) { out[starter] = p; continue; }
    }
    if (cr === 0) { starter = out.length; last = -1; } else { last = cr; }
    out.push(c);
  }
  return str(out);
}

// Checks: every code point in order, 64 to a line (neighbors interact), then random mixes.
let seed = 0x9e3779b9;
function rand() {  // xorshift32
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const lines = [];
for (let i = 0; i < scalars.length; i += 64) lines.push(str(scalars.slice(i, i + 64)));
const pool = [...non_starters, ...decomposition.keys(), ...compositions.map((x) => x[0]),
  ...compositions.map((x) => x[1]), 0x61, 0x20, 0xac00, 0xac01, 0xd7a3];
for (let c = L_BASE; c < L_BASE + L_COUNT; c++) pool.push(c);
for (let c = V_BASE - 1; c <= V_BASE + V_COUNT; c++) pool.push(c);
for (let c = T_BASE - 1; c <= T_BASE + T_COUNT; c++) pool.push(c);
for (let i = 0; i < 200000; i++) {
  const n = 1 + Math.floor(rand() * 8);
  const s = [];
  for (let k = 0; k < n; k++) s.push(pick(pool));
  lines.push(str(s));
}
const want_d = nfd(lines.join('\n')).split('\n'), want_c = nfc(lines.join('\n')).split('\n');
lines.forEach((line, i) => {
  if (str(model_nfd(line)) !== want_d[i]) fail(`NFD differs on ${JSON.stringify(line)}`);
  if (model_nfc(line) !== want_c[i]) fail(`NFC differs on ${JSON.stringify(line)}`);
});

// The most UTF-8 bytes a code point's NFD has per byte of the code point (the bound on growth:
// composition never lengthens, checked here).
const utf8 = (a) => Buffer.byteLength(str(a), 'utf8');
let growth = 3;  // a Hangul syllable: 3 bytes -> 3 jamo of 3 bytes
for (const [c, d] of decomposition) growth = Math.max(growth, utf8(d) / utf8([c]));
for (const [a, b, c] of compositions) {
  if (utf8([c]) > utf8([a, b])) fail(`U+${c.toString(16)} is longer than its pair`);
}
if (growth !== Math.ceil(growth)) fail(`growth ${growth} is no integer`);

// The least code point that NFD (and NFC) may change or move: text below it stays as it is.
const nfd_inert_below = Math.min(...decomposition.keys(), ...non_starters, S_BASE);
const nfc_inert_below = Math.min(...non_starters, ...compositions.map((x) => x[1]), V_BASE,
  ...scalars.filter((c, i) => nfc_alone[i] !== String.fromCodePoint(c)));

// normal_form.cpp leaves the text before the first code point at or past the bound as it is and
// redoes the one before it: that needs every decomposition below the bound to begin with a code
// point below it (a starter that composes with nothing before it).
for (const [c, d] of decomposition) {
  if (c < nfc_inert_below && d[0] >= nfc_inert_below) fail(`U+${c.toString(16)} decomposes past the bound`);
}

const hex = (c) => `0x${c.toString(16).toUpperCase()}`;
// Items, comma-separated, as many to a line as fit in 100 columns.
function rows(items, show) {
  let t = '', line = '   ';
  for (const item of items) {
    const next = ` ${show(item)},`;
    if (line.length + next.length > 100) { t += line + '\n'; line = '   '; }
    line += next;
  }
  return line.length > 3 ? t + line + '\n' : t;
}
const rank_ranges = [];
for (const c of non_starters) {
  const last = rank_ranges[rank_ranges.length - 1];
  if (last && last[1] === c - 1 && last[2] === rank.get(c)) last[1] = c;
  else rank_ranges.push([c, c, rank.get(c)]);
}
const decomp_entries = [], decomp_pool = [];
for (const c of [...decomposition.keys()].sort((a, b) => a - b)) {
  const d = decomposition.get(c);
  decomp_entries.push([c, decomp_pool.length, d.length]);
  decomp_pool.push(...d);
}

let text = '// Generated by test/oracles/gen_normal_form_tables.js from the `tokenizers` npm package\'s\n' +
  '// NFD and NFC normalizers. Do not edit.\n';
text += `constexpr uint32_t kNfdInertBelow = ${hex(nfd_inert_below)};\n`;
text += `constexpr uint32_t kNfcInertBelow = ${hex(nfc_inert_below)};\n`;
text += `constexpr uint32_t kNormalFormMaxGrowth = ${growth};\n`;
text += `// {first, last, rank}: ${non_starters.length} non-starters, ${r} ranks.\n`;
text += 'constexpr CombiningRank kCombiningRanks[] = {\n' +
  rows(rank_ranges, ([a, b, k]) => `{${hex(a)}, ${hex(b)}, ${k}}`) + '};\n';
text += '// {code point, offset in kDecompositionPool, length}, by code point.\n';
text += 'constexpr Decomposition kDecompositions[] = {\n' +
  rows(decomp_entries, ([c, o, n]) => `{${hex(c)}, ${o}, ${n}}`) + '};\n';
text += 'constexpr uint32_t kDecompositionPool[] = {\n' + rows(decomp_pool, hex) + '};\n';
text += '// {first, second, composite}, by first then second.\n';
text += 'constexpr Composition kCompositions[] = {\n' +
  rows(compositions, ([a, b, c]) => `{${hex(a)}, ${hex(b)}, ${hex(c)}}`) + '};\n';
const out = path.join(__dirname, '..', '..', 'lib', 'tokenizer', 'normal_form_tables.inc');
fs.writeFileSync(out, text);
console.log(`wrote ${out}: ${decomposition.size} decompositions, ${non_starters.length} ` +
  `non-starters in ${r} ranks, ${compositions.length} compositions, growth ${growth}, ` +
  `inert below ${hex(nfd_inert_below)} (NFD) and ${hex(nfc_inert_below)} (NFC); checked on ` +
  `${lines.length} lines`);
