"""Diagnostic (GPU machine): device memory after each shared-slot test, to find tests that leave CUDA memory
behind (the slots' 2 MiB VMM allocations show as steps). Run: python3 tools/slots_leak_probe.py [pytest args]."""
import gc
import sys

import pytest


class DeviceMemoryAfterEachTest:
    def __init__(self):
        self.last = None

    def pytest_runtest_logfinish(self, nodeid, location):
        import torch

        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info()
        used = (total - free) / 2**20
        delta = "" if self.last is None else f" ({used - self.last:+.0f})"
        print(f"device MiB used {used:.0f}{delta} after {nodeid}", file=sys.stderr, flush=True)
        self.last = used


if __name__ == "__main__":
    sys.exit(pytest.main(sys.argv[1:], plugins=[DeviceMemoryAfterEachTest()]))
