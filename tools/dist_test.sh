#!/usr/bin/env bash
# Distributed evaluation with torchrun: tools/dist_test.sh CONFIG CHECKPOINT GPUS [args]
# Multi-node as in dist_train.sh (NNODES, NODE_RANK, MASTER_ADDR, PORT).
source "$(dirname "$0")/torchrun.sh"
run_torchrun "$3" test.py "$1" "$2" --launcher pytorch "${@:4}"
