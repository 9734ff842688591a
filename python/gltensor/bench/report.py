"""What every mode reports with: tables, the machine description, where its JSON goes by default."""
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np


def fmt_us(v):
    return "-" if v is None else ("%.1f" % v if v < 1000 else "{:,.0f}".format(v))



def print_table(title, header, rows, left=(0,), file=None):
    """rich table on a terminal; plain aligned text in logs and pipes (rich's wrapped cells read worse)."""
    out = file or sys.stdout
    left = set(left) | {len(header) - 1}  # labels and the trailing note read better left-aligned
    try:
        if not out.isatty():
            raise ImportError
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
        print("\n" + title, file=out)
        fmt = "  ".join("{:<%d}" % w if i in left else "{:>%d}" % w for i, w in enumerate(widths))
        print(fmt.format(*header).rstrip(), file=out)
        print("  ".join("-" * w for w in widths), file=out)
        for r in rows:
            print(fmt.format(*[str(v) for v in r]).rstrip(), file=out)
        return
    table = Table(title=title)
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i in left else "right")
    for r in rows:
        table.add_row(*[str(v) for v in r])
    Console(file=out).print(table)



def machine_info(ctx, torch):
    info = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpu_model": None,
        "gl_vendor": ctx.vendor, "gl_renderer": ctx.renderer, "gl_version": ctx.version,
        "gl_is_software": ctx.is_software, "gl_cuda_device": ctx.cuda_device,
        "numpy": np.__version__,
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "torch_cuda_available": torch.cuda.is_available(),
        "gpu_name": None, "gpu_driver": None, "cuda_driver_api": None, "cuda_bindings": None,
    }
    import gltensor
    info.update(gltensor=gltensor.__version__, gltensor_cuda_compiled=gltensor.cuda_compiled(),
                gltensor_cuda_available=gltensor.cuda_available())
    if not gltensor.cuda_available():
        try:
            info["gltensor_cuda_unavailable_reason"] = gltensor.cuda_unavailable_reason()
        except Exception:
            pass
    try:
        import OpenGL
        info["pyopengl"] = OpenGL.__version__
    except Exception:
        pass
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu_model"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
    except OSError:
        pass
    if torch.cuda.is_available():
        info["gpu_name"] = torch.cuda.get_device_name(0)
        try:
            props = torch.cuda.get_device_properties(0)
            info["gpu_memory_bytes"] = props.total_memory
            info["gpu_capability"] = "%d.%d" % (props.major, props.minor)
        except Exception:
            pass
    try:  # the driver version is only told by nvidia-smi (or NVML); absent on CPU-only machines
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            name, driver = [v.strip() for v in out.stdout.strip().splitlines()[0].split(",", 1)]
            info["gpu_name"] = info["gpu_name"] or name
            info["gpu_driver"] = driver
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    try:
        import cuda.bindings
        info["cuda_bindings"] = getattr(cuda.bindings, "__version__", "unknown")
        from cuda.bindings import runtime as cudart
        err, v = cudart.cudaDriverGetVersion()
        if err == cudart.cudaError_t.cudaSuccess and v:
            info["cuda_driver_api"] = "%d.%d" % (v // 1000, (v % 1000) // 10)
    except Exception:
        pass
    from importlib import metadata
    for mod, dist in (("matplotlib", "matplotlib"), ("rich", "rich"), ("tqdm", "tqdm"), ("panda3d", "panda3d"),
                      ("cupy", "cupy-cuda13x"), ("cupy", "cupy-cuda12x"), ("cupy", "cupy")):
        if info.get(mod):
            continue
        try:
            info[mod] = metadata.version(dist)
        except Exception:
            info[mod] = None
    return info




def results_dir():
    """The folder a mode writes to when no path is given: $GLTENSOR_BENCH_DIR, else the per-user cache
    ($XDG_CACHE_HOME/gltensor/bench, ~/.cache/gltensor/bench). Never the checkout: a benchmark run must not
    leave files in the source tree unless a path inside it is asked for (--json benchmarks/results/...)."""
    given = os.environ.get("GLTENSOR_BENCH_DIR")
    if given:
        return Path(given).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "gltensor" / "bench"


def results_path(kind, host, given=None):
    """Where a mode writes its JSON: `given` (its --json), else <results_dir()>/<kind>_<host>.json. Each mode
    prints the path it wrote."""
    if given:
        return Path(given)
    return results_dir() / ("%s_%s.json" % (kind, "".join(c if c.isalnum() or c in "-_." else "_" for c in host)))


def save_json(path, report):
    """The report as indented JSON at path (its folder made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1))
