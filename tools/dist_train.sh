#!/usr/bin/env bash
# Distributed (DDP) training with torchrun: tools/dist_train.sh CONFIG GPUS [args]
# Multi-node: NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 tools/dist_train.sh ...
# Without GPUs the processes run on the CPU with the gloo backend.
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
source "$(dirname "$0")/find_python.sh"  # sets PYTHON

PYTHONPATH="$(dirname "$0")/..":$PYTHONPATH \
"$PYTHON" -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" \
    --master_port="$PORT" \
    "$(dirname "$0")/train.py" \
    "$CONFIG" \
    --launcher pytorch "${@:3}"
