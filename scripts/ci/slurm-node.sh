#!/usr/bin/env bash
# Kills or revives one node of the cluster that `slurm-up.sh --nodes N` started:
#   slurm-node.sh kill NAME     SIGKILL every process in the node's network
#                               namespace (slurmd, slurmstepd, ranks): the node dies
#                               as a machine would, without a word to anyone
#   slurm-node.sh revive NAME   start its slurmd again; the node returns to service
#                               (ReturnToService=2) once it registers
# NAME is nodeK. Both are idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/slurm-env.sh"
[ $# = 2 ] && [[ $2 =~ ^node[1-9]$ ]] || { echo "usage: slurm-node.sh kill|revive nodeK" >&2; exit 2; }
ns=$(node_netns "$2")
ip netns list | grep -q "^$ns\( \|$\)" || { echo "slurm-node: no node $2 (no namespace $ns)" >&2; exit 2; }
case $1 in
  kill)
    # The list can grow while we kill (a slurmstepd forking), and a killed process
    # stays listed until the kernel has torn down its memory (seconds on a loaded
    # machine): repeat until empty, for up to 60 s by the clock since boot.
    read -r up _ < /proc/uptime; deadline=$(( ${up%.*} + 60 ))
    while :; do
      pids=$(ip netns pids "$ns")
      [ -n "$pids" ] || { echo "slurm-node: $2 is dead"; exit 0; }
      kill -9 $pids 2>/dev/null || true
      read -r up _ < /proc/uptime; [ "${up%.*}" -lt "$deadline" ] || break
      sleep 0.05
    done
    echo "slurm-node: processes still start in $ns: $(ip netns pids "$ns" | tr '\n' ' ')" >&2; exit 1 ;;
  revive)
    pidfile=$SLURM_STATE/slurmd-$2.pid
    if [ -f "$pidfile" ] && [ "$(cat "/proc/$(cat "$pidfile")/comm" 2>/dev/null)" = slurmd ]; then
      echo "slurm-node: $2's slurmd already runs"; exit 0
    fi
    start_node_slurmd "$2"
    echo "slurm-node: $2's slurmd started" ;;
  *) echo "usage: slurm-node.sh kill|revive nodeK" >&2; exit 2 ;;
esac
