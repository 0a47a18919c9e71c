#!/usr/bin/env bash
# Everything a GPU run must show about titan-train, in one run (under 8 minutes on one H200 with
# 16 cores): builds against the libtorch inside the machine's PyTorch install, runs the checks
# and writes a Markdown report, one line per check with its figure and PASS / FAIL / SKIPPED.
#
#   scripts/gpu_deps.sh      # once, on a Debian machine with apt: header-only deps into .gpu-deps/
#   scripts/gpu_check.sh     # on the GPU machine (python3 with torch, cmake, g++; no registry)
#
# Dry run here, in the trixie root against python3-torch 2.6's libtorch:
#   scripts/gpu_deps.sh && scripts/trixie_root.sh up python3-torch &&
#   scripts/trixie_root.sh run env GPU_CHECK_BUDGET_S=3600 GPU_CHECK_BUILD_S=2400 \
#     GPU_CHECK_TESTS_S=900 scripts/gpu_check.sh
#
# Checks: the unit tests (those tagged [cuda] included: a one-process NCCL group sums on the
# GPU); the debug model for 50 steps on CUDA in
# bf16 (loss falls; memory, tps, tflops, mfu sane); debug.deterministic twice (identical
# fingerprint.log), the same without it (identical or not), and the time cost of deterministic
# mode; a one-process run through an NCCL group (bit for bit as without), and with 2 GPUs 2 ranks
# against 1 (losses within 1e-5); AC full with the bitwise checker runs clean, and with dropout and preserve_rng_state =
# false exits 3 naming the block; the 1B flavor at seq_len 2048 in bf16: tokens/s and MFU (target
# >= 40%), the overhead of full AC and of the bitwise checker, peak memory with AC none, full and
# selective 2; a step captured on the CPU replayed on CUDA and the reverse (titan-train replay's
# first differing op and verdict).
#
# Without CUDA (a dry run) the checks that need a GPU are SKIPPED and the others run on the CPU
# at small sizes; the script then exits 0 unless a check that ran failed. Exit codes: 0 no check
# failed, 1 a check failed (or the build did). Environment: GPU_CHECK_DIR (build folder,
# build-gpu), GPU_CHECK_REPORT (report path, <build folder>/gpu_check_report.md),
# GPU_CHECK_BUDGET_S (seconds for the whole run, 460: a check that would start past it is
# SKIPPED, and each check's timeout is cut to what is left), GPU_CHECK_BUILD_S (the build's
# timeout, 300), GPU_CHECK_TESTS_S (the unit tests' timeout, 240), GPU_CHECK_JOBS (build and ctest jobs), GPU_CHECK_REUSE_BUILD=1 (run the checks
# on the binaries already in the build folder, as they are: to rerun checks without a rebuild). A dry run on a small CPU machine needs
# larger GPU_CHECK_BUDGET_S and GPU_CHECK_BUILD_S.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
src=$PWD
dir=${GPU_CHECK_DIR:-build-gpu}
report=${GPU_CHECK_REPORT:-$dir/gpu_check_report.md}
budget=${GPU_CHECK_BUDGET_S:-460}
build_s=${GPU_CHECK_BUILD_S:-300}
tests_s=${GPU_CHECK_TESTS_S:-240}
jobs=${GPU_CHECK_JOBS:-$(nproc)}
work=$dir/gpu_check
bin=$dir/titan-train
start=$SECONDS
failed=0
mkdir -p "$work"
rows=$work/rows.md
: >"$rows"

# --- reporting ------------------------------------------------------------------------------

# result CHECK FIGURE STATUS: one line of the report.
result() {
  printf '| %s | %s | %s |\n' "$1" "$2" "$3" >>"$rows"
  echo "gpu_check: [$3] $1: $2"
  if [ "$3" = FAIL ]; then failed=1; fi
}

# The timeout for the next step: WANT seconds, cut to what is left of the budget (0 when spent).
limit() {
  local left=$((budget - (SECONDS - start)))
  if [ "$left" -lt 15 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

write_report() {
  {
    echo "# titan-train gpu_check report"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(hostname); $(nproc) cores"
    echo "- device: ${device_desc:-unknown}"
    echo "- libtorch: ${torch_desc:-unknown}"
    echo "- build: ${build_desc:-not built}"
    echo "- total time: $((SECONDS - start)) s (budget $budget s)"
    echo
    echo "| check | figure | result |"
    echo "|---|---|---|"
    cat "$rows"
  } >"$report"
  echo
  cat "$report"
}

# --- build ----------------------------------------------------------------------------------

# Configures and builds $dir against PyTorch's libtorch and the carried header-only deps.
build() {
  local prefix t0=$SECONDS
  if ! prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>"$work/python.log"); then
    build_desc="FAILED: python3 cannot import torch ($(tail -1 "$work/python.log"))"
    return 1
  fi
  torch_desc="PyTorch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null), cmake prefix $prefix"
  if [ ! -f "$prefix/Torch/TorchConfig.cmake" ]; then
    # Debian's python3-torch keeps libtorch's CMake files in libtorch-dev (/usr/lib/<triplet>/cmake),
    # where CMake's default search finds the same libtorch the Python package loads.
    torch_desc="$torch_desc (no TorchConfig.cmake there: CMake's default search)"
  fi
  if [ ! -d "$src/.gpu-deps/usr/include/fmt" ]; then
    build_desc="FAILED: no .gpu-deps/ (run scripts/gpu_deps.sh on a Debian machine and carry .gpu-deps)"
    return 1
  fi
  if [ "${GPU_CHECK_REUSE_BUILD:-0}" = 1 ] && [ -x "$bin" ] && [ -x "$dir/titan_tests" ]; then
    build_desc="reused $dir as built (GPU_CHECK_REUSE_BUILD=1)"
    return 0
  fi
  local generator=()
  if command -v ninja >/dev/null && [ ! -f "$dir/CMakeCache.txt" ]; then generator=(-G Ninja); fi
  # c10d's NCCL header includes nccl.h: a pip PyTorch has it in the nvidia-nccl wheel.
  local nccl=()
  local nccl_include
  # The wheel's layout differs between CUDA majors (nvidia/nccl/include, nvidia/cu13/include...):
  # look for the header anywhere below the nvidia package.
  nccl_include=$(python3 -c 'import glob, os, nvidia
hits = [h for p in nvidia.__path__ for h in glob.glob(os.path.join(p, "**", "nccl.h"), recursive=True)]
print(os.path.dirname(sorted(hits)[0]) if hits else "")' 2>/dev/null) &&
    [ -f "$nccl_include/nccl.h" ] && nccl=(-DTITAN_NCCL_INCLUDE_DIR="$nccl_include")
  if ! timeout "$(limit 120)" cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix;$src/.gpu-deps/usr" -DTITAN_HEADER_ONLY_DEPS=ON -DTITAN_WERROR=OFF \
      -DTITAN_TEST_PER_FILE=OFF "${nccl[@]}" >"$work/configure.log" 2>&1; then
    build_desc="FAILED: cmake configure (see $work/configure.log): $(grep -m1 -A2 'CMake Error' "$work/configure.log" | tr '\n' ' ')"
    return 1
  fi
  # -k 0: every error of the build in one log (a GPU run is too short to find them one at a time).
  local keep_going=()
  if [ -f "$dir/build.ninja" ]; then keep_going=(-- -k 0); fi
  if ! timeout "$(limit "$build_s")" cmake --build "$dir" -j "$jobs" "${keep_going[@]}" >"$work/build.log" 2>&1; then
    build_desc="FAILED: build (see $work/build.log): $(grep -m1 -E 'error:|FAILED:|Terminated' "$work/build.log")"
    # The training checks still run when the trainer itself linked.
    if [ -x "$bin" ] && [ "$bin" -nt "$work/configure.log" ]; then partial_build=yes; fi
    return 1
  fi
  build_desc="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt") in $((SECONDS - t0)) s"
}

# --- runs -----------------------------------------------------------------------------------

# train NAME TIMEOUT ARGS...: runs titan-train into $work/NAME (log $work/NAME.log). Returns its
# exit code; 124 on timeout, 125 when the budget is spent.
train() {
  local name=$1 t
  t=$(limit "$2")
  shift 2
  [ "$t" -gt 0 ] || return 125
  rm -rf "${work:?}/$name"
  timeout -k 10 "$t" "$bin" "$@" --job.dump_folder "$work/$name" >"$work/$name.log" 2>&1
}

# stats NAME [WARMUP]: loads the run's metrics into shell variables (steps, first_loss, tps, ...).
stats() {
  steps=0 first_loss=nan last_loss=nan tps=0 tflops=0 mfu=0 step_s=0 memory_gib=0 memory_pct=0
  eval "$(python3 "$src/scripts/run_stats.py" "$work/$1/metrics.jsonl" "${2:-3}")"
}

# why NAME RC: a short reason for a failed run.
why() {
  case "$2" in
    124) echo "timed out" ;;
    125) echo "time budget spent" ;;
    *) echo "exit $2: $(grep -v '^\[titan\] step' "$work/$1.log" | tail -2 | tr '\n' ' ' | cut -c1-200)" ;;
  esac
}

gt() { python3 -c "import sys; sys.exit(0 if float('$1') > float('$2') else 1)"; }
pct() { python3 -c "print(f'{100 * (float(\"$1\") / float(\"$2\") - 1):+.1f}%')"; }

# --- checks ---------------------------------------------------------------------------------

# check_unit_tests NAME LOG CTEST-FILTER...: the suite, or the part of it the filter selects.
check_unit_tests() {
  local t rc name=$1 log=$2
  shift 2
  t=$(limit "$tests_s")
  if [ ! -x "$dir/titan_tests" ]; then result "$name" "titan_tests was not built" FAIL; return; fi
  if [ "$t" -eq 0 ]; then result "$name" "time budget spent" SKIPPED; return; fi
  (cd "$dir" && timeout -k 10 "$t" ctest --output-on-failure -j "$jobs" --timeout 600 "$@") \
    >"$work/$log" 2>&1
  rc=$?
  local summary cuda_total cuda_passed
  summary=$(grep -m1 -E 'tests passed, [0-9]+ tests? failed out of' "$work/$log")
  cuda_total=$(grep -cE 'Test +#[0-9]+: cuda: ' "$work/$log")
  cuda_passed=$(grep -E 'Test +#[0-9]+: cuda: ' "$work/$log" | grep -c ' Passed ')
  local cuda_part="[cuda] tests: $cuda_passed of $cuda_total passed"
  [ "$cuda" = yes ] || cuda_part="[cuda] tests ($cuda_total): skipped, no CUDA"
  local figure="${summary:-no ctest summary (rc $rc)}; $cuda_part"
  if [ "$rc" -eq 0 ]; then
    result "$name" "$figure" PASS
  else
    figure="$figure; failed: $(grep -E '^\s+[0-9]+ - ' "$work/$log" | grep -v '(Skipped)' | head -5 | sed 's/^ *//' | tr '\n' ';')"
    result "$name" "$figure" FAIL
  fi
}

check_debug_bf16() {
  local name="debugmodel, 50 steps, CUDA, bf16 autocast" rc
  if [ "$cuda" != yes ]; then result "$name" "no CUDA device" SKIPPED; return; fi
  train debug50 150 --config configs/debug_model.toml --training.device cuda \
    --training.mixed_precision_param bfloat16 --training.steps 50 --training.seq_len 2048 \
    --training.local_batch_size 8 --metrics.log_freq 1 --debug.seed 42
  rc=$?
  if [ "$rc" -ne 0 ]; then result "$name" "$(why debug50 $rc)" FAIL; return; fi
  stats debug50 5
  local figure="loss $first_loss -> $last_loss; memory ${memory_gib} GiB (${memory_pct}%); tps $tps; tflops $tflops; mfu $mfu%"
  if gt "$first_loss" "$(python3 -c "print($last_loss + 1.0)")" && gt "$memory_gib" 0 &&
     gt 100 "$memory_pct" && gt "$tps" 0 && gt "$tflops" 0 && gt "$mfu" 0 && gt 100 "$mfu"; then
    result "$name" "$figure" PASS
  else
    result "$name" "$figure (expected: loss down by > 1, 0 < memory < 100%, tps and tflops > 0, 0 < mfu < 100%)" FAIL
  fi
}

# first_diff A B: "identical" or the first line where two fingerprint.logs differ.
first_diff() {
  if cmp -s "$1" "$2"; then echo identical; return; fi
  echo "differ from: $(diff "$1" "$2" | grep -m1 '^<' | cut -c3-60)"
}

check_determinism() {
  local runs=(det_a det_b free_a free_b) flags=(true true false false) rc i
  for i in 0 1 2 3; do
    train "${runs[i]}" 120 "${small[@]}" --debug.deterministic="${flags[i]}"
    rc=$?
    if [ "$rc" -ne 0 ]; then
      local reason
      reason=$(why "${runs[i]}" $rc)
      result "debug.deterministic = true, twice: fingerprint.log" "$device_tag run ${runs[i]}: $reason" FAIL
      result "debug.deterministic = false, twice: fingerprint.log" "not run" SKIPPED
      result "time cost of deterministic mode" "not run" SKIPPED
      return
    fi
  done
  local det free
  det=$(first_diff "$work/det_a/fingerprint.log" "$work/det_b/fingerprint.log")
  free=$(first_diff "$work/free_a/fingerprint.log" "$work/free_b/fingerprint.log")
  local n
  n=$(grep -c '^step' "$work/det_a/fingerprint.log")
  if [ "$det" = identical ]; then
    result "debug.deterministic = true, twice: fingerprint.log" "$device_tag identical ($n steps)" PASS
  else
    result "debug.deterministic = true, twice: fingerprint.log" "$device_tag $det" FAIL
  fi
  result "debug.deterministic = false, twice: fingerprint.log" "$device_tag $free" PASS
  local det_s free_s
  stats det_a
  det_s=$step_s
  stats free_a
  free_s=$step_s
  result "time cost of deterministic mode" \
    "$device_tag $(pct "$det_s" "$free_s") step time (median $det_s s vs $free_s s)" PASS
}

check_ac() {
  local rc
  train ac_bitwise 120 "${small[@]}" --activation_checkpoint.mode full \
    --activation_checkpoint.determinism_check bitwise
  rc=$?
  if [ "$rc" -eq 0 ]; then
    stats ac_bitwise
    result "AC full, determinism_check = bitwise" "$device_tag clean, $steps steps" PASS
  else
    result "AC full, determinism_check = bitwise" "$device_tag $(why ac_bitwise $rc)" FAIL
  fi
  train ac_rng 120 "${small[@]}" --activation_checkpoint.mode full \
    --activation_checkpoint.determinism_check bitwise --model.dropout 0.1 \
    --activation_checkpoint.preserve_rng_state false
  rc=$?
  local named
  named=$(grep -m1 -o 'recompute mismatch at step [0-9]*, block layers\.[0-9]*' "$work/ac_rng.log")
  if [ "$rc" -eq 3 ] && [ -n "$named" ] && grep -q 'aten::dropout' "$work/ac_rng.log"; then
    result "AC full, dropout, preserve_rng_state = false" "$device_tag exit 3: $named, aten::dropout" PASS
  else
    result "AC full, dropout, preserve_rng_state = false" \
      "$device_tag expected exit 3 naming the block and aten::dropout; got $(why ac_rng $rc)" FAIL
  fi
}

# A free TCP port on loopback, for a rendezvous.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# step_losses FINGERPRINT: the decimal loss of every step line.
step_losses() { sed -n 's/^step [0-9]* loss [^ ]* (\([^)]*\)).*/\1/p' "$1"; }

# max_rel_diff A B: the largest relative difference between two equal-length lists of numbers.
max_rel_diff() {
  python3 - "$1" "$2" <<'PY'
import sys
a = [float(x) for x in open(sys.argv[1]).read().split()]
b = [float(x) for x in open(sys.argv[2]).read().split()]
print("nan" if len(a) != len(b) or not a else max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)))
PY
}

# NCCL: one process through a real NCCL group (world size 1: the all-reduce path runs) must train
# bit for bit as without a group; with two or more GPUs, 2 ranks x b sequences must train as
# 1 rank x 2b within 1e-5 per step, under FSDP (the default shard degree fills the world: NCCL's
# all-gather and reduce-scatter run).
check_nccl() {
  local one="NCCL group of one process (comm.backend nccl)" two="NCCL FSDP, 2 ranks vs 1 rank" rc
  if [ "$cuda" != yes ]; then
    result "$one" "no CUDA device" SKIPPED
    result "$two" "no CUDA device" SKIPPED
    return
  fi
  MASTER_PORT=$(free_port)
  export MASTER_PORT
  train nccl_one 120 "${small[@]}" --debug.deterministic --comm.backend nccl
  rc=$?
  unset MASTER_PORT
  if [ "$rc" -ne 0 ]; then
    result "$one" "$(why nccl_one $rc)" FAIL
  elif ! grep -q '^comm_numerics nccl NCCL_ALGO=Ring NCCL_PROTO=Simple' "$work/nccl_one/fingerprint.log"; then
    result "$one" "fingerprint.log has no comm_numerics line for NCCL" FAIL
  elif [ -f "$work/det_a/fingerprint.log" ] &&
       cmp -s <(grep '^step' "$work/nccl_one/fingerprint.log") <(grep '^step' "$work/det_a/fingerprint.log"); then
    result "$one" "trains; step lines identical to the deterministic run without a group" PASS
  else
    result "$one" "step lines differ from the deterministic run without a group (or it did not run)" FAIL
  fi
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "$gpus" -lt 2 ]; then result "$two" "$gpus GPU: needs 2" SKIPPED; return; fi
  local t port
  t=$(limit 180)
  if [ "$t" -eq 0 ]; then result "$two" "time budget spent" SKIPPED; return; fi
  port=$(free_port)
  # Raw tokens cut into (seq_len + 1)-token documents: rank r of 2 reads documents r, r + 2, ...,
  # so 2 ranks x 2 sequences see the documents of 1 rank x 4 (synthetic text would not).
  python3 -c 'import random, struct; random.seed(7); open("'"$work"'/tokens.bin", "wb").write(struct.pack("<60000H", *[random.randrange(2048) for _ in range(60000)]))'
  # float32: under bf16 autocast (CUDA's "auto") FSDP gathers bfloat16 weights and the ranks
  # part from one process by bf16's rounding, not the 1e-5 this checks.
  local base=(--config configs/debug_model.toml --training.device cuda --training.seq_len 512
    --training.mixed_precision_param float32
    --training.steps 10 --debug.seed 42 --metrics.log_freq 1 --training.dataset tokens
    --training.dataset_path "$work/tokens.bin")
  rm -rf "${work:?}/nccl_two" "${work:?}/nccl_ref"
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
      timeout -k 10 "$t" "$bin" "${base[@]}" --training.local_batch_size 2 \
      --job.dump_folder "$work/nccl_two" >"$work/nccl_two.rank$r.log" 2>&1 &
  done
  wait
  train nccl_ref 120 "${base[@]}" --training.local_batch_size 4
  rc=$?
  if [ ! -f "$work/nccl_two/fingerprint.log" ] || [ "$rc" -ne 0 ]; then
    result "$two" "a run failed: $(tail -1 "$work/nccl_two.rank0.log") / $(why nccl_ref $rc)" FAIL
    return
  fi
  if ! grep -q 'FSDP: parameters, gradients and AdamW state sharded' "$work/nccl_two.rank0.log"; then
    result "$two" "the 2-rank run did not shard (its data parallel line: $(grep 'data parallel' "$work/nccl_two.rank0.log" | head -1))" FAIL
    return
  fi
  step_losses "$work/nccl_two/fingerprint.log" >"$work/nccl_two.losses"
  step_losses "$work/nccl_ref/fingerprint.log" >"$work/nccl_ref.losses"
  local diff
  diff=$(max_rel_diff "$work/nccl_two.losses" "$work/nccl_ref.losses")
  if [ "$diff" != nan ] && gt 1e-5 "$diff"; then
    result "$two" "losses of 10 steps agree: max relative difference $diff (limit 1e-5)" PASS
  else
    result "$two" "max relative difference $diff (limit 1e-5)" FAIL
  fi
}

check_1b() {
  local names=("1B, seq_len 2048, bf16: tokens/s and MFU" "1B: overhead of full AC and of the bitwise checker" "1B: peak memory with AC none, full, selective 2")
  if [ "$cuda" != yes ]; then
    for n in "${names[@]}"; do result "$n" "no CUDA device" SKIPPED; done
    return
  fi
  local base=(--model.flavor 1B --training.device cuda --training.mixed_precision_param bfloat16
    --training.seq_len 2048 --training.local_batch_size 4 --training.steps 12
    --lr_scheduler.warmup_steps 2 --metrics.log_freq 1 --debug.seed 42)
  local runs=(b_none b_full b_sel2 b_bitwise) rc i ok=1
  local extra=("--activation_checkpoint.mode none" "--activation_checkpoint.mode full"
    "--activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option 2"
    "--activation_checkpoint.mode full --activation_checkpoint.determinism_check bitwise")
  declare -A run_tps run_mfu run_mem run_step run_err
  for i in 0 1 2 3; do
    # shellcheck disable=SC2086
    train "${runs[i]}" 150 "${base[@]}" ${extra[i]}
    rc=$?
    if [ "$rc" -ne 0 ]; then run_err[${runs[i]}]=$(why "${runs[i]}" $rc); ok=0; continue; fi
    stats "${runs[i]}" 3
    run_tps[${runs[i]}]=$tps run_mfu[${runs[i]}]=$mfu run_mem[${runs[i]}]=$memory_gib
    run_step[${runs[i]}]=$step_s
  done
  if [ -n "${run_err[b_none]:-}" ]; then
    result "${names[0]}" "${run_err[b_none]}" FAIL
  else
    local figure="tps ${run_tps[b_none]}, mfu ${run_mfu[b_none]}% of 989 TFLOP/s (AC none, batch 4; target >= 40%)"
    if gt "${run_mfu[b_none]}" 40; then result "${names[0]}" "$figure" PASS; else result "${names[0]}" "$figure" FAIL; fi
  fi
  if [ -n "${run_err[b_none]:-}${run_err[b_full]:-}${run_err[b_bitwise]:-}" ]; then
    result "${names[1]}" "failed: ${run_err[*]}" FAIL
  else
    result "${names[1]}" "full AC $(pct "${run_step[b_full]}" "${run_step[b_none]}") step time vs none; bitwise checker $(pct "${run_step[b_bitwise]}" "${run_step[b_full]}") vs full with the default check" PASS
  fi
  if [ "$ok" -eq 1 ] || [ -z "${run_err[b_none]:-}${run_err[b_full]:-}${run_err[b_sel2]:-}" ]; then
    local figure="none ${run_mem[b_none]} GiB, full ${run_mem[b_full]} GiB, selective 2 ${run_mem[b_sel2]} GiB (max reserved)"
    if gt "${run_mem[b_none]}" "${run_mem[b_sel2]}" && gt "${run_mem[b_sel2]}" "${run_mem[b_full]}"; then
      result "${names[2]}" "$figure" PASS
    else
      result "${names[2]}" "$figure (expected none > selective 2 > full)" FAIL
    fi
  else
    result "${names[2]}" "failed: ${run_err[*]}" FAIL
  fi
}

# replay_across NAME FROM TO: a step captured on device FROM, replayed on device TO (float32 on
# both, so that only the device differs): the report's verdict line, or why it failed.
replay_across() {
  local name=$1 from=$2 to=$3 rc t
  train "$name" 120 --model.flavor debugmodel --training.device "$from" \
    --training.mixed_precision_param float32 --training.seq_len 128 --training.local_batch_size 2 \
    --training.steps 2 --debug.seed 42 --debug.capture_steps 2
  rc=$?
  if [ "$rc" -ne 0 ]; then
    result "capture on $from, replay on $to" "$(why "$name" $rc)" FAIL
    return
  fi
  t=$(limit 120)
  timeout -k 10 "$t" "$bin" replay "$work/$name/capture/step2" --device "$to" \
    >"$work/$name.replay.log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ]; then
    result "capture on $from, replay on $to" \
      "$(grep -E '^(bitwise identical|parted)' "$work/$name.replay.log" | head -1); first: $(sed -n '/^first op that differs/{n;p;}' "$work/$name.replay.log" | head -1 | tr -s ' '); $(grep -m1 'verdict' "$work/$name.replay.log" | tr -s ' ')" PASS
  else
    result "capture on $from, replay on $to" "exit $rc: $(tail -2 "$work/$name.replay.log" | tr '\n' ' ' | cut -c1-200)" FAIL
  fi
}

check_capture_replay() {
  if [ "$cuda" != yes ]; then
    result "capture on cpu, replay on cuda (and back)" "no CUDA" SKIPPED
    return
  fi
  replay_across capture_cpu cpu cuda
  replay_across capture_cuda cuda cpu
}

# --- main -----------------------------------------------------------------------------------

partial_build=no
if ! build; then
  echo "gpu_check: $build_desc" >&2
  if [ "$partial_build" != yes ]; then
    write_report
    exit 1
  fi
  result "build" "$build_desc (titan-train linked: its checks run)" FAIL
fi
cuda=no
if "$bin" --version 2>/dev/null | grep -q 'cuda available: yes'; then cuda=yes; fi
if [ "$cuda" = yes ]; then
  device_desc="cuda: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  device_tag="[cuda]"
  # The debug model at torchtitan's debug size, bf16.
  small=(--config configs/debug_model.toml --training.device cuda --training.mixed_precision_param bfloat16
    --training.seq_len 2048 --training.local_batch_size 8 --training.steps 20 --metrics.log_freq 1 --debug.seed 42)
else
  device_desc="no CUDA (dry run: CUDA checks SKIPPED, the others on the CPU at small sizes)"
  device_tag="[cpu]"
  small=(--config configs/debug_model.toml --training.device cpu --training.seq_len 128
    --training.local_batch_size 2 --training.steps 6 --metrics.log_freq 1 --debug.seed 42)
fi

# What only a GPU can show comes first; the CPU part of the suite (CI runs it too) gets what is
# left of the budget.
check_unit_tests "unit tests tagged [cuda]" ctest_cuda.log -R '^cuda: '
check_debug_bf16
check_determinism
check_nccl
check_ac
check_capture_replay
check_1b
check_unit_tests "unit tests, the rest" ctest.log -E '^cuda: '
write_report
exit "$failed"
