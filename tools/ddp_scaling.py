#!/usr/bin/env python3
"""How examples/distributed/train_ddp.py scales from 1 rank to N ranks of one host, with its spread.

    python3 tools/ddp_scaling.py --out OUT --config "--mode atlas" --pairs 8 --steps 600 --profile-runs 1

For each config, `--pairs` pairs of runs at the same per-rank load, 1 rank and N ranks (torchrun
--standalone), in ABBA order (1,N then N,1, ...) so that a drift of the machine hits both sides alike.
Each pair gives one efficiency, total(N) / (N x total(1)); the report gives the median and the spread
(min, IQR, max) of the per-pair efficiencies and of each side's frames/s, next to the efficiency of the
medians. Each run also reports where a rank's step goes (host time per phase, nothing waited for), and
`--profile-runs` more runs per side with --profile-phases give each phase's whole cost (the GPU waited
for at each phase's end, the all-reduce span timed with CUDA events): the gap between 1 and N ranks is
located phase by phase, not guessed. Everything goes to OUT (logs, each run's JSON, scaling.json).

`--time-limit` stops starting new runs once the next would not fit; what ran is reported, and what was
skipped is named.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "distributed" / "train_ddp.py"


def spread(values: list[float]) -> dict[str, float]:
    v = sorted(values)
    if not v:
        return {}
    q = statistics.quantiles(v, n=4, method="inclusive") if len(v) > 1 else [v[0]] * 3
    return dict(n=len(v), min=v[0], p25=q[0], median=statistics.median(v), p75=q[2], max=v[-1])


def fmt(s: dict[str, float], pct: bool = False) -> str:
    if not s:
        return "-"
    def f(x: float) -> str:
        return f"{x:.1%}" if pct else f"{x:,.0f}"
    return f"{f(s['median'])} [{f(s['min'])}, IQR {f(s['p25'])}-{f(s['p75'])}, {f(s['max'])}] (n={s['n']})"


def tag_of(config: str) -> str:
    return "_".join(a.lstrip("-") for a in shlex.split(config)) or "default"


class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        (self.out / "runs").mkdir(parents=True, exist_ok=True)
        self.t0 = time.monotonic()
        self.longest = {1: 0.0, args.ranks: 0.0}
        self.skipped: list[str] = []
        self.failed: list[str] = []

    def fits(self, n: int) -> bool:
        left: float = self.args.time_limit - (time.monotonic() - self.t0)
        return left > max(self.longest[n] * 1.2, 5.0)

    def run(self, config: str, n: int, name: str, *extra: str) -> dict[str, Any] | None:
        a = self.args
        if not self.fits(n):
            self.skipped.append(name)
            return None
        js = self.out / "runs" / f"{name}.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}", str(SCRIPT),
               "--cameras", str(a.cameras), "--size", str(a.size), "--steps", str(a.steps), "--warmup", str(a.warmup),
               *shlex.split(config), *extra, "--json", str(js)]
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                                  "MASTER_PORT")}
        start = time.monotonic()
        with open(self.out / "runs" / f"{name}.log", "w") as log:
            try:
                r = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=a.run_timeout)
                rc = r.returncode
            except subprocess.TimeoutExpired:
                rc = -1
        took = time.monotonic() - start
        self.longest[n] = max(self.longest[n], took)
        if not js.exists():  # a run that failed before its report (a teardown abort after it is tolerated)
            self.failed.append(f"{name} (exit {rc}, {took:.0f} s; see runs/{name}.log)")
            return None
        report: dict[str, Any] = json.loads(js.read_text())
        report["launch_s"] = took
        print(f"  {name:<40} {report['total_frames_per_s']:>10,.0f} frames/s  ({took:.0f} s)", flush=True)
        return report


def phases_of(reports: list[dict[str, Any]]) -> dict[str, float]:
    """Median over runs of the ranks' mean µs per phase (the ranks of a run averaged)."""
    per_run = []
    for r in reports:
        names = r["ranks"][0]["phases_us"]
        per_run.append({p: statistics.fmean(f["phases_us"][p] for f in r["ranks"]) for p in names})
    if not per_run:
        return {}
    return {p: statistics.median(d[p] for d in per_run) for p in per_run[0]}


def measure(runner: Runner, config: str) -> dict[str, Any]:
    a, n2 = runner.args, runner.args.ranks
    tag = tag_of(config)
    print(f"{tag}: {a.pairs} pairs of 1 and {n2} rank(s), {a.steps} steps each", flush=True)
    runs: dict[int, list[dict[str, Any]]] = {1: [], n2: []}
    pair_eff = []
    for i in range(a.pairs):
        order = (1, n2) if i % 2 == 0 else (n2, 1)  # ABBA
        got = {n: runner.run(config, n, f"{tag}_{n}r_{i}") for n in order}
        for n, r in got.items():
            if r is not None:
                runs[n].append(r)
        one, many = got[1], got[n2]
        if one is not None and many is not None:
            pair_eff.append(many["total_frames_per_s"] / (n2 * one["total_frames_per_s"]))
    profiled: dict[int, list[dict[str, Any]]] = {1: [], n2: []}
    for i in range(a.profile_runs):
        for n in ((1, n2) if i % 2 == 0 else (n2, 1)):
            r = runner.run(config, n, f"{tag}_{n}r_profile_{i}", "--profile-phases")
            if r is not None:
                profiled[n].append(r)
    tot = {n: spread([r["total_frames_per_s"] for r in runs[n]]) for n in runs}
    result = dict(
        config=config, tag=tag, ranks=n2,
        total_frames_per_s=tot,
        efficiency_per_pair=spread(pair_eff),
        efficiency_of_medians=(tot[n2]["median"] / (n2 * tot[1]["median"]) if tot[1] and tot[n2] else None),
        step_us={n: spread([statistics.fmean(f["step_us"] for f in r["ranks"]) for r in runs[n]]) for n in runs},
        phases_host_us={n: phases_of(runs[n]) for n in runs},
        phases_profiled_us={n: phases_of(profiled[n]) for n in profiled},
        step_profiled_us={n: spread([statistics.fmean(f["step_us"] for f in r["ranks"]) for r in profiled[n]])
                          for n in profiled},
        runs={n: runs[n] for n in runs}, profiled_runs={n: profiled[n] for n in profiled})
    return result


def print_result(res: dict[str, Any]) -> None:
    n2 = res["ranks"]
    print(f"\n## {res['tag']}  (train_ddp.py {res['config']})")
    print(f"| | 1 rank | {n2} ranks |\n| --- | --- | --- |")
    print(f"| total frames/s: median [min, IQR, max] | {fmt(res['total_frames_per_s'][1])} | "
          f"{fmt(res['total_frames_per_s'][n2])} |")
    print(f"| step us (rank mean) | {fmt(res['step_us'][1])} | {fmt(res['step_us'][n2])} |")
    eom = res["efficiency_of_medians"]
    print(f"efficiency per ABBA pair: {fmt(res['efficiency_per_pair'], pct=True)}; "
          f"of the medians: {eom:.1%}" if eom is not None else "efficiency: not enough runs")
    for key, what in (("phases_host_us", "host time per phase, nothing waited for (median of runs)"),
                      ("phases_profiled_us", "each phase waited for, --profile-phases (median of runs)")):
        ph = res[key]
        names = list(ph[1] or ph[n2])
        if not names:
            continue
        print(f"\nus/step, {what}:")
        print("| ranks | " + " | ".join(names) + " | sum |")
        print("| --- " * (len(names) + 2) + "|")
        for n in (1, n2):
            if ph[n]:
                print(f"| {n} | " + " | ".join(f"{ph[n][p]:,.0f}" for p in names)
                      + f" | {sum(ph[n][p] for p in names if p not in ('allreduce', 'backward_local')):,.0f} |")
        if ph[1] and ph[n2]:
            print(f"| {n2} - 1 | " + " | ".join(f"{ph[n2][p] - ph[1][p]:+,.0f}" for p in names) + " | |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for logs, per-run JSON and scaling.json")
    ap.add_argument("--config", action="append",
                    help="train_ddp.py arguments of one configuration (repeatable), e.g. \"--mode atlas\", "
                         "\"--mode atlas --no-train\", \"--mode batch --targets host\"; default \"--mode atlas\"")
    ap.add_argument("--ranks", type=int, default=2, help="the multi-rank side (one rank per GPU)")
    ap.add_argument("--pairs", type=int, default=8, help="ABBA pairs of (1 rank, N ranks) runs per config")
    ap.add_argument("--profile-runs", type=int, default=1, help="--profile-phases runs per side per config")
    ap.add_argument("--cameras", type=int, default=64)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=600, help="timed steps of a run")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--time-limit", type=float, default=280.0, help="seconds; no run starts that would not fit")
    ap.add_argument("--run-timeout", type=float, default=120.0, help="seconds for one torchrun launch")
    args = ap.parse_args(argv)
    configs = args.config or ["--mode atlas"]
    runner = Runner(args)
    results = [measure(runner, c) for c in configs]
    for res in results:
        print_result(res)
    if runner.skipped:
        print(f"\nnot run for the time limit ({args.time_limit:.0f} s): {', '.join(runner.skipped)}")
    if runner.failed:
        print(f"\nfailed: {'; '.join(runner.failed)}")
    (runner.out / "scaling.json").write_text(json.dumps(dict(args=vars(args), results=results,
                                                             skipped=runner.skipped, failed=runner.failed), indent=1))
    return 1 if runner.failed or not all(r["efficiency_per_pair"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
