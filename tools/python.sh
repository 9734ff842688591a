#!/usr/bin/env bash
# Runs, with the given arguments, the Python that tools/bootstrap.sh installed gltensor and its packages into, so
# that the Makefile's demo, test and bench use it: the same choice (tools/choose_python.sh) of PYTHON as given, an
# active virtual or conda environment's Python, or else the clone's .venv.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
choice=$("$root/tools/choose_python.sh") || exit 1
IFS=$'\t' read -r mode python why <<< "$choice"
if [ "$mode" = venv ]; then
    python=$root/.venv/bin/python
    [ -x "$python" ] || { echo "tools/python.sh: $why, so gltensor runs from this clone's .venv, which does not" \
                               "exist yet: run tools/bootstrap.sh (make demo or make test do) first" >&2; exit 1; }
fi
exec "$python" "$@"
