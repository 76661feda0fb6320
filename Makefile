# Set-up and entry points. Every target is idempotent.
#   make demo   install everything, then run the main job on the embedded default
#   make test   install everything (dense stack included), then run the
#               test suite
#   make dense  install the dense stack (mmcv 2.1.0 with ops, built once and
#               cached outside the repo; MMCV_WHEEL=path uses a given wheel)
PYTHON  ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
DENSE   := $(VENV)/.dense-installed
DATA    := data/fashion_mnist/t10k-labels-idx1-ubyte
DENSE_DATA := data/dense_fashion_mnist/meta.json
FMNIST  := /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz
REQS    := requirements.txt $(wildcard requirements/*.txt) setup.py

.PHONY: setup dense demo test lint
setup: $(STAMP) $(DATA)
dense: setup $(DENSE) $(DENSE_DATA)

$(FMNIST):
	apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist

$(STAMP): $(REQS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip show -q mmcv 2>/dev/null || \
		$(PY) -m pip install -q -r requirements/mmcv-lite.txt
	$(PY) -m pip install -q --no-build-isolation --no-deps -e .
	$(PY) tools/setup/link_editable_install.py
	touch $(STAMP)

# The full mmcv replaces mmcv-lite (both install the package `mmcv`).
# Building its wheel takes about 25 minutes once; later calls reuse it.
$(DENSE): $(STAMP) requirements/dense.txt tools/setup/build_mmcv_wheel.sh
	wheel=$$(PYTHON=$(PY) bash tools/setup/build_mmcv_wheel.sh) && \
		$(PY) -m pip uninstall -q -y mmcv-lite && \
		$(PY) -m pip install -q "$$wheel" -r requirements/dense.txt
	$(PY) -c 'import mmcv.ops, mmseg, mmdet'
	touch $(DENSE)

$(DATA): $(FMNIST) | $(STAMP)
	$(PY) tools/data/prepare_fashion_mnist.py

# Dense Fashion-MNIST (docs/dense_data.md): seconds, from the extracted set.
$(DENSE_DATA): $(DATA) $(wildcard lab/reproduction/data/*.py)
	$(PY) tools/data/prepare_dense_fashion_mnist.py

# The flagship recipe at tiny scale on the Fashion-MNIST target (5k train
# images, the 10k test split): from the shipped tiny softmax teacher
# (checkpoints/, retrained if missing), a GLA student with MLPCopy +
# attention-output distillation, the Random GLA baseline and the softmax
# reference, two runs at a time; table + plot in work_dirs/demo/.
demo: setup
	$(PY) tools/analysis/reproduce.py --train-teacher --operators gla \
		--settings random mlpcopy+distill softmax --distill off \
		--epochs 10 --jobs 2 \
		--out work_dirs/demo/results.csv --work-root work_dirs/demo

# Two pytest-xdist workers of one thread each (the machines here have two
# cores; TEST_WORKERS=0 runs the suite in one process), a test module's
# tests on one worker. lint-imports first checks that mmlvit's layers
# import only downwards (the contract in pyproject.toml).
TEST_WORKERS ?= 2
test: dense
	$(VENV)/bin/lint-imports --no-cache
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope tests

lint: setup
	$(VENV)/bin/ruff check setup.py mmlvit lab tools tests configs
	$(VENV)/bin/ruff format --check setup.py mmlvit lab tools tests
