#!/usr/bin/env bash
# The small-scale grids committed in results/ (one CSV + plot each), in
# priority order: seed 0 of everything first, then the other seeds of the
# main grid. Every command resumes, so re-running this script skips the runs
# already in the CSVs. Uses the shipped teacher in checkpoints/ (trained
# first if it is missing). About 4 hours of a 2-core CPU with JOBS=2 (the
# seed-0 passes, steps 1-4, about 1 h 45 min), then about 3 hours for the
# component grid (step 6).
#
#   bash tools/analysis/small_scale_grids.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
RUN="$PY tools/analysis/reproduce.py --train-teacher --jobs ${JOBS:-2}"
ALL='random attncopy mlpcopy fullcopy softmax'

# 1. The paper's matrix on the Fashion-MNIST target (5k train, 10k test):
#    four operators x four settings x with/without distillation + softmax.
$RUN --operators relu elu inline gla --settings $ALL --distill both \
    --seeds 0 --out results/fashion_mnist.csv
# 2. The same rows for ReLU and GLA on the transfer target MNIST-5k.
$RUN --targets mnist-5k --operators relu gla --settings $ALL \
    --distill both --seeds 0 --out results/mnist5k.csv
# 3. The distillation weight lambda for MLPCopy + distill.
$RUN --operators relu --settings mlpcopy+distill \
    --lambdas 5 10 30 50 100 --out results/lambda.csv
# 4. Schedule length: the base 10 epochs and 4x as many.
$RUN --operators relu --distill off \
    --settings random mlpcopy mlpcopy+distill fullcopy+distill softmax \
    --epochs 10 40 --out results/schedule.csv
# 5. Seeds 1 and 2 of the main grid.
$RUN --operators relu elu inline gla --settings $ALL --distill both \
    --seeds 0 1 2 --out results/fashion_mnist.csv
# 6. Which copied weights carry the transfer: the leave-one-out component
#    settings without distillation, FullCopy - attention and FullCopy with
#    it; ReLU and GLA, 3 seeds; Fashion-MNIST-5k, then MNIST-5k (54 runs
#    each; the runs steps 1-5 made already are copied, not trained again).
#    Report: reproduce.py --report --out results/components.csv.
COMPONENTS='random mlpcopy mlpcopy+norms mlpcopy+embeddings fullcopy-attn
    fullcopy-mlp fullcopy fullcopy-attn+distill fullcopy+distill'
for target in fashion-mnist-5k mnist-5k; do
    $RUN --targets $target --operators relu gla --settings $COMPONENTS \
        --distill off --seeds 0 1 2 --out results/components.csv \
        --reuse results/fashion_mnist.csv results/mnist5k.csv
done
