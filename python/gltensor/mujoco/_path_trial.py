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
"""

from __future__ import annotations

import time
from statistics import median

__all__ = ["PathTrial"]


class PathTrial:
    """Which path to take for each step until decided, then the fastest one."""

    def __init__(self, *paths: str, warmup: int = 2, pairs: int = 10):
        if len(paths) < 2 or len(set(paths)) != len(paths):
            raise ValueError(f"PathTrial: two or more distinct paths, not {paths}")
        if warmup < 0 or pairs < 1:
            raise ValueError(f"PathTrial: warmup must be >= 0 and pairs >= 1, not {warmup}, {pairs}")
        self.paths = tuple(paths)
        self.warmup, self.pairs = int(warmup), int(pairs)
        self.times = {p: [] for p in self.paths}
        self._steps = 0
        self.choice = None

    @property
    def decided(self) -> bool:
        return self.choice is not None

    @property
    def length(self) -> int:
        """Steps until the choice: the warm-up turns and the timed turns."""
        return len(self.paths) * (self.warmup + self.pairs)

    def next_path(self) -> str:
        """The path the next step takes."""
        if self.choice is not None:
            return self.choice
        return self.paths[self._steps % len(self.paths)]

    def step(self, run):
        """run(path) for the path due, timed and recorded; returns what it returned. A run that raises is not
        recorded: the same path is then due again."""
        path = self.next_path()
        t0 = time.perf_counter()
        out = run(path)
        self.record(path, time.perf_counter() - t0)
        return out

    def record(self, path: str, seconds: float) -> None:
        """The time of the step just taken on `path` (the one next_path() gave); decides after the last pair. A step
        that raised is not recorded: the same path is then due again."""
        if self.choice is not None:
            return
        if path != self.next_path():
            raise ValueError(f"PathTrial: a step on {path!r} was recorded where {self.next_path()!r} was due")
        if self._steps >= len(self.paths) * self.warmup:
            self.times[path].append(float(seconds))
        self._steps += 1
        if self._steps >= self.length:
            self.choice = min(self.paths, key=lambda p: (median(self.times[p]), self.paths.index(p)))

    def summary(self) -> str:
        """The medians in words (after the choice)."""
        each = ", ".join(f"{p} {median(self.times[p]) * 1e6:,.0f} µs" for p in self.paths)
        return (f"measured on steps {len(self.paths) * self.warmup + 1}-{self.length}, in turn: {each} a step "
                f"(medians of {self.pairs} each); {self.choice} kept")
