"""PPO on MuJoCo pixels, end to end on the batch: N HalfCheetah-v5 envs in one process (physics in threads, one
BatchRenderer render + read per step), a small CNN policy, plain PyTorch. On the CUDA backend the observations
are CUDA tensors and the rollout stays on the GPU; on the CPU backend everything runs on the CPU.

    MUJOCO_GL=egl python examples/mujoco_batch_ppo.py --envs 16 --steps 20000 [--backend auto|cuda|cpu]

--steps is the total number of env steps (all envs together). Prints one progress line per update and
"trained: ..." at the end.
"""
import argparse
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from gltensor.mujoco import MujocoVectorEnv  # noqa: E402


class Agent(nn.Module):  # type: ignore[misc, unused-ignore]  # Any where torch is missing
    """Nature-CNN encoder, a Gaussian policy head and a value head."""

    def __init__(self, size: int, act_dim: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
                                  nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            flat = self.body(torch.zeros(1, 3, size, size)).shape[1]
        self.trunk = nn.Sequential(nn.Linear(flat, 256), nn.ReLU())
        self.mu, self.v = nn.Linear(256, act_dim), nn.Linear(256, 1)
        self.log_std = nn.Parameter(torch.full((act_dim,), -0.5))

    def forward(self, obs: torch.Tensor) -> tuple[torch.distributions.Normal, torch.Tensor]:  # (N, H, W, 3) uint8
        h = self.trunk(self.body(obs.permute(0, 3, 1, 2).float() / 255))
        return torch.distributions.Normal(self.mu(h), self.log_std.exp()), self.v(h).squeeze(-1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20000, help="total env steps")
    ap.add_argument("--rollout", type=int, default=64, help="steps per env between updates")
    ap.add_argument("--size", type=int, default=84)
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--task", default="HalfCheetah-v5")
    args = ap.parse_args()
    torch.manual_seed(0)

    envs = MujocoVectorEnv(args.task, args.envs, height=args.size, width=args.size, backend=args.backend,
                           render_flags={"shadow": False, "reflection": False})
    obs, _ = envs.reset(seed=0)
    dev = obs.device  # CUDA on the CUDA backend: the whole rollout stays there
    print("%r: observations %s %s on %s" % (envs, tuple(obs.shape), obs.dtype, dev))
    space = envs.single_action_space
    assert isinstance(space, gymnasium.spaces.Box), space
    act_dim = space.shape[0]
    low = torch.as_tensor(space.low, device=dev)
    high = torch.as_tensor(space.high, device=dev)
    agent = Agent(args.size, act_dim).to(dev)
    opt = torch.optim.Adam(agent.parameters(), lr=3e-4)
    n, t_len = args.envs, min(args.rollout, max(1, args.steps // args.envs))
    updates = max(1, args.steps // (n * t_len))
    done_prev = torch.zeros(n, device=dev)
    ep_ret, finished = np.zeros(n), []
    t0, total = time.perf_counter(), 0
    for u in range(updates):
        buf_o, buf_a, buf_lp, buf_r, buf_d, buf_v = [], [], [], [], [], []
        for _ in range(t_len):
            with torch.no_grad():
                dist, v = agent(obs)
                a = dist.sample()
            # NEXT_STEP autoreset: a step after a finished episode resets that env (reward 0): mask it out
            nxt, r, term, trunc, _ = envs.step(a.clamp(low, high))
            buf_o.append(obs)
            buf_a.append(a)
            buf_lp.append(dist.log_prob(a).sum(-1))
            buf_v.append(v)
            buf_r.append(torch.as_tensor(r, dtype=torch.float32, device=dev) * (1 - done_prev))
            done = torch.as_tensor(np.logical_or(term, trunc), dtype=torch.float32, device=dev)
            buf_d.append(done)
            ep_ret += r * (1 - done_prev.cpu().numpy())
            for i in np.flatnonzero(np.logical_or(term, trunc)):
                finished.append(ep_ret[i])
                ep_ret[i] = 0
            obs, done_prev = nxt, done
            total += n
        with torch.no_grad():
            _, last_v = agent(obs)
        adv, gae = torch.zeros(t_len, n, device=dev), torch.zeros(n, device=dev)
        values = torch.stack(buf_v)
        for t in reversed(range(t_len)):
            nv = last_v if t == t_len - 1 else values[t + 1]
            delta = buf_r[t] + 0.99 * nv * (1 - buf_d[t]) - values[t]
            gae = delta + 0.99 * 0.95 * (1 - buf_d[t]) * gae
            adv[t] = gae
        ret = adv + values
        o, a, lp = torch.cat(buf_o), torch.cat(buf_a), torch.cat(buf_lp)
        adv, ret = adv.flatten(), ret.flatten()
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        for _ in range(2):
            for idx in torch.split(torch.randperm(len(o), device=dev), 256):
                dist, v = agent(o[idx])
                ratio = (dist.log_prob(a[idx]).sum(-1) - lp[idx]).exp()
                pg = -torch.min(ratio * adv[idx], ratio.clamp(0.8, 1.2) * adv[idx]).mean()
                loss = pg + 0.5 * (v - ret[idx]).pow(2).mean() - 0.001 * dist.entropy().sum(-1).mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                opt.step()
        mean_ret = "%.1f" % np.mean(finished[-10:]) if finished else "-"
        print("update %d/%d: %d env steps, %.0f env-steps/s, loss %.3f, mean return (last 10 episodes) %s"
              % (u + 1, updates, total, total / (time.perf_counter() - t0), loss.item(), mean_ret), flush=True)
    backend = envs.renderer.backend
    envs.close()
    print("trained: %d env steps of %d envs in %.1f s (%s backend)" % (total, n, time.perf_counter() - t0, backend))


if __name__ == "__main__":
    main()
