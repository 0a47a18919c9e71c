#!/usr/bin/env bash
# Tokens per second of titan's tokenizer beside Hugging Face tokenizers (Rust core, Node binding)
# and OpenAI's tiktoken (WASM), single-threaded (each process pinned to one CPU), on the test
# corpus (test/oracles/make_corpus.js, ~3 MB with every hard case), with Llama 3's vocabulary:
#   titan json      titan, Llama 3 tokenizer.json          vs  hf   (the same file)
#   titan rank      titan, Llama 3 tiktoken rank file      vs  tiktoken (the same ranks and regex)
# ROUNDS rounds (default 5) run the four in turn (interleaved, so load on the shared machine hits
# all alike); each process times its first encode of the whole corpus ("cold": empty caches) and
# a second one ("warm"). Prints the median tokens/s with the min-max spread per tool.
#
#   scripts/bench_tokenizer.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
scripts/install_deps.sh --tests
[ -f build/CMakeCache.txt ] || scripts/build.sh
cmake --build build --target titan-bench-tokenizer >/dev/null
test/oracles/run_oracles.sh build/tokenizer_oracles
data=build/tokenizer_oracles
corpus=$data/corpus.txt
log=$(mktemp)
trap 'rm -f "$log"' EXIT
pin=(taskset -c 0)
command -v taskset >/dev/null 2>&1 || pin=()
export RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
for ((r = 1; r <= rounds; r++)); do
  "${pin[@]}" build/titan-bench-tokenizer "$data/llama3" "$corpus" 2 | sed -n 's/^titan /titan_json /p' >>"$log"
  "${pin[@]}" node test/oracles/bench_oracles.js hf "$data/llama3" "$corpus" >>"$log"
  "${pin[@]}" build/titan-bench-tokenizer "$data/llama3_rank" "$corpus" 2 | sed -n 's/^titan /titan_rank /p' >>"$log"
  "${pin[@]}" node test/oracles/bench_oracles.js tiktoken "$data/llama3_rank/original/tokenizer.model" "$corpus" >>"$log"
  echo "round $r of $rounds done" >&2
done
echo "corpus: $(stat -c %s "$corpus") bytes; $rounds rounds; tokens/s (median, min-max)"
for tool in titan_json hf titan_rank tiktoken; do
  for phase in cold warm; do
    awk -v t="$tool" -v p="$phase" '$1 == t && $2 == p { print $5 / $3, $5 }' "$log" | sort -g |
      awk -v t="$tool" -v p="$phase" '{ v[NR] = $1; n = $2 }
        END { if (NR == 0) exit; m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
              printf "%-11s %-5s %12.0f   (%.0f-%.0f)   %d tokens\n", t, p, m, v[1], v[NR], n }'
  done
done
