#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains with
#   build/titan-train --config ${CONFIG_FILE:-configs/debug_model.toml} "$@"
# Example: CONFIG_FILE=configs/debug_model.toml scripts/run_train.sh --training.steps 20
#
# NGPU=N (N > 1, torchtitan's name; CPU or GPU) starts N local processes of that command with
# torchrun's variables: RANK and LOCAL_RANK 0..N-1, WORLD_SIZE and LOCAL_WORLD_SIZE N,
# MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default 29500) unless set, LOG_RANK (default
# 0: the rank that prints the console line). No Python. When a process exits non-zero, the
# others get SIGTERM, and SIGKILL KILL_GRACE_S seconds later (default 30); the exit code is the
# first failing process's, 0 only when all exit 0. SIGINT, SIGTERM or SIGHUP to this script is
# passed on to every process, and the script waits for them (with checkpoint.enable they save
# and exit 0). The processes run in their own process groups, so a Ctrl-C reaches them once,
# through this script. TITAN_TRAIN_BIN runs another binary, without the install and build steps.
#   NGPU=2 scripts/run_train.sh --training.steps 20
set -euo pipefail
cd "$(dirname "$0")/.."
ngpu=${NGPU:-1}
if ! [[ "$ngpu" =~ ^[1-9][0-9]*$ ]]; then
  echo "run_train: NGPU must be a positive integer, got '$ngpu'" >&2
  exit 2
fi
bin=${TITAN_TRAIN_BIN:-build/titan-train}
if [ -z "${TITAN_TRAIN_BIN:-}" ]; then
  scripts/install_deps.sh
  scripts/build.sh --target titan-train  # only the binary: scripts/test.sh builds the tests
fi
cmd=("$bin" --config "${CONFIG_FILE:-configs/debug_model.toml}" "$@")
if [ "$ngpu" -eq 1 ]; then
  exec "${cmd[@]}"
fi

export WORLD_SIZE=$ngpu LOCAL_WORLD_SIZE=$ngpu LOG_RANK=${LOG_RANK:-0}
export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=${MASTER_PORT:-29500}
grace=${KILL_GRACE_S:-30}
set -m # every background process in its own process group: the terminal's Ctrl-C reaches only us
declare -A alive=() # pid -> rank
for ((r = 0; r < ngpu; r++)); do
  RANK=$r LOCAL_RANK=$r "${cmd[@]}" &
  alive[$!]=$r
done
echo "run_train: $ngpu processes (pids ${!alive[*]}), master $MASTER_ADDR:$MASTER_PORT" >&2

# signal_all SIG: sends SIG to every process still running.
signal_all() {
  local pid
  for pid in "${!alive[@]}"; do kill "-$1" "$pid" 2>/dev/null || true; done
}
for sig in INT TERM HUP; do
  # shellcheck disable=SC2064 # $sig is meant to be expanded now
  trap "echo 'run_train: SIG$sig: passing it on' >&2; signal_all $sig" "$sig"
done

status=0
timer=""
while [ ${#alive[@]} -gt 0 ]; do
  done_pid=""
  set +e
  wait -n -p done_pid "${!alive[@]}" $timer
  st=$?
  set -e
  if [ -z "${done_pid:-}" ]; then continue; fi # a trapped signal interrupted the wait
  if [ "$done_pid" = "$timer" ]; then
    echo "run_train: still running ${grace} s after SIGTERM: SIGKILL to pids ${!alive[*]}" >&2
    signal_all KILL
    timer=""
    continue
  fi
  rank=${alive[$done_pid]}
  unset "alive[$done_pid]"
  if [ "$st" -ne 0 ] && [ "$status" -eq 0 ]; then
    status=$st
    if [ ${#alive[@]} -gt 0 ]; then
      echo "run_train: rank $rank exited with $st: SIGTERM to the others (pids ${!alive[*]})" >&2
      signal_all TERM
      sleep "$grace" &
      timer=$!
    fi
  fi
done
if [ -n "$timer" ]; then kill "$timer" 2>/dev/null || true; fi
exit "$status"
