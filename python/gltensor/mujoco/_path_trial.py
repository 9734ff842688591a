"""The measured choice between exact paths of one batch step (``physics="auto"``): every path gives the same
results bit for bit, so which one steps a given step is free, and the fastest one on this host, for these envs,
at this N, is found by timing them all on the batch's first steps rather than assumed from another host's
figures. DmControlBatch chooses between its batched and per-env paths; MujocoVectorEnv between its batched path
with all of its C threads, with a quarter of them, with all of them but drawn after the physics, and its per-env
path.

Why measure here and not in a table: on the GPU hosts the batched and per-env paths of ``DmControlBatch`` swapped
places between runs and N (batched / per-env with pixels, cheetah-run on H200 hosts: 0.98x / 0.83x / 1.04x and
1.23x / 0.90x / 1.02x at N = 4 / 16 / 64, benchmarks/results/dmc_threads_h200.json and dmc_finisher_h200.json).
Their difference is a few hand-overs between threads per env against the task's Python run serially, which
depends on the cores, the task and N.

How: the paths take turns step by step, so that a host whose speed drifts moves all alike: first ``warmup``
turns that are not timed (each path's first steps pay for GL state, caches and its threads' first wake), then
``pairs`` timed turns; the path with the lowest median step time is kept for good (ties keep the earlier). Only the
step itself is timed (physics, render, read), not what the caller does between steps. The first version warmed
up the first path only, and on an H200 host its choice at N = 16 went against the benchmark's longer timing
(benchmarks/results/dmc_auto_h200.json).

Once more, later (``again_after``): a batch's first steps are not its steady state. The batched ways of a 4-way
trial ran 4-60% slower over their first ten turns than over their last fifty on an H200 host
(benchmarks/results/mujoco_trial_series_h200.json), and on another host the trial kept 16 physics threads at N = 16
and 64 where a probe of a warmed-up batch then found 16 threads 32% and 7% slower than 4
(benchmarks/results/mujoco_phases_breakdown2_h200.json). So MujocoVectorEnv and DmControlBatch step the way kept
for ``again_after`` steps, then run the trial once more, and the second choice is final.
"""

from __future__ import annotations

import time
from statistics import median

__all__ = ["PathTrial"]


class PathTrial:
    """Which path to take for each step until decided, then the fastest one. With ``again_after`` > 0 the trial
    runs once more after that many steps on the path kept, and its second choice is final."""

    def __init__(self, *paths: str, warmup: int = 2, pairs: int = 10, again_after: int = 0):
        if len(paths) < 2 or len(set(paths)) != len(paths):
            raise ValueError(f"PathTrial: two or more distinct paths, not {paths}")
        if warmup < 0 or pairs < 1 or again_after < 0:
            raise ValueError(f"PathTrial: warmup must be >= 0, pairs >= 1 and again_after >= 0, not {warmup}, {pairs}, "
                             f"{again_after}")
        self.paths = tuple(paths)
        self.warmup, self.pairs, self.again_after = int(warmup), int(pairs), int(again_after)
        self.times = {p: [] for p in self.paths}  # the timed steps of the trial in progress, or of the last one
        self.rounds = []  # each finished trial: (first timed step, last step, {path: median seconds}, choice)
        self._steps = 0  # steps of the trial in progress
        self._taken = 0  # steps in all, trials and the steps between them
        self._since = 0  # steps on the path kept since the last choice
        self._timing = True
        self.choice = None

    @property
    def decided(self) -> bool:
        """A path was kept (it may still be tried again: see settled)."""
        return self.choice is not None

    @property
    def timing(self) -> bool:
        """A trial is in progress: the paths take turns."""
        return self._timing

    @property
    def settled(self) -> bool:
        """The choice is final: no trial in progress or to come."""
        return not self._timing and (self.again_after == 0 or len(self.rounds) >= 2)

    @property
    def length(self) -> int:
        """Steps of one trial until its choice: the warm-up turns and the timed turns."""
        return len(self.paths) * (self.warmup + self.pairs)

    def next_path(self) -> str:
        """The path the next step takes."""
        if not self._timing:
            return self.choice
        return self.paths[self._steps % len(self.paths)]

    def step(self, run):
        """run(path) for the path due, timed and recorded while a trial is in progress; returns what it returned. A
        run that raises is not recorded: the same path is then due again."""
        path = self.next_path()
        if not self._timing:
            out = run(path)
            self.tick()
            return out
        t0 = time.perf_counter()
        out = run(path)
        self.record(path, time.perf_counter() - t0)
        return out

    def tick(self) -> None:
        """A step taken on the path kept, between trials: after again_after of them the trial runs once more."""
        if self._timing or self.settled:
            return
        self._taken += 1
        self._since += 1
        if self._since >= self.again_after:
            self._timing, self._steps = True, 0
            self.times = {p: [] for p in self.paths}

    def record(self, path: str, seconds: float) -> None:
        """The time of the step just taken on `path` (the one next_path() gave); decides after the last pair. A step
        that raised is not recorded: the same path is then due again. Between trials it counts as a tick()."""
        if not self._timing:
            self.tick()
            return
        if path != self.next_path():
            raise ValueError(f"PathTrial: a step on {path!r} was recorded where {self.next_path()!r} was due")
        if self._steps >= len(self.paths) * self.warmup:
            self.times[path].append(float(seconds))
        self._steps += 1
        self._taken += 1
        if self._steps >= self.length:
            self.choice = min(self.paths, key=lambda p: (median(self.times[p]), self.paths.index(p)))
            first = self._taken - self.length + len(self.paths) * self.warmup + 1
            self.rounds.append((first, self._taken, {p: median(self.times[p]) for p in self.paths}, self.choice))
            self._timing, self._since = False, 0

    def summary(self) -> str:
        """The medians in words (after a choice), each trial's."""
        said = []
        for k, (first, last, medians, choice) in enumerate(self.rounds):
            each = ", ".join(f"{p} {medians[p] * 1e6:,.0f} µs" for p in self.paths)
            said.append(f"measured {'again ' if k else ''}on steps {first}-{last}, in turn: {each} a step (medians of "
                        f"{self.pairs} each); {choice} kept")
        if self.again_after and len(self.rounds) == 1:
            said.append(f"measured again after {self.again_after} steps")
        return "; ".join(said)
