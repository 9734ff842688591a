#!/usr/bin/env bash
# Runs, with the given arguments, the Python that tools/bootstrap.sh installed gltensor and its packages into, so
# that the Makefile's demo, test and bench use it: $PYTHON (default python3), except where pip may not install into
# it (a distribution's own Python, PEP 668: tools/pip_allowed.sh) and no virtual environment is active; then the
# clone's .venv, which the bootstrap made for it (its step 0 makes the same choice). Without a .venv nothing is
# checked: a Python pip may install into (pyenv, conda, CI's) is run at once, as before.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
if [ -z "${VIRTUAL_ENV:-}" ] && [ -x "$root/.venv/bin/python" ] && ! PYTHON="$PYTHON" "$root/tools/pip_allowed.sh" 2>/dev/null; then
    PYTHON=$root/.venv/bin/python
fi
exec "$PYTHON" "$@"
