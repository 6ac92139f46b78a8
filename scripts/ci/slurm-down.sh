#!/usr/bin/env bash
# Stops the test Slurm cluster started by slurm-up.sh (one node or many) and
# removes its network namespaces, hosts files and state. Processes end by pid (pid
# files checked against /proc/PID/comm, and what is left inside the namespaces
# this script's cluster created), never by name. Idempotent; also after a partial
# bring-up and after a node was killed (slurm-node.sh kill).
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
# Every namespace the cluster may have: the controller's and mpiddp-node1..9.
namespaces=("$SLURM_NETNS")
for k in $(seq 9); do namespaces+=("$(node_netns "node$k")"); done
for pidfile in "$SLURM_STATE"/slurmd*.pid; do stop "$pidfile" slurmd; done
stop "$SLURM_STATE/slurmctld.pid" slurmctld
for ns in "${namespaces[@]}"; do
  ip netns list 2>/dev/null | grep -q "^$ns\( \|$\)" || { rm -rf "/etc/netns/$ns"; continue; }
  # Left-overs of jobs (ranks, slurmstepd) end with their namespace.
  pids=$(ip netns pids "$ns" 2>/dev/null)
  [ -z "$pids" ] || kill -9 $pids 2>/dev/null
  ip netns del "$ns"
  rm -rf "/etc/netns/$ns"
done
rm -rf "$SLURM_STATE"
rmdir /etc/netns 2>/dev/null  # only if empty: other namespaces may keep files there
exit 0
