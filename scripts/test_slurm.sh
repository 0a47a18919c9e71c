#!/usr/bin/env bash
# The real-Slurm check (issue 12), run by .ci/run after scripts/test.sh has built build/titan-train.
# Starts the one-node cluster of scripts/slurm_cluster.sh (root; all traffic on 127.0.0.1), then
# submits scripts/multinode_trainer.slurm from this checkout:
#   1. 2 tasks on CPU (1 node, 2 tasks per node, 1 CPU each), configs/debug_model.toml, 4 short
#      steps: JobState=COMPLETED ExitCode=0:0, the log shows "rank 0 of 2" and "rank 1 of 2", and
#      the last step's loss is below the first's;
#   2. the same with a bad config (--training.steps 0): JobState=FAILED ExitCode=2:0, refused by
#      the job script's config check before srun starts any task.
# Jobs are followed with `scontrol show job` (no accounting database, so no sacct); a job not
# done after JOB_TIMEOUT_S seconds (default 300) is cancelled and fails the check. The cluster
# is stopped at the end whatever happens. Logs and outputs go to a temporary folder, removed when
# every check passes and kept (its path printed) otherwise. Prints PASS/FAIL per check and the
# time of each step; exits 1 when a check fails, 2 when there is no build/titan-train.
set -euo pipefail
cd "$(dirname "$0")/.."
timeout_s=${JOB_TIMEOUT_S:-300}
if [ ! -x build/titan-train ]; then
  echo "test_slurm: no build/titan-train: run scripts/build.sh (or scripts/test.sh) first" >&2
  exit 2
fi
work=$(mktemp -d /tmp/titan-test-slurm.XXXXXX)
failed=0
results=()

finish() {
  local rc=$? t=$SECONDS
  if [ "$rc" -ne 0 ]; then fail "the script stopped early (exit code $rc)"; fi
  bash scripts/slurm_cluster.sh down || failed=1
  echo "test_slurm: cluster down in $((SECONDS - t)) s"
  printf '%s\n' "${results[@]}"
  if [ "$failed" = 0 ]; then
    rm -rf "$work"
    echo "test_slurm: PASS"
  else
    echo "test_slurm: FAIL (logs and outputs kept in $work)"
    exit 1
  fi
}
trap finish EXIT
# pass/fail LINE: records one result.
pass() { results+=("test_slurm: PASS  $*"); }
fail() {
  results+=("test_slurm: FAIL  $*")
  failed=1
}

t=$SECONDS
bash scripts/slurm_cluster.sh up
echo "test_slurm: cluster up in $((SECONDS - t)) s"

# submit NAME ARG...: submits the job script with titan-train arguments ARG..., prints the job id.
submit() {
  local name=$1
  shift
  CONFIG_FILE=configs/debug_model.toml sbatch --parsable --chdir="$PWD" --job-name="$name" \
    --output="$work/$name-%j.out" --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=10 \
    scripts/multinode_trainer.slurm --training.device cpu --training.seq_len 128 \
    --training.local_batch_size 4 --job.dump_folder "$work/$name" "$@"
}

# wait_job ID: waits until the job has ended, prints "JobState=... ExitCode=..."; cancels it
# after timeout_s seconds and prints "JobState=<still ...> ...".
wait_job() {
  local id=$1 t0=$SECONDS info state
  while :; do
    info=$(scontrol show job -o "$id" 2>/dev/null || true)
    state=$(grep -o 'JobState=[A-Z_]*' <<<"$info" || true)
    case "${state#JobState=}" in
      PENDING | CONFIGURING | RUNNING | COMPLETING | REQUEUED | "") ;;
      *) break ;;
    esac
    if [ $((SECONDS - t0)) -ge "$timeout_s" ]; then
      scancel "$id" || true
      state="JobState=<still ${state#JobState=} after ${timeout_s} s: cancelled>"
      break
    fi
    sleep 1
  done
  echo "$state $(grep -o 'ExitCode=[0-9:]*' <<<"$info" || true)"
}

# 1. Two ranks train.
t=$SECONDS
id=$(submit dp2 --training.steps 4) || exit 1
result=$(wait_job "$id")
log="$work/dp2-$id.out"
echo "test_slurm: 2-task job $id: $result in $((SECONDS - t)) s"
losses=$(sed -n 's/.*step: *[0-9]* *loss: *\([0-9.eE+-]*\).*/\1/p' "$log" 2>/dev/null |
  paste -sd' ' || true)
if [ "$result" != "JobState=COMPLETED ExitCode=0:0" ]; then
  fail "2-task job $id: $result, expected JobState=COMPLETED ExitCode=0:0 ($log)"
elif ! grep -q 'rank 0 of 2' "$log" || ! grep -q 'rank 1 of 2' "$log"; then
  fail "2-task job $id: the log does not show both 'rank 0 of 2' and 'rank 1 of 2' ($log)"
elif ! awk -v l="$losses" 'BEGIN { n = split(l, a, " "); exit !(n >= 2 && a[n] < a[1] + 0) }'
then
  fail "2-task job $id: no falling loss in the log (losses: '${losses}') ($log)"
else
  pass "2-task job $id: COMPLETED 0:0, ranks 0 and 1 of 2, loss ${losses// / -> }"
fi
if [ "$failed" = 1 ]; then tail -n 40 "$log" 2>/dev/null || true; fi

# 2. A bad config fails the job with titan-train's exit code 2.
t=$SECONDS
id=$(submit badconfig --training.steps 0) || exit 1
result=$(wait_job "$id")
log="$work/badconfig-$id.out"
echo "test_slurm: bad-config job $id: $result in $((SECONDS - t)) s"
if [ "$result" != "JobState=FAILED ExitCode=2:0" ]; then
  fail "bad-config job $id: $result, expected JobState=FAILED ExitCode=2:0 ($log)"
  tail -n 20 "$log" 2>/dev/null || true
elif ! grep -q "the config was refused (exit 2); no task started" "$log" ||
  grep -q "^srun" "$log"; then
  # Tasks started on a bad config race to fail: a task srun stops can make the code 143.
  fail "bad-config job $id: tasks were started, or the refusal is missing from the log ($log)"
  tail -n 20 "$log" 2>/dev/null || true
else
  pass "bad-config job $id: FAILED 2:0 before any task started"
fi
