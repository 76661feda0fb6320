#!/usr/bin/env bash
# Training on a Slurm cluster:
#   GPUS=16 tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [args]
# Slurm sends SIGUSR1 to the tasks 120 s before the time limit (SIGNAL,
# srun --signal): training saves a resumable checkpoint after the current
# iteration and exits with code 75; run the same command with --resume to
# continue (docs/reliability.md). SIGNAL= turns the warning off.
set -x
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
SIGNAL=${SIGNAL-USR1@120}
source "$(dirname "$0")/find_python.sh"  # sets PYTHON

PYTHONPATH="$(dirname "$0")/..":$PYTHONPATH \
srun -p "${PARTITION}" \
    --job-name="${JOB_NAME}" \
    --gres=gpu:"${GPUS_PER_NODE}" \
    --ntasks="${GPUS}" \
    --ntasks-per-node="${GPUS_PER_NODE}" \
    --cpus-per-task="${CPUS_PER_TASK}" \
    --kill-on-bad-exit=1 \
    ${SIGNAL:+--signal="${SIGNAL}"} \
    ${SRUN_ARGS} \
    "$PYTHON" -u "$(dirname "$0")/train.py" "${CONFIG}" \
    --work-dir="${WORK_DIR}" --launcher="slurm" "${@:5}"
