#!/usr/bin/env bash
# Stops the test Slurm cluster started by slurm-up.sh (by pid file, never by
# name) and removes its network namespace and state. Idempotent.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/slurm-env.sh"
stop() {  # pidfile, expected process name
  [ -f "$1" ] || return 0
  local pid; pid=$(cat "$1")
  if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]; then
    kill "$pid"
    for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    [ -d "/proc/$pid" ] && kill -9 "$pid"
  fi
  rm -f "$1"
}
stop "$SLURM_STATE/slurmd.pid" slurmd
stop "$SLURM_STATE/slurmctld.pid" slurmctld
ip netns list 2>/dev/null | grep -qw "$SLURM_NETNS" && ip netns del "$SLURM_NETNS"
rm -rf "$SLURM_STATE"
exit 0
