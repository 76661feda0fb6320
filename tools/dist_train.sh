#!/usr/bin/env bash
# Distributed (DDP) training with torchrun: tools/dist_train.sh CONFIG GPUS [args]
# Multi-node: NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 tools/dist_train.sh ...
# Without GPUs the processes run on the CPU with the gloo backend.
source "$(dirname "$0")/torchrun.sh"
run_torchrun "$2" train.py "$1" --launcher pytorch "${@:3}"
