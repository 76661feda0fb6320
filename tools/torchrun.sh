# Sourced by dist_train.sh and dist_test.sh: `run_torchrun GPUS SCRIPT ARGS`
# runs tools/SCRIPT with ARGS in GPUS processes per node under torchrun;
# NNODES, NODE_RANK, MASTER_ADDR and PORT come from the environment.
source "$(dirname "${BASH_SOURCE[0]}")/find_python.sh"  # sets PYTHON

run_torchrun() {
    local tools_dir gpus=$1 script=$2
    tools_dir=$(dirname "${BASH_SOURCE[0]}")
    shift 2
    PYTHONPATH="$tools_dir/..":$PYTHONPATH \
    "$PYTHON" -m torch.distributed.run \
        --nnodes="${NNODES:-1}" \
        --node_rank="${NODE_RANK:-0}" \
        --master_addr="${MASTER_ADDR:-127.0.0.1}" \
        --nproc_per_node="$gpus" \
        --master_port="${PORT:-29500}" \
        "$tools_dir/$script" "$@"
}
