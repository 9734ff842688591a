#!/usr/bin/env bash
# Which index torch comes from, for tools/bootstrap.sh: prints pip's index arguments (none for the default index)
# on stdout and what it chose, and why, on stderr.
#   No NVIDIA driver: torch's CPU build from PyTorch's CPU-only index (~200 MB, instead of the multi-GB CUDA build
#   the default index serves on Linux). Where that index does not answer within TORCH_INDEX_TIMEOUT seconds
#   (default 5; machines that only see a PyPI mirror), the default index, saying so.
#   TORCH_CPU_INDEX  the CPU-only index (default https://download.pytorch.org/whl/cpu)
set -uo pipefail
PYTHON=${PYTHON:-python3}
index=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
if [ -e /proc/driver/nvidia/version ] || nvidia-smi >/dev/null 2>&1; then
    echo "bootstrap: NVIDIA driver found: torch from the default index (its CUDA build)" >&2
elif "$PYTHON" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip('/') + '/torch/', timeout=float(sys.argv[2]))" \
        "$index" "${TORCH_INDEX_TIMEOUT:-5}" >/dev/null 2>&1; then
    echo "bootstrap: no NVIDIA driver: torch's CPU build from $index" >&2
    printf '%s\n' --index-url "$index"
else
    echo "bootstrap: no NVIDIA driver, and $index is unreachable: torch from the default index instead (on Linux" \
         "that may be the multi-GB CUDA build; set TORCH_CPU_INDEX to a reachable CPU-only index to avoid it)" >&2
fi
