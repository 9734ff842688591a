#!/usr/bin/env python3
"""A/B of the finisher thread: MujocoVectorEnv's batched step with a fake render (drains the order, then a
GIL-free wait of TAIL µs standing in for the tile resolve and the read), with and without _Finisher, alternating
blocks. CPU only; what it shows is whether the thread hand-off costs more than the overlap saves."""
import sys, time, numpy as np, gymnasium
from statistics import median
from gltensor.mujoco import MujocoVectorEnv
from gltensor.mujoco import vector as V
task = sys.argv[1]; N = int(sys.argv[2]); T = int(sys.argv[3]); TAIL = float(sys.argv[4]) * 1e-6
env = MujocoVectorEnv([lambda: gymnasium.make(task)] * N, height=16, width=16, threads=T, physics="batched",
                      render_only=False)
env.reset(seed=0)
fake = env._render()
def drain(order=None):
    if order is not None:
        for _ in order:
            pass
    t = time.perf_counter() + TAIL
    while time.perf_counter() < t:
        time.sleep(0)  # releases the GIL
    return fake
env._render = drain
A = np.random.default_rng(0).uniform(-1, 1, (64, N) + env.single_action_space.shape).astype(np.float32)
fin = env._finisher
ways = {"serial": None, "finisher": fin}
for k in range(200):
    env.step(A[k % 64])
res = {w: [] for w in ways}
for turn in range(30):
    for w in (ways if turn % 2 == 0 else list(ways)[::-1]):
        env._finisher = ways[w]
        for k in range(3):
            env.step(A[k % 64])
        t0 = time.perf_counter()
        for k in range(40):
            env.step(A[k % 64])
        res[w].append((time.perf_counter() - t0) / 40 * 1e6)
env._finisher = fin
ratio = median([f / s for f, s in zip(res["finisher"], res["serial"])])
print(f"{task} N={N} threads={T} tail={TAIL*1e6:.0f}us: serial {median(res['serial']):.0f} us, finisher {median(res['finisher']):.0f} us, finisher/serial {ratio:.3f}")
env.close()
