# Sourced by the launcher scripts: sets PYTHON to the interpreter that runs
# mmlvit, or exits with a message naming the fix.
# Order: $PYTHON when set; the project's virtualenv (.venv/bin/python next to
# tools/, as `make setup` creates it); python3, then python, on PATH.
_tools_dir=$(dirname "${BASH_SOURCE[0]}")
if [ -z "$PYTHON" ]; then
    if [ -x "$_tools_dir/../.venv/bin/python" ]; then
        PYTHON="$_tools_dir/../.venv/bin/python"
    else
        PYTHON=$(command -v python3 || command -v python)
    fi
fi
if ! "$PYTHON" -c 'import importlib.util as u, sys
sys.exit(u.find_spec("torch") is None)' 2>/dev/null; then
    echo "$(basename "$0"): the Python interpreter '${PYTHON:-python}'" \
        "cannot import torch (or does not run). Create the project's" \
        "virtualenv with 'make setup', activate the environment that has" \
        "mmlvit installed, or set PYTHON=/path/to/python." >&2
    exit 1
fi
unset _tools_dir
