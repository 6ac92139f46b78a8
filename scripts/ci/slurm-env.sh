# Shared settings of the test Slurm cluster (sourced by slurm-up.sh, slurm-down.sh,
# slurm-exec and slurm-node.sh).
SLURM_NETNS=${MPIDDP_SLURM_NETNS:-mpiddp-slurm}   # slurmctld and every client command
SLURM_STATE=${MPIDDP_SLURM_STATE:-/tmp/mpiddp-slurm}
# Many nodes (slurm-up.sh --nodes N): node K is called nodeK (its UTS hostname and
# Slurm node name), lives in the network namespace mpiddp-nodeK and has the address
# 10.217.0.(10+K) on a bridge inside $SLURM_NETNS, whose own address is 10.217.0.1.
# The subnet exists only inside namespaces these scripts create: nothing reaches a
# real interface.
SLURM_SUBNET=${MPIDDP_SLURM_SUBNET:-10.217.0}
SLURM_BRIDGE=mpiddp-br0
node_netns() { echo "mpiddp-$1"; }                  # node name -> its namespace
node_address() { echo "$SLURM_SUBNET.$((10 + ${1#node}))"; }
# Starts node NAME's slurmd in its namespace under its own hostname (a UTS
# namespace of its own) with a /dev/shm of its own (a tmpfs in the mount namespace
# `ip netns exec` makes): everything slurmd starts (job steps, ranks) inherits all
# three, so Open MPI and PMIx see one host per node, and when the node dies its
# shared memory goes with it, as a machine's would. (With one /dev/shm for all,
# Open MPI's segments of a killed job, named after host and job id, were found
# again by the next cluster's job of the same id and crashed it.)
start_node_slurmd() {
  ip netns exec "$(node_netns "$1")" unshare --uts sh -c \
    'mount -t tmpfs -o mode=1777,size=25% tmpfs /dev/shm && hostname "$1" && exec /usr/sbin/slurmd -N "$1"' sh "$1"
}
