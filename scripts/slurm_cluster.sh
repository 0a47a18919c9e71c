#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for scripts/test_slurm.sh and for trying
# scripts/multinode_trainer.slurm: Debian's slurm-wlm (22.05 on bookworm) and munge, no systemd,
# no cgroups, no accounting database, every daemon on 127.0.0.1. Needs root; jobs run as root.
#
#   scripts/slurm_cluster.sh up       installs what is missing (apt), writes /etc/slurm/slurm.conf,
#                                     starts munged, slurmctld and slurmd, waits for an idle node
#   scripts/slurm_cluster.sh status   the daemons' PIDs, sinfo, squeue
#   scripts/slurm_cluster.sh down     cancels every job, then stops the daemons this script started,
#                                     by the PIDs in their pid files, and waits until they are gone
#
# Both are idempotent: `up` on a running cluster with the same config changes nothing (a changed
# config restarts slurmctld and slurmd); `down` with nothing running does nothing. A munged that
# was running before `up` is used and left running. The node is `localhost` (NodeAddr 127.0.0.1)
# with SLURM_CLUSTER_CPUS CPUs, default the larger of nproc and 2, so two 1-CPU tasks fit on any
# machine (slurmd trusts the config: SlurmdParameters=config_overrides). Finished jobs stay
# visible to `scontrol show job` for MinJobAge (15 minutes; there is no sacct). An existing
# /etc/slurm/slurm.conf that this script did not write is never replaced (exit 2).
# State: /var/lib/titan-slurm, logs: /var/log/titan-slurm, pid files: /run/titan-slurm.
set -euo pipefail

node=localhost
cpus=${SLURM_CLUSTER_CPUS:-$(($(nproc) > 2 ? $(nproc) : 2))}
conf=/etc/slurm/slurm.conf
marker="# written by titan-train's scripts/slurm_cluster.sh"
state=/var/lib/titan-slurm
logs=/var/log/titan-slurm
run=/run/titan-slurm

log() { echo "slurm_cluster: $*" >&2; }
die() {
  log "$1"
  exit "${2:-1}"
}
[ "$(id -u)" -eq 0 ] || die "must run as root" 2

# pid_of NAME: the PID in $run/NAME.pid when that process is alive and is NAME.
pid_of() {
  local pid
  pid=$({ tr -dc 0-9 <"$run/$1.pid"; } 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] || return 1
  [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != [ZX] ]] || return 1
  echo "$pid"
}

# stop NAME: SIGTERM to the PID in its pid file, SIGKILL after 15 s, then remove the pid file.
stop() {
  local pid i
  if pid=$(pid_of "$1"); then
    log "stopping $1 (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
      pid_of "$1" >/dev/null || break
      sleep 0.1
    done
    if pid_of "$1" >/dev/null; then
      log "$1 (pid $pid) still running after 15 s: SIGKILL"
      kill -9 "$pid" 2>/dev/null || true
      sleep 0.5
    fi
  fi
  rm -f "$run/$1.pid"
}

install_packages() {
  local cmd missing=0
  for cmd in slurmctld slurmd sbatch munged; do command -v "$cmd" >/dev/null || missing=1; done
  [ "$missing" = 1 ] || return 0
  log "installing slurmctld slurmd slurm-client munge"
  # The packages' start scripts are refused in containers (policy-rc.d): harmless, we start them.
  { apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      slurmctld slurmd slurm-client munge; } >"$logs/apt.log" 2>&1 ||
    {
      tail -20 "$logs/apt.log" >&2
      die "apt-get install failed (log: $logs/apt.log)"
    }
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi # running (ours or not)
  if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /etc/munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
  chmod 0700 /etc/munge
  chmod 0400 /etc/munge/munge.key
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged # forks; writes /run/munge/munged.pid
  local i
  for ((i = 0; i < 100; i++)); do
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
      cp /run/munge/munged.pid "$run/munged.pid" # marks it as ours, for `down`
      return 0
    fi
    sleep 0.1
  done
  die "munged does not answer (log: /var/log/munge/munged.log)"
}

# write_conf: writes slurm.conf; returns 0 when it changed.
write_conf() {
  local mem new
  mem=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  new=$(
    cat <<EOF
$marker
ClusterName=titanci
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
# Bind every socket to 127.0.0.1 instead of 0.0.0.0.
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
# No cgroups, no systemd: processes tracked through /proc, no CPU binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# A job that can never fit is refused by sbatch instead of pending forever.
EnforcePartLimits=ALL
ReturnToService=2
# The node's CPUs and memory come from this file, not from what slurmd finds.
SlurmdParameters=config_overrides
# No accounting database: finished jobs are seen through scontrol for this long (s).
MinJobAge=900
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d
SlurmctldPidFile=$run/slurmctld.pid
SlurmdPidFile=$run/slurmd.pid
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd.log
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$node CPUs=$cpus RealMemory=${mem:-1000}
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  )
  if [ -f "$conf" ] && [ "$(cat "$conf")" = "$new" ]; then return 1; fi
  mkdir -p /etc/slurm
  printf '%s\n' "$new" >"$conf.tmp"
  mv "$conf.tmp" "$conf"
  log "wrote $conf ($cpus CPUs)"
}

up() {
  local t0=$SECONDS i st=""
  if [ -f "$conf" ] && ! grep -qxF "$marker" "$conf"; then
    die "$conf exists and was not written by this script: not replacing it" 2
  fi
  mkdir -p "$state/ctld" "$state/d" "$logs" "$run"
  install_packages
  start_munge
  if write_conf; then
    stop slurmd
    stop slurmctld
  fi
  if ! pid_of slurmctld >/dev/null; then
    log "starting slurmctld"
    slurmctld
  fi
  if ! pid_of slurmd >/dev/null; then
    log "starting slurmd"
    slurmd -N "$node"
  fi
  for ((i = 0; i < 120; i++)); do
    st=$(sinfo -h -n "$node" -o %T 2>/dev/null || true)
    case "$st" in
      idle | mixed | allocated)
        log "node $node is $st ($cpus CPUs), up in $((SECONDS - t0)) s"
        return 0
        ;;
      down* | drain*) scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
  done
  tail -n 20 "$logs/slurmctld.log" "$logs/slurmd.log" >&2 || true
  die "node $node not idle after 60 s (state '$st')"
}

status() {
  local name
  for name in munged slurmctld slurmd; do
    echo "$name: $(pid_of "$name" || echo "not running (or not started by this script)")"
  done
  # Without a controller, sinfo and squeue retry for a while before failing.
  if pid_of slurmctld >/dev/null; then
    sinfo
    squeue
  fi
}

down() {
  local t0=$SECONDS i
  if pid_of slurmctld >/dev/null && pid_of slurmd >/dev/null; then
    if [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
      log "cancelling jobs: $(squeue -h -o %i | paste -sd' ')"
      squeue -h -o %i | xargs -r scancel
      for ((i = 0; i < 60; i++)); do
        [ -n "$(squeue -h -o %i 2>/dev/null)" ] || break
        sleep 0.5
      done
    fi
  fi
  stop slurmd
  stop slurmctld
  stop munged
  log "down in $((SECONDS - t0)) s"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) die "usage: $0 up|down|status" 2 ;;
esac
