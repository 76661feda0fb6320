#!/usr/bin/env bash
# torchrun of a script of tools/: tools/torchrun.sh SCRIPT NPROC [args]
# (dist_train.sh and dist_test.sh use it). Multi-node: NNODES, NODE_RANK,
# MASTER_ADDR and PORT as in torchrun.
SCRIPT=$1
NPROC=$2
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
    --nproc_per_node="$NPROC" \
    --master_port="$PORT" \
    "$(dirname "$0")/$SCRIPT" \
    "${@:3}"
