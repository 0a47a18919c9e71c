#!/usr/bin/env bash
# The runs a change that must keep the bits is checked on: one process, 2 replicas, FSDP-2,
# HSDP 2 x 2 under debug.batch_invariant, full AC with the bitwise recompute checker, and an FSDP-2
# checkpoint (batch_invariant) resumed on 2 replicas and on one process; each writes
# fingerprint.log and an op-level numerics.log of every step.
#
#   scripts/same_bits.sh run BINARY OUT      runs them with BINARY into OUT/<case>/
#   scripts/same_bits.sh compare OUT_A OUT_B compares every fingerprint*.log and numerics*.log
#                                            byte for byte; exit 0 when all are identical
#
# For a refactor: build the commit before into another folder, run both binaries, compare.
# Ranks are local processes with torchrun's variables (as scripts/run_train.sh starts them).
set -euo pipefail
cd "$(dirname "$0")/.."
failed=()

usage() {
  sed -n '7,9p' "$0" >&2
  exit 2
}

# launch N CASE ARGS...: N processes of the case's run, waited for; prints the case's exit code.
launch() {
  local n=$1 name=$2
  shift 2
  local flags=(--config configs/debug_model.toml --training.steps 4 --training.seq_len 64
    --training.local_batch_size 2 --debug.numerics_trace ops --debug.numerics_freq 1
    --job.dump_folder "$out/$name" "$@")
  if [ "$n" -eq 1 ]; then
    "$bin" "${flags[@]}" >"$out/$name.log" 2>&1 || failed+=("$name ($out/$name.log)")
    return
  fi
  local port=$((29700 + RANDOM % 200)) pids=() r
  for ((r = 0; r < n; r++)); do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port "$bin" "${flags[@]}" >"$out/$name.$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do wait "${pids[$r]}" || failed+=("$name rank $r ($out/$name.$r.log)"); done
}

run_all() {
  local fsdp=(--parallelism.data_parallel_shard_degree 2)
  local saving=(--checkpoint.enable true --checkpoint.interval 2 --debug.batch_invariant true
    --training.global_batch_size 4)
  rm -rf "$out"
  mkdir -p "$out"
  launch 1 one
  launch 2 replicas
  launch 2 fsdp "${fsdp[@]}"
  launch 4 hsdp "${fsdp[@]}" --parallelism.data_parallel_replicate_degree 2 \
    --debug.batch_invariant true --training.global_batch_size 8
  launch 1 ac_bitwise --activation_checkpoint.mode full \
    --activation_checkpoint.determinism_check bitwise
  launch 2 fsdp_save "${fsdp[@]}" "${saving[@]}" --training.steps 2 \
    --checkpoint.last_save_model_only false
  for case in resumed_replicas resumed_one; do
    mkdir -p "$out/$case"
    cp -r "$out/fsdp_save/checkpoint" "$out/$case/" 2>/dev/null || true  # failed: listed below
  done
  launch 2 resumed_replicas "${saving[@]}"
  launch 1 resumed_one "${saving[@]}"
  if [ ${#failed[@]} -gt 0 ]; then
    printf 'same_bits: failed: %s\n' "${failed[@]}" >&2
    exit 1
  fi
  echo "same_bits: $bin into $out: 8 cases"
}

compare_all() {
  local a=$1 b=$2 differ=0 compared=0 f
  while IFS= read -r f; do
    compared=$((compared + 1))
    if ! cmp -s "$a/$f" "$b/$f"; then
      echo "differs: $f"
      differ=1
    fi
  done < <(cd "$a" && find . -name 'fingerprint*.log' -o -name 'numerics*.log' | sort)
  local extra
  extra=$(cd "$b" && find . -name 'fingerprint*.log' -o -name 'numerics*.log' | while read -r f; do
    [ -e "$a/$f" ] || echo "$f"
  done)
  if [ -n "$extra" ]; then
    echo "only in $b: $extra"
    differ=1
  fi
  if [ "$compared" -eq 0 ]; then
    echo "same_bits: no logs under $a" >&2
    exit 2
  fi
  echo "same_bits: $compared files compared, $([ $differ -eq 0 ] && echo all identical || echo some differ)"
  exit $differ
}

case "${1:-}" in
  run)
    [ $# -eq 3 ] || usage
    bin=$(realpath "$2")
    out=$(realpath -m "$3")
    run_all
    ;;
  compare)
    [ $# -eq 3 ] || usage
    compare_all "$2" "$3"
    ;;
  *) usage ;;
esac
