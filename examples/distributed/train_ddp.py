#!/usr/bin/env python3
"""Render, capture and train on every GPU of a node (or of several nodes): one process per GPU, DDP.

    torchrun --nproc_per_node=2 examples/distributed/train_ddp.py --cameras 64 --size 128 --steps 300

Each rank makes its headless OpenGL context on its own GPU (`gltensor.Context.headless()` picks the
device the process works on: torch's current device, which this script sets from LOCAL_RANK), renders
a batch of cameras of the demo scene (gltensor.scene) into one atlas texture (or one texture each,
--mode batch), hands all of them to torch with ONE gltensor read per step (the rgb/float32/CHW
conversion rides in that copy), and trains a small CNN wrapped in DistributedDataParallel to predict
each camera's clock phase from its image. Rank 0 prints, per rank: the GPU its GL context runs on,
its step time and frames/s, and the total; --json writes the same.

Multi-node runs go through torchrun's rendezvous, e.g. two nodes of 8 GPUs:

    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 \\
        --rdzv_id=gltensor examples/distributed/train_ddp.py

Without CUDA (Mesa llvmpipe) the same script runs on the CPU backend with the gloo backend.
"""
import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")  # before anything imports OpenGL

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # examples/: vector_env
try:
    import gltensor  # noqa: E402
except ImportError:  # a checkout without installing: the in-place build
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    import gltensor  # noqa: E402
from vector_env import VectorEnv  # noqa: E402


class PhaseNet(nn.Module):  # type: ignore[misc]  # torch is typed loosely here
    """A small CNN: (N, 3, H, W) float images -> (N, 2) (sin, cos) of each camera's clock."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.head = nn.Linear(32 * 16, 2)

    def forward(self, x: Any) -> Any:
        return self.head(self.features(x))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cameras", type=int, default=64, help="cameras rendered per rank per step")
    ap.add_argument("--size", type=int, default=128, help="square image size of a camera")
    ap.add_argument("--mode", choices=("atlas", "batch"), default="atlas",
                    help="atlas: one texture of tiles, one Atlas read; batch: a texture per camera, one Batch read")
    ap.add_argument("--steps", type=int, default=300, help="timed steps")
    ap.add_argument("--warmup", type=int, default=30, help="untimed steps first")
    ap.add_argument("--no-train", action="store_true", help="render + read + a consumer op only (no model)")
    ap.add_argument("--json", help="rank 0 writes the per-rank figures here")
    args = ap.parse_args(argv)
    if min(args.cameras, args.size, args.steps) < 1 or args.warmup < 0:
        ap.error("--cameras, --size and --steps must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    use_cuda = gltensor.cuda_available() and torch.cuda.is_available()
    if use_cuda:
        if local_rank >= torch.cuda.device_count():
            # NCCL runs one rank per GPU; say so instead of torch's "invalid device ordinal".
            raise SystemExit(f"LOCAL_RANK {local_rank}, but {torch.cuda.device_count()} CUDA device(s) are visible: "
                             f"start at most one rank per GPU (torchrun --nproc_per_node <= "
                             f"{torch.cuda.device_count()}), or check CUDA_VISIBLE_DEVICES")
        torch.cuda.set_device(local_rank)  # the context below follows torch's current device
    if "RANK" in os.environ:
        dist.init_process_group("nccl" if use_cuda else "gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    world = dist.get_world_size() if dist.is_initialized() else 1
    if not use_cuda:
        torch.set_num_threads(1)  # llvmpipe renders on the CPU: leave it the cores

    with gltensor.Context.headless() as ctx, VectorEnv(
            args.cameras, args.size, args.mode, seed=rank,
            read_options=dict(channels="rgb", dtype="float32", layout="chw")) as env:
        device = torch.device("cuda", ctx.cuda_device) if env.backend == "cuda" else torch.device("cpu")
        if use_cuda and ctx.cuda_device != local_rank:
            raise SystemExit(f"rank {rank}: GL context on CUDA device {ctx.cuda_device}, expected {local_rank}")
        model = PhaseNet().to(device)
        if dist.is_initialized():
            model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        # Correctness first: the converted batch against glReadPixels of every camera.
        x = env.step()
        assert x.shape == (env.n, 3, env.size, env.size) and x.device == device, (x.shape, x.device)
        got = x.cpu().numpy()
        for k in range(env.n):
            want = env.reference(k)[..., :3].transpose(2, 0, 1).astype(np.float32) / 255.0
            if not np.allclose(got[k], want, atol=1e-6):
                raise SystemExit(f"rank {rank}: camera {k} differs from glReadPixels")

        def step() -> Any:
            x = env.step()  # render every camera, then ONE read: (N, 3, H, W) float32 on this GPU
            if args.no_train:
                return x.mean()
            phase = torch.as_tensor(np.stack([np.sin(env.t), np.cos(env.t)], 1), dtype=torch.float32)
            loss = nn.functional.mse_loss(model(x), phase.to(device, non_blocking=True))
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP all-reduces the gradients across ranks here
            opt.step()
            return loss

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        for _ in range(args.warmup):
            step()
        sync()
        if dist.is_initialized():
            dist.barrier()
        start = time.perf_counter()
        for _ in range(args.steps):
            loss = step()
        sync()
        elapsed = time.perf_counter() - start
        mine = dict(rank=rank, local_rank=local_rank, host=platform.node(), gl_renderer=ctx.renderer,
                    context_cuda_device=ctx.cuda_device, backend=env.backend, cameras=env.n, size=env.size,
                    step_us=elapsed / args.steps * 1e6, frames_per_s=args.steps * env.n / elapsed,
                    final_loss=float(loss.detach()))

    figures: list[Any] = [None] * world
    if dist.is_initialized():
        dist.all_gather_object(figures, mine)
    else:
        figures = [mine]
    if rank == 0:
        total = sum(f["frames_per_s"] for f in figures)
        print(f"{world} rank(s), {args.cameras} cameras of {args.size}x{args.size} per rank, mode {args.mode}, "
              f"{'render + read only' if args.no_train else 'DDP training'}, {args.steps} steps")
        print(f"{'rank':>4} {'host':<16} {'GL context':<12} {'step (us)':>10} {'frames/s':>10}  loss")
        for f in figures:
            where = f"cuda:{f['context_cuda_device']}" if f["context_cuda_device"] is not None else "cpu (Mesa)"
            print(f"{f['rank']:>4} {f['host'][:16]:<16} {where:<12} {f['step_us']:>10.0f} {f['frames_per_s']:>10.0f}"
                  f"  {f['final_loss']:.4f}")
        print(f"total: {total:.0f} frames/s")
        if args.json:
            Path(args.json).write_text(json.dumps(dict(args=vars(args), world=world, total_frames_per_s=total,
                                                       ranks=figures), indent=1))
    if dist.is_initialized():
        # Tear down together: a rank that destroys its process group while rank 0 is still printing can leave
        # gloo's connection threads of rank 0 to abort ("terminate called without an active exception").
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
