"""How each way of MujocoVectorEnv's physics trial times step by step over a long run (diagnostics for
physics="auto"'s choice, not a benchmark).

    MUJOCO_GL=egl python3 tools/mujoco_trial_series.py [--envs 4,16,64,256] [--turns 100] [--json P]

For each N (HalfCheetah-v5, 84x84, light visuals as the bench sets them): a fresh batch with physics="auto" whose
trial is made to run --turns turns per way with no warm-up (the ways take turns step by step, as the trial does),
each step followed by the bench's Nature-CNN forward and a synchronisation, as in a training loop. It prints, per
way, the median step time of consecutive windows of --window turns, and which way a trial would keep if it
warmed up for W turns per way and then timed 10 (W = 2, the trial's own, and later starts). JSON: every time.
"""
import argparse
import datetime
import functools
import json
import os
import platform
from statistics import median

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from gltensor.bench.mujoco import make_gym, nature_cnn  # noqa: E402
from gltensor.mujoco import MujocoVectorEnv  # noqa: E402
from gltensor.mujoco._path_trial import PathTrial  # noqa: E402


def series(n, turns, device):
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    venv = MujocoVectorEnv([functools.partial(make_gym, "HalfCheetah-v5", 84, 84, "light", None)] * n,
                           height=84, width=84)
    try:
        paths = list(venv._trial_paths)
        trial = venv.physics_trial = PathTrial(*paths, warmup=0, pairs=turns)
        net = nature_cnn(torch, 84, device)
        venv.reset(seed=0)
        acts = [np.random.default_rng(k).uniform(-1, 1, (n, venv.single_action_space.shape[0])) for k in range(8)]
        k = 0
        while not trial.settled:
            obs = venv.step(acts[k % len(acts)])[0]
            with torch.no_grad():
                net(torch.as_tensor(obs, device=device).permute(0, 3, 1, 2).float().div_(255)).sum()
            sync()
            k += 1
        return {"N": n, "kept_after_all": trial.choice,
                "times_us": {p: [t * 1e6 for t in trial.times[p]] for p in paths}}
    finally:
        venv.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", default="4,16,64,256")
    ap.add_argument("--turns", type=int, default=100, help="timed turns per way")
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = []
    for n in [int(x) for x in args.envs.split(",")]:
        row = series(n, args.turns, device)
        times = row["times_us"]
        w = args.window
        print(f"N = {n}: median µs of step() (in a loop with the forward) per window of {w} turns")
        for p, ts in times.items():
            print(f"  {p:45s} " + " ".join(f"{median(ts[i:i + w]):7.0f}" for i in range(0, len(ts), w)))
        row["kept_if_warmed"] = {}
        for warm in (2, 10, 25, 50):
            if warm + 10 <= args.turns:
                kept = min(times, key=lambda p: median(times[p][warm:warm + 10]))
                row["kept_if_warmed"][warm] = kept
        row["last_half_medians_us"] = {p: median(ts[len(ts) // 2:]) for p, ts in times.items()}
        print("  kept if warmed W turns:", row["kept_if_warmed"], "| fastest over the last half:",
              min(row["last_half_medians_us"], key=row["last_half_medians_us"].get), flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tool": "tools/mujoco_trial_series.py", "host": platform.node(),
                       "gpu": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
                       "date": datetime.date.today().isoformat(), "turns": args.turns, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
