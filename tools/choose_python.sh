#!/usr/bin/env bash
# Which Python tools/bootstrap.sh installs into and tools/python.sh runs (the Makefile's demo, test and bench): one
# choice, made here for both. Prints one line, tab-separated: MODE PYTHON WHY
#   use   PYTHON as it is
#   venv  the clone's virtual environment .venv, made (by the bootstrap) from PYTHON
# In this order:
#   1. PYTHON given (make test PYTHON=..., or in the environment): that one; where pip may not install into it (a
#      distribution's own Python, PEP 668: tools/pip_allowed.sh), the clone's .venv made from it.
#   2. An active virtual environment (VIRTUAL_ENV) or conda environment other than base (CONDA_PREFIX): its Python.
#      Conda's base environment, which conda's installer activates in every shell, does not count: installing
#      into it is installing globally.
#   3. Otherwise the clone's .venv, made from python3: nothing is installed into a global interpreter (a pyenv or
#      conda python3 first on PATH included) unless asked for.
# Exits 1, saying why on stderr, where the choice cannot be made (a PYTHON that does not run; a distribution's own
# Python named while a virtual environment is active).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
given=${PYTHON:-}
if [ -n "$given" ]; then
    command -v "$given" >/dev/null || { echo "bootstrap: no Python '$given' (PYTHON=$given): install it, or name another one: make test PYTHON=..." >&2; exit 1; }
    if PYTHON="$given" "$root/tools/pip_allowed.sh" 2>/dev/null; then
        printf 'use\t%s\t%s\n' "$given" "PYTHON=$given, as given"
        exit 0
    fi
    exe=$("$given" -c 'import sys; print(sys.executable)')
    if [ -n "${VIRTUAL_ENV:-}" ]; then
        # The user chose both: do not guess which they meant.
        echo "bootstrap: $exe (PYTHON=$given) is the system's own Python, which pip does not install into" \
             "(PEP 668), while the virtual environment $VIRTUAL_ENV is active: run again with its Python" \
             "(PYTHON=python3 while it is active), or deactivate it and the bootstrap makes .venv in this clone" >&2
        exit 1
    fi
    printf 'venv\t%s\t%s\n' "$given" "$exe (PYTHON=$given) is the system's own Python (PEP 668, pip does not install into it)"
    exit 0
fi
if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    printf 'use\t%s\t%s\n' "$VIRTUAL_ENV/bin/python" "the active virtual environment $VIRTUAL_ENV"
    exit 0
fi
if [ -n "${CONDA_PREFIX:-}" ] && [ "${CONDA_DEFAULT_ENV:-base}" != base ] && [ -x "$CONDA_PREFIX/bin/python" ]; then
    printf 'use\t%s\t%s\n' "$CONDA_PREFIX/bin/python" "the active conda environment ${CONDA_DEFAULT_ENV} ($CONDA_PREFIX)"
    exit 0
fi
command -v python3 >/dev/null || { echo "bootstrap: no python3 on PATH: install Python >= 3.10, or name one: make test PYTHON=..." >&2; exit 1; }
printf 'venv\t%s\t%s\n' python3 "no virtual or conda environment is active and no PYTHON was given"
