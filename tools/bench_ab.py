"""Compares `python -m gltensor.bench --quick` runs of two builds made in the same device call (issue 25's
acceptance: the refactor within noise of before). Reads the JSON of each run and prints, per cell and path, the
median µs per step of each build over its runs, the after/before ratio, and the spread of either build's runs
(max/min of its per-run medians) so that a ratio can be told from noise. Writes the table as JSON too.

    python3 tools/bench_ab.py --before a1.json a2.json --after b1.json b2.json --json ab.json
"""

import argparse
import json
import statistics


def medians(paths):
    """(cell label, path name) -> list of µs per step, one per JSON file (each the median of that run's runs)."""
    out = {}
    for p in paths:
        with open(p) as f:
            data = json.load(f)
        for cell in data["cells"]:
            for r in cell["results"]:
                if r.get("status") == "ok" and r.get("us_per_step"):
                    out.setdefault((cell["label"], r["name"]), []).append(r["us_per_step"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", nargs="+", required=True)
    ap.add_argument("--after", nargs="+", required=True)
    ap.add_argument("--json")
    a = ap.parse_args()
    before, after = medians(a.before), medians(a.after)
    rows = []
    for key in before:
        if key not in after:
            continue
        b, f = statistics.median(before[key]), statistics.median(after[key])
        spread = max(max(v) / min(v) for v in (before[key], after[key]))
        rows.append({"cell": key[0], "path": key[1], "before_us": b, "after_us": f, "after_over_before": f / b,
                     "run_spread": spread, "before_runs": before[key], "after_runs": after[key]})
    width = max((len(r["path"]) for r in rows), default=10)
    print(f"{'cell':<14} {'path':<{width}} {'before µs':>10} {'after µs':>10} {'after/before':>12} {'run spread':>10}")
    for r in rows:
        print(f"{r['cell']:<14} {r['path']:<{width}} {r['before_us']:>10.1f} {r['after_us']:>10.1f} "
              f"{r['after_over_before']:>12.3f} {r['run_spread']:>10.3f}")
    ratios = [r["after_over_before"] for r in rows if "gltensor" in r["path"]]
    if ratios:
        print(f"gltensor paths: median after/before {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} cells x paths)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "before": a.before, "after": a.after}, f, indent=1)


if __name__ == "__main__":
    main()
