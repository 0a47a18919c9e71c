#!/usr/bin/env bash
# Does tokenizing slow training? The CPU debug model (seq_len 512, 4 sequences a step, AC off)
# trains STEPS steps (default 12, 2 of them warm-up) on the tokenizer oracles' corpus (3 MB of
# hard cases, test/oracles) two ways, in ROUNDS (default 3) interleaved rounds:
#   text     training.dataset text, tokenized as it is read by the oracles' "mix" tokenizer.json
#            (a BPE of 1,506 tokens: the debug model's vocabulary is 2,048)
#   tokens   the same stream written first by `titan-train tokenize` (uint32), read back
# Prints each way's median step time (metrics.jsonl's step_time_s after the warm-up) with its
# min-max spread, and whether the two runs' fingerprint step lines are equal (they must be).
#
#   scripts/bench_tokenizer_training.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --tests
[ -f build/CMakeCache.txt ] || scripts/build.sh
cmake --build build >/dev/null
test/oracles/run_oracles.sh build/tokenizer_oracles
assets=build/tokenizer_oracles/mix
corpus=build/tokenizer_oracles/corpus.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
steps=${STEPS:-12}
rounds=${ROUNDS:-3}
common=(--config configs/debug_model.toml --training.seq_len 512 --training.local_batch_size 4
        --training.steps "$steps" --metrics.log_freq 1 --training.device cpu
        --activation_checkpoint.mode none --debug.seed 1)
text=(--model.hf_assets_path "$assets" --training.dataset text --training.dataset_path "$corpus")
build/titan-train tokenize "${common[@]}" "${text[@]}" -o "$work/corpus.bin"
tokens=(--model.hf_assets_path "" --training.dataset tokens --training.dataset_token_dtype uint32
        --training.dataset_path "$work/corpus.bin")
for ((r = 1; r <= rounds; r++)); do
  build/titan-train "${common[@]}" "${text[@]}" --job.dump_folder "$work/text$r" >/dev/null
  build/titan-train "${common[@]}" "${tokens[@]}" --job.dump_folder "$work/tokens$r" >/dev/null
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def median_step(folder):
    rows = [json.loads(l) for l in open(f"{folder}/metrics.jsonl")]
    return statistics.median(r["step_time_s"] for r in rows if "step_time_s" in r and r["step"] > 2)
def steps(folder):
    return [l for l in open(f"{folder}/fingerprint.log") if l.startswith("step ")]
for way in ("text", "tokens"):
    t = [median_step(f"{work}/{way}{r}") for r in range(1, rounds + 1)]
    print(f"{way:7s} step {statistics.median(t):.3f} s ({min(t):.3f}-{max(t):.3f}) over {rounds} rounds")
same = all(steps(f"{work}/text{r}") == steps(f"{work}/tokens{r}") for r in range(1, rounds + 1))
print("fingerprint step lines equal:", same)
PY
