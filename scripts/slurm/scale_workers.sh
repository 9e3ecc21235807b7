#!/usr/bin/env bash
# cluster.scale_command for an autoscaled troupe job under Slurm (docs/launch.md#slurm): troupe
# runs it on the head's task whenever it wants another number of workers, with TROUPE_SCALE_FROM
# and TROUPE_SCALE_TO set. Each worker wanted beyond the ones asked for before is one joiner job
# (troupe.sbatch --join). A shrink needs nothing here: troupe drains the workers it no longer
# needs and stops them, and their jobs (or tasks) complete.
#
#   cluster: {scale_command: scripts/slurm/scale_workers.sh}   # relative to the submit directory
#
# SBATCH_* variables (a partition, an account) apply to the joiners as to any sbatch.
set -euo pipefail
: "${TROUPE_SCALE_FROM:?run by troupe as cluster.scale_command}"
: "${TROUPE_SCALE_TO:?run by troupe as cluster.scale_command}"
: "${SLURM_JOB_ID:?run by troupe launch --slurm, inside the job}"
job=$SLURM_JOB_ID
here=$(cd "$(dirname "$0")" && pwd)
# The joiners are jobs of their own: none of this task's SLURM_* settings may leak into them
# (SLURM_CONF, where the cluster's config is, stays).
for v in $(compgen -v SLURM_); do
  [ "$v" = SLURM_CONF ] || unset "$v"
done
for ((i = TROUPE_SCALE_FROM; i < TROUPE_SCALE_TO; i++)); do
  joiner=$(sbatch --parsable -N 1 -n 1 "$here/troupe.sbatch" --join "$job")
  echo "joiner job $joiner for job $job"
done
