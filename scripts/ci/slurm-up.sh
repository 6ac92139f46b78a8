#!/usr/bin/env bash
# Brings up a Slurm cluster on this machine for the `slurm` tests: munged (as user
# munge), slurmctld and slurmd (as root). No Slurm or MPI traffic can leave the
# machine: every daemon and every Slurm command runs inside network namespaces
# this script creates. Slurm commands: scripts/ci/slurm-exec; stop: slurm-down.sh.
#
#   slurm-up.sh              one node: slurmctld and slurmd in one namespace
#                            ($SLURM_NETNS) whose only traffic is on loopback
#   slurm-up.sh --nodes N    N nodes (2..9), each a slurmd in a namespace of its
#                            own (mpiddp-nodeK) with its own hostname (nodeK, a UTS
#                            namespace) and address 10.217.0.(10+K), joined by a
#                            veth pair to a bridge in $SLURM_NETNS, where slurmctld
#                            (10.217.0.1) and the client commands run. `--nodes 1`
#                            is the one-node cluster.
#
# Idempotent: run again with the daemons up, it only checks them (a cluster of
# another size must be stopped first). Prints the seconds to all nodes idle.
# Environment: MPIDDP_SLURM_CPUS (CPUs each node advertises; default 8 for one
# node, 2 for many, so that a 2-task job fills a node and jobs spread over nodes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/slurm-env.sh"
nodes=1
case "${1:-}" in
  "") ;;
  --nodes) nodes=${2:-} ;;
  *) echo "usage: slurm-up.sh [--nodes N]" >&2; exit 2 ;;
esac
[[ $nodes =~ ^[1-9]$ ]] || { echo "slurm-up: --nodes needs 1..9, not '$nodes'" >&2; exit 2; }
command -v slurmctld >/dev/null || { echo "slurm-up: slurm-wlm is not installed" >&2; exit 2; }
if [ -f "$SLURM_STATE/nodes" ] && [ "$(cat "$SLURM_STATE/nodes")" != "$nodes" ]; then
  echo "slurm-up: a $(cat "$SLURM_STATE/nodes")-node cluster is up; stop it first (slurm-down.sh)" >&2; exit 2
fi
started=$(date +%s.%N)

alive() { [ -f "$1" ] && [ "$(cat "/proc/$(cat "$1")/comm" 2>/dev/null)" = "$2" ]; }
netns_exists() { ip netns list | grep -q "^$1\( \|$\)"; }

# One node: loopback only.
one_node_network() {
  netns_exists "$SLURM_NETNS" && return 0
  ip netns add "$SLURM_NETNS"
  ip netns exec "$SLURM_NETNS" ip link set lo up
  # glibc's getaddrinfo(AI_ADDRCONFIG), which Slurm uses, finds no IPv4 at all
  # while loopback is the only address: give the namespace a link-local address
  # on a veth pair that lives and ends inside the namespace. Nothing is ever sent
  # to it; all Slurm traffic is 127.0.0.1.
  ip netns exec "$SLURM_NETNS" ip link add mpiddp0 type veth peer name mpiddp1
  ip netns exec "$SLURM_NETNS" ip addr add 169.254.217.1/32 dev mpiddp0
  ip netns exec "$SLURM_NETNS" ip link set mpiddp1 up
  ip netns exec "$SLURM_NETNS" ip link set mpiddp0 up
}

# Many nodes: a bridge in $SLURM_NETNS, one namespace per node with a veth into it.
cluster_network() {
  if ! netns_exists "$SLURM_NETNS"; then
    ip netns add "$SLURM_NETNS"
    ip -n "$SLURM_NETNS" link set lo up
    ip -n "$SLURM_NETNS" link add "$SLURM_BRIDGE" type bridge
    ip -n "$SLURM_NETNS" addr add "$SLURM_SUBNET.1/24" dev "$SLURM_BRIDGE"
    ip -n "$SLURM_NETNS" link set "$SLURM_BRIDGE" up
  fi
  local k ns
  for k in $(seq "$nodes"); do
    ns=$(node_netns "node$k")
    netns_exists "$ns" && continue
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$SLURM_NETNS" link add "mpiddp-n$k" type veth peer name eth0 netns "$ns"
    ip -n "$SLURM_NETNS" link set "mpiddp-n$k" master "$SLURM_BRIDGE" up
    ip -n "$ns" addr add "$(node_address "node$k")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

# Names resolve inside the namespaces only: `ip netns exec NS` bind-mounts
# /etc/netns/NS/hosts over /etc/hosts for everything it starts, so the machine's
# own /etc/hosts is never edited.
cluster_hosts_files() {
  local k ns
  for ns in "$SLURM_NETNS" $(for k in $(seq "$nodes"); do node_netns "node$k"; done); do
    mkdir -p "/etc/netns/$ns"
    {
      echo "# Written by mpiddp scripts/ci/slurm-up.sh; removed by slurm-down.sh."
      echo "127.0.0.1 localhost"
      echo "$SLURM_SUBNET.1 $host"
      for k in $(seq "$nodes"); do echo "$(node_address "node$k") node$k"; done
    } > "/etc/netns/$ns/hosts"
  done
}

# munge: a key, a socket directory owned by munge, the daemon as munge. Its socket
# is a file, so every namespace reaches it.
start_munge() {
  mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
  chmod 0400 /etc/munge/munge.key
  chmod 0755 /run/munge
  alive /run/munge/munged.pid munged || runuser -u munge -- /usr/sbin/munged
}

# The settings both shapes share (docs/slurm.md, "Many nodes", says why each is there);
# \$1: more SchedulerParameters.
common_conf() {
  cat <<CONF
ClusterName=mpiddp-ci
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job may start only once its old credential expired (cred_expire + 1 s
# after the requeue); 120 s by default, 30 s here so requeue tests stay short. Not
# shorter: a requeued job started 11 s after a node failure can meet its previous
# run's steps still ending on a busy machine.
AuthInfo=cred_expire=30
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0${1:-}
MinJobAge=4
KillWait=5
JobRequeue=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$SLURM_STATE/state
SlurmctldPidFile=$SLURM_STATE/slurmctld.pid
SlurmctldLogFile=$SLURM_STATE/slurmctld.log
CONF
}

one_node_conf() {
  cat <<CONF
# Written by mpiddp scripts/ci/slurm-up.sh: one node on loopback, for tests.
SlurmctldHost=$host(127.0.0.1)
$(common_conf)
SlurmdSpoolDir=$SLURM_STATE/spool
SlurmdPidFile=$SLURM_STATE/slurmd.pid
SlurmdLogFile=$SLURM_STATE/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=${MPIDDP_SLURM_CPUS:-8} RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
}

cluster_conf() {
  local k
  cat <<CONF
# Written by mpiddp scripts/ci/slurm-up.sh --nodes $nodes: $nodes nodes in network
# namespaces on one machine, for tests.
SlurmctldHost=$host($SLURM_SUBNET.1)
# A job requeued after a node failure waits for its BeginTime (cred_expire), and
# then only the backfill scheduler starts it: every 2 s here, 30 s by default.
$(common_conf ,bf_interval=2)
# A node whose slurmd stopped answering is DOWN after 5 s (300 s by default), and
# its jobs end (and requeue) then. slurmctld's ping of a dead node fails only after
# MessageTimeout (it retries a refused connection until then; 10 s by default):
# 5 s here, so a node is DOWN some 10 to 15 s after its death, not 26 s.
SlurmdTimeout=5
MessageTimeout=5
SlurmdSpoolDir=$SLURM_STATE/spool-%n
SlurmdPidFile=$SLURM_STATE/slurmd-%n.pid
SlurmdLogFile=$SLURM_STATE/slurmd-%n.log
# One slurmd per node, each with files of its own (%n: the node's name).
# srun's PMIx plugin puts each step's client directory under TmpFS (/tmp by
# default, where two nodes of one step would collide: "File exists").
TmpFS=$SLURM_STATE/tmp-%n
CONF
  for k in $(seq "$nodes"); do
    echo "NodeName=node$k NodeAddr=$(node_address "node$k") NodeHostname=node$k" \
      "CPUs=${MPIDDP_SLURM_CPUS:-2} RealMemory=$((memory / nodes)) State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=node[1-$nodes] Default=YES MaxTime=INFINITE State=UP"
}

# slurmd initialises a cgroup plugin even with proctrack/linuxproc: name the
# hierarchy this machine has and constrain nothing.
cgroup_conf() {
  local plugin
  if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then plugin=cgroup/v2; else plugin=cgroup/v1; fi
  printf 'CgroupPlugin=%s\nCgroupAutomount=no\nConstrainCores=no\nConstrainRAMSpace=no\n' "$plugin"
}

host=$(hostname -s)
memory=$(awk '/MemTotal/ { print int($2 / 1024 * 0.8) }' /proc/meminfo)
mkdir -p "$SLURM_STATE/state" /etc/slurm
echo "$nodes" > "$SLURM_STATE/nodes"
if [ "$nodes" = 1 ]; then
  one_node_network
  mkdir -p "$SLURM_STATE/spool"
  one_node_conf > /etc/slurm/slurm.conf
else
  cluster_network
  cluster_hosts_files
  for k in $(seq "$nodes"); do mkdir -p "$SLURM_STATE/spool-node$k" "$SLURM_STATE/tmp-node$k"; done
  cluster_conf > /etc/slurm/slurm.conf
fi
cgroup_conf > /etc/slurm/cgroup.conf
start_munge

alive "$SLURM_STATE/slurmctld.pid" slurmctld || ip netns exec "$SLURM_NETNS" /usr/sbin/slurmctld
if [ "$nodes" = 1 ]; then
  alive "$SLURM_STATE/slurmd.pid" slurmd || ip netns exec "$SLURM_NETNS" /usr/sbin/slurmd -N "$host"
else
  for k in $(seq "$nodes"); do
    alive "$SLURM_STATE/slurmd-node$k.pid" slurmd || start_node_slurmd "node$k"
  done
fi

# Usually idle within a few seconds; a loaded machine (tests running beside this
# one, one core) may take far longer. The deadline reads /proc/uptime, which a
# fresh VM's clock being set does not move.
read -r up _ < /proc/uptime
deadline=$((10#${up/./} + 100 * 180))
while :; do
  idle=$("$here/slurm-exec" timeout 5 sinfo -h -N -o %t 2>/dev/null | grep -cE '^(idle|mix|alloc)$' || true)
  if [ "$idle" = "$nodes" ]; then
    echo "slurm-up: $nodes node(s) idle after $(awk -v a="$started" -v b="$(date +%s.%N)" \
      'BEGIN { printf "%.2f", b - a }') s"
    exit 0
  fi
  read -r up _ < /proc/uptime
  [ "$((10#${up/./}))" -lt "$deadline" ] || break
  sleep 0.2
done
echo "slurm-up: not every node became idle in 180 s; see $SLURM_STATE/*.log" >&2
"$here/slurm-exec" timeout 5 sinfo -N >&2 || true
exit 1
