#!/usr/bin/env bash
# Whether pip may install into $PYTHON, for tools/choose_python.sh (the bootstrap's step 0). A distribution's own Python
# (Debian 12+, Ubuntu 23.04+, Fedora 38+) is "externally managed" (PEP 668): pip refuses to install into it outside a
# virtual environment, so the bootstrap makes one (.venv in the clone) and installs there instead. Exits 0 when pip
# may install (a virtual environment, pyenv, conda, a Python built from source; or pip told to override:
# PIP_BREAK_SYSTEM_PACKAGES or pip's break-system-packages setting); else 1, saying why on stderr. The test is pip's
# own (the EXTERNALLY-MANAGED marker in the standard library's folder, outside a virtual environment).
set -uo pipefail
PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' && exit 0
import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(1 if sys.prefix == sys.base_prefix and os.path.isfile(marker) else 0)
PY
case "${PIP_BREAK_SYSTEM_PACKAGES:-}" in 1|[Tt]rue|[Yy]es|[Oo]n) exit 0 ;; esac
# (grep without -q: -q stops reading early, pip dies of SIGPIPE, and pipefail reports that as no match.)
"$PYTHON" -m pip config list 2>/dev/null | grep -Ei "break-system-packages='?(1|true|yes|on)'?$" >/dev/null && exit 0
echo "$("$PYTHON" -c 'import sys; print(sys.executable)') is the system's own Python, which pip does not install" \
     "into (PEP 668, \"externally managed\"): tools/bootstrap.sh makes the virtual environment .venv in this clone for it" >&2
exit 1
