#!/usr/bin/env bash
# Brings up a one-node Slurm cluster on this machine for the `slurm` tests:
# munged (as user munge), slurmctld and slurmd (as root), with every daemon and
# every Slurm command inside a private network namespace whose only interface is
# loopback, so no Slurm traffic can leave the machine. Idempotent: running it
# again with the daemons up only checks them. Slurm commands: scripts/ci/slurm-exec.
# Environment: MPIDDP_SLURM_CPUS (CPUs the node advertises, default 8).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/slurm-env.sh"
command -v slurmctld >/dev/null || { echo "slurm-up: slurm-wlm is not installed" >&2; exit 2; }

alive() { [ -f "$1" ] && [ "$(cat "/proc/$(cat "$1")/comm" 2>/dev/null)" = "$2" ]; }

if ! ip netns list | grep -qw "$SLURM_NETNS"; then
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
fi

# munge: a key, a socket directory owned by munge, the daemon as munge.
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
chmod 0400 /etc/munge/munge.key
chmod 0755 /run/munge
alive /run/munge/munged.pid munged || runuser -u munge -- /usr/sbin/munged

mkdir -p "$SLURM_STATE/state" "$SLURM_STATE/spool" /etc/slurm
host=$(hostname -s)
memory=$(awk '/MemTotal/ { print int($2 / 1024 * 0.8) }' /proc/meminfo)
cat > /etc/slurm/slurm.conf <<CONF
# Written by mpiddp scripts/ci/slurm-up.sh: one node on loopback, for tests.
ClusterName=mpiddp-ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job may start only once its old credential expired (cred_expire + 1 s
# after the requeue); 120 s by default, 10 s here so requeue tests stay short.
AuthInfo=cred_expire=10
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MinJobAge=4
KillWait=5
JobRequeue=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$SLURM_STATE/state
SlurmdSpoolDir=$SLURM_STATE/spool
SlurmctldPidFile=$SLURM_STATE/slurmctld.pid
SlurmdPidFile=$SLURM_STATE/slurmd.pid
SlurmctldLogFile=$SLURM_STATE/slurmctld.log
SlurmdLogFile=$SLURM_STATE/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=${MPIDDP_SLURM_CPUS:-8} RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF

# slurmd initialises a cgroup plugin even with proctrack/linuxproc: name the
# hierarchy this machine has and constrain nothing.
if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then plugin=cgroup/v2; else plugin=cgroup/v1; fi
cat > /etc/slurm/cgroup.conf <<CONF
CgroupPlugin=$plugin
CgroupAutomount=no
ConstrainCores=no
ConstrainRAMSpace=no
CONF

alive "$SLURM_STATE/slurmctld.pid" slurmctld || ip netns exec "$SLURM_NETNS" /usr/sbin/slurmctld
alive "$SLURM_STATE/slurmd.pid" slurmd || ip netns exec "$SLURM_NETNS" /usr/sbin/slurmd -N "$host"

for _ in $(seq 150); do
  state=$("$here/slurm-exec" timeout 5 sinfo -h -o %t 2>/dev/null | head -1 || true)
  case "$state" in idle*|mix*|alloc*) echo "slurm-up: node $host is $state"; exit 0 ;; esac
  sleep 0.2
done
echo "slurm-up: the node did not become idle in 30 s; see $SLURM_STATE/*.log" >&2
exit 1
