"""The suite's (mode grid's) output: the progress bar, the headline verdicts, the tables and the plot of a report,
and --from-json (the output of a saved report again, without GL)."""
import json
import sys
from pathlib import Path

from .grid_spec import HEADLINES, LABEL, PATH_KEYS, cell_label, size_label
from .report import fmt_us, print_table


def _fmt_ratio(v):
    return "-" if v is None else "%.2fx" % v


def short(text, n=90):
    text = str(text)
    return text if len(text) <= n else text[:n - 1] + "…"


# ---------------------------------------------------------------- progress bar

class Bar:
    """tqdm on a terminal; elsewhere (logs, pipes) one line per cell on stderr, unless --no-progress."""

    def __init__(self, total, enabled):
        self.bar, self.lines = None, enabled
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, unit="run", desc="suite", file=sys.stderr, dynamic_ncols=True,
                                disable=None)
            except ImportError:
                pass

    def add(self, n):
        if self.bar is not None and n:
            self.bar.total += n
            self.bar.refresh()

    def update(self, n=1):
        if self.bar is not None:
            self.bar.update(n)

    def describe(self, text):
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)

    def write(self, text):
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        elif self.lines:
            print(text, file=sys.stderr, flush=True)

    def cell_done(self, text):
        if self.bar is None and self.lines:
            print(text, file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()




# ---------------------------------------------------------------- output

def headlines(report, cuda):
    out = []
    by = {(r["cameras"], tuple(r["size"]), r["path"]): r for c in report["cells"] for r in c.get("results", [])}
    cells = {(c["cameras"], tuple(c["size"])): c for c in report["cells"]}
    for hl in HEADLINES:
        key = (hl["cameras"], tuple(hl["size"]))
        entry = {"name": hl["name"], "cameras": hl["cameras"], "size": list(hl["size"]), "path": hl["path"],
                 "baseline": hl["baseline"], "target": ">= %gx" % hl["target"], "ratio": None}
        p, b = by.get(key + (hl["path"],)), by.get(key + (hl["baseline"],))
        if key not in cells:
            entry.update(verdict="NOT RUN", reason="cell %s not in the grid" % cell_label(hl["cameras"], *hl["size"]))
        elif cells[key].get("status") != "ok":
            entry.update(verdict="NOT RUN", reason="cell skipped: %s" % cells[key].get("reason"))
        elif p is None or b is None:
            entry.update(verdict="NOT RUN", reason="path %s not selected" % (hl["path"] if p is None else hl["baseline"]))
        elif p["status"] != "ok" or b["status"] != "ok":
            which = p if p["status"] != "ok" else b
            entry.update(verdict="NOT RUN", reason="%s skipped: %s" % (which["path"], which["reason"]))
        else:
            ratio = b["us_per_step"] / p["us_per_step"]
            entry["ratio"] = ratio
            if not cuda:
                entry.update(verdict="N/A", reason="CPU backend: the targets are about the GPU hand-off")
            else:
                entry.update(verdict="PASS" if ratio >= hl["target"] else "FAIL", reason="")
        out.append(entry)
    return out


def print_results(report):
    cams = sorted({c["cameras"] for c in report["cells"]})
    for n in cams:
        rows = []
        for c in report["cells"]:
            if c["cameras"] != n:
                continue
            size = size_label(*c["size"])
            if c.get("status") != "ok":
                rows.append([size, "(all paths)", "-", "-", "-", "-", "-", "-", "-", "skipped: " + short(c.get("reason", ""))])
                continue
            for r in c["results"]:
                if r["status"] != "ok":
                    rows.append([size, r["name"], "-", "-", "-", "-", "-", "-", "-", "skipped: " + short(r["reason"])])
                    continue
                steps = "%dx%d%s" % (r["runs"], r["steps_per_run"], " capped" if r["capped"] else "")
                rows.append([size, r["name"], fmt_us(r["us_per_step"]), fmt_us(r["us_per_image"]),
                             "{:,.0f}".format(r["frames_per_s"]), _fmt_ratio(r["speedup_vs_cpu_round_trip"]),
                             _fmt_ratio(r.get("speedup_vs_cpu_usual")),
                             _fmt_ratio(r["speedup_vs_cuda_python"]), steps, r["note"]])
        print_table("%d camera%s per step: µs per step (render + transfer + x.float().mean()), median of runs"
                    % (n, "" if n == 1 else "s"),
                    ["size", "path", "µs/step", "µs/image", "frames/s", "vs lean CPU rt", "vs usual CPU rt",
                     "vs cuda-python", "runs x steps", "note"], rows, left=(0, 1))


def plot(report, path):
    """µs per image against pixels per image, one panel per camera count, one line per path."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return "matplotlib not installed: %s" % e
    cams = sorted({c["cameras"] for c in report["cells"]})
    if not cams:
        return "no cells"
    fig, axes = plt.subplots(1, len(cams), figsize=(4.2 * len(cams) + 2.5, 4.6), squeeze=False, sharey=True)
    colours = {"render": "0.55", "cpu": "tab:red", "cpu_usual": "tab:brown", "cpu_pinned": "tab:orange",
               "cuda_python": "tab:purple", "panda3d": "tab:pink", "single": "tab:blue", "batch": "tab:green",
               "atlas": "tab:olive", "fused": "tab:cyan"}
    style = {k: dict(color=colours[k], marker="o", linestyle="-", markersize=4) for k in PATH_KEYS}
    style["render"].update(linestyle="--", marker=".")
    style["fused"].update(linestyle=":")
    # The recipe and gltensor single cost the same per image (one map per camera): dashed crosses on top keep
    # the recipe's line visible over single's.
    style["cuda_python"].update(linestyle="--", marker="x", markersize=6, zorder=3)
    handles = {}
    # The same x axis in every panel: every size of the grid, so that panels compare at a glance.
    sizes = sorted({tuple(c["size"]) for c in report["cells"]}, key=lambda s: (s[0] * s[1], s))
    px = [w * h for w, h in sizes]
    for ax, n in zip(axes[0], cams):
        for key in PATH_KEYS:
            pts = [(r["size"][0] * r["size"][1], r["us_per_image"]) for c in report["cells"] if c["cameras"] == n
                   for r in c.get("results", []) if r["path"] == key and r["status"] == "ok"]
            if not pts:
                continue
            pts.sort()
            (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], label=LABEL[key], **style[key])
            handles[key] = line
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(min(px) / 1.6, max(px) * 1.6)
        ax.set_xticks(px)
        ax.set_xticklabels([size_label(w, h) for w, h in sizes], rotation=45, ha="right", fontsize=8)
        ax.minorticks_off()
        ax.set_title("%d camera%s" % (n, "" if n == 1 else "s"))
        ax.set_xlabel("image size")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("µs per image (render + transfer + consumer op)")
    m = report["machine"]
    fig.suptitle("gltensor.bench, %s: %s | GL %s | %s" % (
        report["date"][:10], m.get("gpu_name") or "no GPU", m.get("gl_renderer"),
        "CUDA backend" if report["backend"] == "cuda" else "CPU backend (CPU timers)"), fontsize=10)
    keys = [k for k in PATH_KEYS if k in handles]
    fig.legend([handles[k] for k in keys], [LABEL[k] for k in keys], loc="center right", fontsize=8)
    skipped = ["%s: %s" % (LABEL[s["path"]], short(s["reason"], 70)) for s in report["skipped_paths"]]
    if skipped:
        fig.text(0.01, 0.01, "skipped: " + "; ".join(skipped), fontsize=7, color="0.35")
    fig.tight_layout(rect=(0, 0.04 if skipped else 0, 1 - 2.5 / fig.get_figwidth(), 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def summarize(report, json_path, plot_path, why_no_plot):
    """The end of a run's output (also of --from-json): tables, headline verdicts, skips, notes, files."""
    print_results(report)
    print_table("Headline targets, speed-up in µs/step of the same cell",
                ["target", "path", "baseline", "speed-up", "needed", "verdict", "why"],
                [[h["name"], h["path"], h["baseline"], _fmt_ratio(h["ratio"]), h["target"], h["verdict"],
                  short(h.get("reason", ""), 100)] for h in report["headlines"]], left=(0, 1, 2, 5))
    print()
    for s in report["skipped_paths"]:
        print("skipped path %s (%s): %s" % (s["path"], LABEL[s["path"]], s["reason"]))
    print("note: batch and atlas run for 2 cameras or more")
    for n in report["notes"]:
        print("note: " + n)
    print("JSON: %s" % json_path)
    print("plot: %s" % (plot_path if not why_no_plot else "not written (%s)" % why_no_plot))
    print("elapsed: %.1f s" % report["elapsed_s"])


def from_json(json_path, plot_path):
    """--from-json: the tables and verdicts of a saved run, and its plot drawn again (no GL, no timing)."""
    try:
        report = json.loads(Path(json_path).read_text())
    except (OSError, ValueError) as e:
        print("error: cannot read the report %s: %s" % (json_path, e), file=sys.stderr)
        return 2
    if report.get("benchmark") != "suite" or report.get("status") != "ok":
        print("error: %s is not a finished suite report (benchmark=%r, status=%r); give the JSON that a completed "
              "`python -m gltensor.bench` run wrote" % (json_path, report.get("benchmark"), report.get("status")),
              file=sys.stderr)
        return 2
    print("report of %s, %s: %s | GL: %s | backend: %s" % (
        report["date"], report["machine"].get("host"), report["machine"].get("gpu_name") or "no GPU",
        report["machine"].get("gl_renderer"), report["backend"]))
    print("method: " + report["method"])
    plot_path = Path(plot_path) if plot_path else Path(json_path).with_suffix(".png")
    summarize(report, json_path, plot_path, plot(report, plot_path))
    return 0
