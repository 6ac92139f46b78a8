# Shared settings of the test Slurm cluster (sourced).
SLURM_NETNS=${MPIDDP_SLURM_NETNS:-mpiddp-slurm}
SLURM_STATE=${MPIDDP_SLURM_STATE:-/tmp/mpiddp-slurm}
