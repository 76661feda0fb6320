#!/usr/bin/env bash
# Distributed evaluation with torchrun: tools/dist_test.sh CONFIG CHECKPOINT GPUS [args]
# Multi-node as tools/dist_train.sh.
exec bash "$(dirname "$0")/torchrun.sh" test.py "$3" "$1" "$2" \
    --launcher pytorch "${@:4}"
