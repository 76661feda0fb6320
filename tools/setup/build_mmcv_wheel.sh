#!/usr/bin/env bash
# Build mmcv 2.1.0 with its compiled ops (MMSegmentation and MMDetection need
# them; mmcv-lite has none) as a wheel for the interpreter's torch, and keep
# it outside the repository so that set-up, tests and CI on this machine
# build it once. mmcv 2.1.0 is published as source only, and its setup.py
# asks for C++14/17 while torch's headers need C++20: the flag is raised.
# CPU ops always; CUDA ops too when nvcc and a GPU are there.
#   bash tools/setup/build_mmcv_wheel.sh        # prints the wheel's path
# PYTHON (default .venv/bin/python), MMLVIT_WHEEL_CACHE (default
# ~/.cache/mmlvit/wheels), MAX_JOBS (default 2) override; MMCV_WHEEL=path
# takes a wheel you already have (checked, then used as it is).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
VERSION=2.1.0
TORCH=$("$PYTHON" -c 'import torch; print(torch.__version__.split("+")[0])')
CACHE=${MMLVIT_WHEEL_CACHE:-$HOME/.cache/mmlvit/wheels}/torch-$TORCH
if [ -n "${MMCV_WHEEL:-}" ]; then
    case "$(basename "$MMCV_WHEEL")" in
    mmcv-$VERSION-*.whl) ;;
    *)
        echo "MMCV_WHEEL=$MMCV_WHEEL is not an mmcv $VERSION wheel" \
            "(mmcv-$VERSION-*.whl); unset it to build one." >&2
        exit 1
        ;;
    esac
    if [ ! -f "$MMCV_WHEEL" ]; then
        echo "MMCV_WHEEL=$MMCV_WHEEL does not exist." >&2
        exit 1
    fi
    echo "$MMCV_WHEEL"
    exit 0
fi
wheel=$(ls "$CACHE"/mmcv-$VERSION-*.whl 2>/dev/null | head -n 1 || true)
if [ -n "$wheel" ]; then
    echo "$wheel"
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m pip download "mmcv==$VERSION" --no-deps --no-binary :all: \
    --no-build-isolation -q -d "$work"
tar xzf "$work/mmcv-$VERSION.tar.gz" -C "$work"
sed -i 's/-std=c++1[47]/-std=c++20/g' "$work/mmcv-$VERSION/setup.py"
force_cuda=0
if command -v nvcc >/dev/null &&
    "$PYTHON" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
    force_cuda=1
fi
echo "Building mmcv $VERSION (ops; CUDA: $force_cuda) for torch $TORCH:" \
    "about 25 minutes on 2 cores." >&2
mkdir -p "$CACHE"
MMCV_WITH_OPS=1 FORCE_CUDA=$force_cuda MAX_JOBS=${MAX_JOBS:-2} \
    "$PYTHON" -m pip wheel --no-deps --no-build-isolation -q \
    -w "$work/wheel" "$work/mmcv-$VERSION"
mv "$work"/wheel/mmcv-$VERSION-*.whl "$CACHE"/
ls "$CACHE"/mmcv-$VERSION-*.whl | head -n 1
