"""PPO on MuJoCo pixels with TorchRL: ClipPPOLoss, GAE and a SyncDataCollector over gltensor.torchrl.GymBatchEnv.

N HalfCheetah-v5 environments run in one process and are rendered in one batch; on the CUDA backend the frames
are born on the GPU, the collector's batches, the transforms, GAE and the loss never copy them to the host (only
the actions go to the host, once per step, for the physics). A small CNN (Nature-DQN encoder) is shared by the
policy (TanhNormal) and the value head, as TorchRL's ActorValueOperator does it; the collector runs the
policy on the device it trains on, so it needs no weight update between iterations.

    MUJOCO_GL=egl python examples/torchrl_ppo_pixels.py --envs 16 --steps 64 --iterations 40
    python examples/torchrl_ppo_pixels.py --envs 2 --steps 16 --iterations 2 --size 48    # a CPU smoke run

Prints one line per iteration (the loss and its terms, the mean reward per step, env-steps/s) and, at the end,
the mean loss of the first and last iterations.
"""
import argparse
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")  # before MuJoCo is imported: headless EGL

import torch  # noqa: E402
from tensordict.nn import NormalParamExtractor, TensorDictModule  # noqa: E402
from torch import nn  # noqa: E402

try:  # TorchRL 0.14 calls its single-process collector Collector; 0.10-0.13 SyncDataCollector
    from torchrl.collectors import Collector as SyncDataCollector  # noqa: E402
except ImportError:
    from torchrl.collectors import SyncDataCollector  # noqa: E402
from torchrl.envs import Compose, InitTracker, RewardSum, ToTensorImage, TransformedEnv  # noqa: E402
from torchrl.modules import ActorValueOperator, ProbabilisticActor, TanhNormal, ValueOperator  # noqa: E402
from torchrl.objectives import ClipPPOLoss  # noqa: E402
from torchrl.objectives.value import GAE  # noqa: E402

from gltensor.torchrl import GymBatchEnv  # noqa: E402


class Encoder(nn.Module):  # type: ignore[misc, unused-ignore]  # Any where torch is missing
    """The Nature-DQN encoder on (..., 3, size, size) images in [0, 1]: the leading dims (envs, time) are folded
    into one batch for the convolutions, which take 4-D input only, and unfolded after."""

    def __init__(self, size: int, width: int = 256) -> None:
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(3, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
                                   nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            flat = int(self.convs(torch.zeros(1, 3, size, size)).shape[1])
        self.head = nn.Sequential(nn.Linear(flat, width), nn.ReLU())
        self.width = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-3]
        h = self.head(self.convs(x.reshape(-1, *x.shape[-3:])))
        return h.reshape(*lead, self.width)


def make_agent(env: TransformedEnv, size: int, device: torch.device) -> ActorValueOperator:
    act_dim = env.action_spec.shape[-1]
    encoder = Encoder(size)
    width = encoder.width
    common = TensorDictModule(encoder, in_keys=["pixels_float"], out_keys=["hidden"])
    head = nn.Sequential(nn.Linear(width, 2 * act_dim), NormalParamExtractor())
    spec = env.action_spec
    policy = ProbabilisticActor(TensorDictModule(head, in_keys=["hidden"], out_keys=["loc", "scale"]),
                                in_keys=["loc", "scale"], spec=spec, distribution_class=TanhNormal,
                                distribution_kwargs={"low": spec.space.low[0], "high": spec.space.high[0]},
                                return_log_prob=True)
    value = ValueOperator(nn.Linear(width, 1), in_keys=["hidden"])
    return ActorValueOperator(common, policy, value).to(device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=16, help="environments in the batch")
    ap.add_argument("--steps", type=int, default=64, help="steps per environment in each iteration's rollout")
    ap.add_argument("--iterations", type=int, default=40, help="collect + update iterations")
    ap.add_argument("--size", type=int, default=84, help="frame height = width")
    ap.add_argument("--epochs", type=int, default=4, help="passes over each rollout")
    ap.add_argument("--minibatches", type=int, default=4, help="minibatches per pass")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--task", default="HalfCheetah-v5")
    args = ap.parse_args()
    torch.manual_seed(0)

    base = GymBatchEnv(args.task, args.envs, height=args.size, width=args.size, backend=args.backend,
                       render_flags={"shadow": False, "reflection": False})
    device = base.device  # CUDA on the CUDA backend: frames, rollout, GAE and loss all stay there
    env = TransformedEnv(base, Compose(ToTensorImage(in_keys=["pixels"], out_keys=["pixels_float"]), RewardSum(),
                                       InitTracker()))
    env.set_seed(0)
    print("%r: frames %s uint8 on %s" % (base, tuple(base.observation_spec["pixels"].shape), device), flush=True)

    agent = make_agent(env, args.size, device)
    actor, critic = agent.get_policy_operator(), agent.get_value_operator()
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True)
    loss_module = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=1e-3, critic_coeff=0.5,
                              loss_critic_type="smooth_l1", normalize_advantage=True)
    optim = torch.optim.Adam(loss_module.parameters(), lr=args.lr)
    per_batch = args.envs * args.steps
    collector = SyncDataCollector(env, actor, frames_per_batch=per_batch,
                                  total_frames=per_batch * args.iterations, device=device)

    losses = []
    t0 = time.perf_counter()
    for it, batch in enumerate(collector):
        collect_s = time.perf_counter() - t0
        totals = []
        for _ in range(args.epochs):
            with torch.no_grad():
                gae(batch)  # advantages with the current critic, on the batch's device
            flat = batch.reshape(-1)
            for idx in torch.randperm(flat.shape[0], device=device).chunk(args.minibatches):
                out = loss_module(flat[idx])
                loss = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
                optim.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(loss_module.parameters(), 0.5)
                optim.step()
                totals.append(torch.stack([loss.detach(), out["loss_objective"].detach(),
                                           out["loss_critic"].detach(), out["loss_entropy"].detach()]))
        mean = torch.stack(totals).mean(0).tolist()  # one device-to-host read per iteration, for the print
        losses.append(mean[0])
        reward = batch["next", "reward"].mean().item()
        print("iteration %d: loss %.4f (objective %.4f, critic %.4f, entropy %.4f), reward/step %.3f, "
              "collect %.0f env-steps/s" % (it, mean[0], mean[1], mean[2], mean[3], reward, per_batch / collect_s),
              flush=True)
        t0 = time.perf_counter()
    collector.shutdown()
    env.close()
    k = max(1, min(3, len(losses) // 3))
    first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
    print("loss: mean of the first %d iterations %.4f, of the last %d %.4f (%s)"
          % (k, first, k, last, "went down" if last < first else "did not go down"))


if __name__ == "__main__":
    main()
