"""What every mode measures with: the exceptions a path raises, the timed loops of the method.

The method (benchmarks/README.md): one step = render + hand the frames over + a consumer op on them; warm-up,
a timed loop with one synchronisation at its end, median of runs; every path checked before it is timed.
"""
import statistics
import time


class CheckFailed(Exception):
    """A path's output differs from the reference readback."""


class Skip(Exception):
    """A path that cannot run here; the message is the reason."""


def median(values):
    return statistics.median(values)


def paired_ratio(rounds_a, rounds_b):
    """The median over rounds of a[k] / b[k]: ratios of paths timed in the same interleaved round, so that a
    host whose speed drifts between rounds (seen on GPU hosts: a path's rounds spread by up to 1.6x) moves both
    sides of each ratio alike. None when the round counts differ."""
    if not rounds_a or len(rounds_a) != len(rounds_b):
        return None
    return median([a / b for a, b in zip(rounds_a, rounds_b)])


def alternate_blocks(fns, turns, block, sync, warm=2):
    """µs per call of each fn(k) in `fns`, timed in `turns` turns of blocks: in each turn every fn takes one block,
    in an order rotated by one each turn (A B C, B C A, C A B, ...; with two, A B then B A), each block `warm` untimed
    calls, then `block` timed ones between two synchronisations. Returns one list per fn, its µs per call block by
    block: element i of each was timed within seconds of the others', so their ratios leave out a host's drift over a
    run (minutes), which rounds of 100 steps a path do not (on an H200 host one path's three rounds spread by 1.8x:
    benchmarks/results/mujoco_retrial2_h200.json)."""
    fns = list(fns)
    if len(fns) < 2 or turns < 1 or block < 1 or warm < 0:
        raise ValueError(f"alternate_blocks: two or more fns, turns and block >= 1 and warm >= 0, not {len(fns)} fns, "
                         f"{turns}, {block}, {warm}")
    times = tuple([] for _ in fns)
    k = 0
    for i in range(turns):
        for side in [(i + j) % len(fns) for j in range(len(fns))]:
            fn = fns[side]
            for _ in range(warm):
                fn(k)
                k += 1
            sync()
            t0 = time.perf_counter()
            for _ in range(block):
                fn(k)
                k += 1
            sync()
            times[side].append((time.perf_counter() - t0) / block * 1e6)
    return times


def round_order(paths, round_index):
    """The paths in the order round `round_index` times them: as given in even rounds, reversed in odd ones, so
    that no path always follows the same one (a path after CPU-only paths starts with the GPU's clocks down)."""
    paths = list(paths)
    return paths if round_index % 2 == 0 else paths[::-1]


def time_calls(fn, calls, sync):
    """CPU µs per call of fn(): `calls` calls, one sync before and one at the end."""
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def time_steps(draw, transfer, steps, warmup, sync, first=0):
    """µs per step as the method in benchmarks/README.md prescribes: draw(i), then transfer() and the consumer op
    x.float().mean() (the draw alone when transfer is None); `warmup` steps first, one sync at the end of
    the timed loop. Steps are numbered from `first`, so that consecutive calls can draw new frames."""
    if transfer is None:
        step = draw
    else:
        def step(i):
            draw(i)
            transfer().float().mean()
    for i in range(first, first + warmup):
        step(i)
    sync()
    start = time.perf_counter()
    for i in range(first + warmup, first + warmup + steps):
        step(i)
    sync()
    return (time.perf_counter() - start) / steps * 1e6


