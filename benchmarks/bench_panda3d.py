#!/usr/bin/env python3
"""Panda3D cameras into torch under Panda's default PRC and under gltensor.panda3d.configure():
getRamImage, MetaDrive's image_on_cuda recipe, and gltensor (one camera; N agents as a Batch of buffers and as
one buffer read as an Atlas), with Panda's render alone as the floor.

    python benchmarks/bench_panda3d.py [--cases 84x1,256x1,1024x1,128x16] [--prc default,configure]
                                       [--steps 200] [--json PATH] [--quick]

One step = renderFrame() + every camera's frame into torch + a consumer op (x.float().mean()); warm-up, timed
steps with one synchronisation at the end, median of --runs runs, all paths of a configuration in one process
(one subprocess per configuration: Panda reads its PRC when ShowBase opens). Each path's frames must equal
Panda's getRamImage readback of the same frames (two different frames) before it is timed. Paths are
described in gltensor/_bench_panda3d.py.

"CPU us/step": the process's CPU time per step, all threads (Python, Panda, GL and CUDA drivers).
Ratios printed: "vs MetaDrive" = MetaDrive recipe µs / path µs (> 1: faster than MetaDrive's recipe).
"vs render+RT" (N > 1) = path µs / (render floor of that layout + one GL<->CUDA round trip). The round trip is
measured in the same run: (render + a gltensor read of one tiny 4x4 texture that Panda does not re-render +
the consumer op on it) minus render alone, timed one after the other in each run: what one hand-off adds to a
step whatever its size (on the GPU the GL->CUDA switch, ~300 us on an H200; on the CPU backend it is noise).
MetaDrive's recipe needs cuda-python (cuda.bindings) and CuPy and a GL context on a CUDA device; otherwise
it is listed as skipped with the reason. On a machine without a GPU gltensor runs its CPU backend and the
numbers compare host readbacks only; there (Mesa llvmpipe) a read also waits for the rasterisation of the
texture it reads, which `render` alone does not, so render floors and ratios say little.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
try:
    import gltensor  # noqa: F401
except ImportError:
    sys.path.insert(0, str(HERE.parent / "python"))
from gltensor import _bench_panda3d as bp  # noqa: E402
from gltensor._bench_paths import fmt_us, print_table  # noqa: E402


def parse_cases(s):
    return [tuple(int(v) for v in item.lower().split("x")) for item in s.split(",")]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=parse_cases, default=parse_cases("84x1,256x1,1024x1,128x16"),
                    help="SIZExCAMERAS, comma-separated (default 84x1,256x1,1024x1,128x16)")
    ap.add_argument("--prc", default="default,configure", help="Panda3D configurations: default,configure")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--quick", action="store_true", help="smoke run: 84x1,64x4, 5 steps, 1 run")
    ap.add_argument("--json", help="output file (default benchmarks/results/panda3d_<host>.json)")
    ap.add_argument("--one-config", help=argparse.SUPPRESS)  # child: run one configuration, JSON to this file
    args = ap.parse_args(argv)
    if args.quick:
        args.cases, args.steps, args.warmup, args.runs = [(84, 1), (64, 4)], 5, 2, 1

    if args.one_config:
        prc, out = args.one_config.split(":", 1)
        info, results = bp.run_config(prc, args.cases, args.steps, args.warmup, args.runs, args.backend,
                                      log=lambda m: print(m, flush=True))
        Path(out).write_text(json.dumps({"machine": info, "results": results}))
        return 0

    results, machine, failed = [], None, None
    for prc in args.prc.split(","):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            part = f.name
        cmd = [sys.executable, __file__, "--one-config", "%s:%s" % (prc, part), "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--runs", str(args.runs), "--backend", args.backend,
               "--cases", ",".join("%dx%d" % c for c in args.cases)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
        lines = [l for l in (proc.stdout + proc.stderr).splitlines() if l.startswith(("  ", "FAIL", "Traceback"))
                 or "Error" in l]
        print("\n".join(lines))
        if proc.returncode != 0:
            failed = "%s configuration failed (rc %d):\n%s" % (prc, proc.returncode,
                                                                (proc.stdout + proc.stderr)[-3000:])
            break
        part_report = json.loads(Path(part).read_text())
        os.unlink(part)
        results += part_report["results"]
        machine = machine or part_report["machine"]
    bp.ratios(results)

    import socket
    host = "".join(c if c.isalnum() or c in "-_." else "_" for c in socket.gethostname())
    json_path = Path(args.json) if args.json else HERE / "results" / ("panda3d_%s.json" % host)
    report = {"benchmark": "panda3d", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:], "machine": machine,
              "config": {"cases": args.cases, "steps": args.steps, "warmup": args.warmup, "runs": args.runs,
                         "backend": args.backend, "prc": args.prc},
              "results": results, "status": "ok" if failed is None else failed}
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=1))
    if failed:
        print("FAIL: %s" % failed, file=sys.stderr)
        return 1
    rows = []
    for r in results:
        case = "%s %d² x%d%s" % (r["prc"], r["size"], r["cameras"], " (padded)" if r.get("padded") else "")
        if "skipped" in r:
            rows.append([case, r["path"], "skipped", "-", "-", "-", r["skipped"]])
            continue
        vs_md = "%.2fx" % r["vs_metadrive"] if r.get("vs_metadrive") else "-"
        vs_rt = "%.2f" % r["vs_render_plus_round_trip"] if r.get("vs_render_plus_round_trip") else "-"
        note = "round trip %s us" % fmt_us(r["round_trip_us"]) if r.get("round_trip_us") is not None else ""
        rows.append([case, "%s [%s]" % (r["path"], r["backend"]), fmt_us(r["us_per_step"]),
                     fmt_us(r["cpu_us_per_step"]), vs_md, vs_rt, note])
    print_table("Panda3D cameras, µs per step (renderFrame + frames into torch + x.float().mean()), median of %d "
                "runs of %d steps" % (args.runs, args.steps),
                ["case", "path", "us/step", "CPU us/step", "vs MetaDrive", "vs render+RT", "note"], rows, left=(0, 1))
    print("\nHeadlines (GL: %s):" % (machine or {}).get("gl_renderer"))
    for line in bp.headlines(results):
        print("  " + line)
    print("\nJSON: %s" % json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
