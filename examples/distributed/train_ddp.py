#!/usr/bin/env python3
"""Render, capture and train on every GPU of a node (or of several nodes): one process per GPU, DDP.

    torchrun --nproc_per_node=2 examples/distributed/train_ddp.py --cameras 64 --size 128 --steps 300

Each rank makes its headless OpenGL context on its own GPU (`gltensor.Context.headless()` picks the
device the process works on: torch's current device, which this script sets from LOCAL_RANK), renders
a batch of cameras of the demo scene (gltensor.scene) into one atlas texture (or one texture each,
--mode batch), hands all of them to torch with ONE gltensor read per step (the rgb/float32/CHW
conversion rides in that copy), and trains a small CNN wrapped in DistributedDataParallel to predict
each camera's clock phase from its image. Rank 0 prints, per rank: the GPU its GL context runs on,
its step time and frames/s, where its step goes (host time per phase: render, read, targets, forward,
backward, optimizer; --profile-phases waits for the GPU at each phase's end and times the all-reduce),
the nodes with their GPUs, and the total; --json writes the same. tools/ddp_scaling.py runs it at 1 and
N ranks, interleaved, for scaling figures with their spread.

Multi-node runs go through torchrun's rendezvous, e.g. two nodes of 8 GPUs:

    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 \\
        --rdzv_id=gltensor examples/distributed/train_ddp.py

Tested as two nodes simulated on one host (tests/test_distributed_example.py, on CPUs with gloo; and
tools/gpu_verify.sh multinode, each launch seeing one GPU), the same command in two shells:

    CUDA_VISIBLE_DEVICES=0 torchrun --nnodes=2 --nproc_per_node=1 --node_rank=0 --rdzv_backend=c10d \\
        --rdzv_endpoint=localhost:29500 --rdzv_id=gltensor examples/distributed/train_ddp.py
    CUDA_VISIBLE_DEVICES=1 torchrun --nnodes=2 --nproc_per_node=1 --node_rank=1 --rdzv_backend=c10d \\
        --rdzv_endpoint=localhost:29500 --rdzv_id=gltensor examples/distributed/train_ddp.py

With c10d the rendezvous assigns the node ranks (the launch that reports is whichever got rank 0). Where
both launches see the same one GPU, add `--dist-backend gloo`: NCCL refuses two ranks on one device.
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


PHASES = ("render", "read", "targets", "forward", "backward", "optimizer")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cameras", type=int, default=64, help="cameras rendered per rank per step")
    ap.add_argument("--size", type=int, default=128, help="square image size of a camera")
    ap.add_argument("--mode", choices=("atlas", "batch"), default="atlas",
                    help="atlas: one texture of tiles, one Atlas read; batch: a texture per camera, one Batch read")
    ap.add_argument("--steps", type=int, default=300, help="timed steps")
    ap.add_argument("--warmup", type=int, default=30, help="untimed steps first")
    ap.add_argument("--no-train", action="store_true", help="render + read + a consumer op only (no model)")
    ap.add_argument("--targets", choices=("device", "host"), default="device",
                    help="device: each camera's clock goes to the GPU through a pinned buffer (an asynchronous "
                         "copy of N floats) and sin/cos are taken there; host: np.stack(sin, cos) and .to(device) "
                         "from pageable memory every step, which waits for the GPU (what this example did before)")
    ap.add_argument("--profile-phases", action="store_true",
                    help="wait for the GPU (torch.cuda.synchronize, glFinish after the render) at the end of every "
                         "phase and time the all-reduce with CUDA events in a DDP comm hook: each phase's whole "
                         "cost, at the price of the overlap a plain run gets (compare the step time of both)")
    ap.add_argument("--dist-backend", choices=("auto", "nccl", "gloo"), default="auto",
                    help="auto: nccl with CUDA, else gloo; gloo where two ranks share a GPU (NCCL refuses that)")
    ap.add_argument("--json", help="rank 0 writes the per-rank figures here")
    args = ap.parse_args(argv)
    if min(args.cameras, args.size, args.steps) < 1 or args.warmup < 0:
        ap.error("--cameras, --size and --steps must be positive")
    return args


class DeviceTargets:
    """Each camera's (sin, cos) of its clock, built on the training device without waiting for it.

    The clocks live in host memory (numpy, the env's state). On CUDA they go through one of two pinned
    buffers with an asynchronous copy (N floats); a buffer is refilled only after its copy of two steps
    ago is done (an event, long since passed), so the CPU never waits for the GPU here."""

    def __init__(self, n: int, device: Any) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.host = [torch.empty(n, dtype=torch.float32, pin_memory=self.cuda) for _ in range(2)]
        self.copied = [torch.cuda.Event() if self.cuda else None for _ in range(2)]
        self.used = [False, False]
        self.i = 0

    def __call__(self, t: "np.ndarray[Any, Any]") -> Any:
        i, self.i = self.i, self.i ^ 1
        if self.cuda and self.used[i]:
            self.copied[i].synchronize()  # type: ignore[union-attr]
        self.host[i].numpy()[:] = t
        d = self.host[i].to(self.device, non_blocking=True)
        if self.cuda:
            self.copied[i].record()  # type: ignore[union-attr]
            self.used[i] = True
        return torch.stack((torch.sin(d), torch.cos(d)), 1)


def host_targets(t: "np.ndarray[Any, Any]", device: Any) -> Any:
    """What this example did before: built on the host, copied from pageable memory (waits for the GPU)."""
    phase = torch.as_tensor(np.stack([np.sin(t), np.cos(t)], 1), dtype=torch.float32)
    return phase.to(device, non_blocking=True)


class AllReduceTimer:
    """A DDP comm hook: the default all-reduce (average), timed from the moment a bucket of gradients is
    ready on this rank to the moment it is reduced (CUDA events on the GPU's timeline; the clock on CPUs).
    That span includes waiting for the slowest rank to get there: the cost of lockstep, not only transfer."""

    def __init__(self, world: int, cuda: bool) -> None:
        self.world, self.cuda = world, cuda
        self.spans: list[tuple[Any, Any]] = []

    def _now(self) -> Any:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def hook(self, state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:  # DDP checks these
        ready = self._now()
        buf = bucket.buffer().div_(self.world)
        fut = dist.all_reduce(buf, async_op=True).get_future()

        def done(f: Any) -> Any:
            self.spans.append((ready, self._now()))  # runs ordered after the all-reduce (CUDA: on a stream that waits)
            return f.value()[0]
        return fut.then(done)

    def take_us(self) -> float:
        """Sum of the spans recorded since the last call, in µs (call after the GPU is synchronised)."""
        total = sum(a.elapsed_time(b) * 1e3 if self.cuda else (b - a) * 1e6 for a, b in self.spans)
        self.spans.clear()
        return float(total)


def gpu_identity(device: Any) -> dict[str, Any]:
    """Which physical GPU this rank's device is: what CUDA_VISIBLE_DEVICES maps it to tells nodes apart."""
    if device.type != "cuda":
        return {}
    props = torch.cuda.get_device_properties(device)
    ident: dict[str, Any] = dict(gpu_name=props.name)
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        ident["gpu_uuid"] = str(uuid)
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        ident["gpu_pci_bus"] = int(bus)
    return ident


def spread(values: "np.ndarray[Any, Any]") -> dict[str, float]:
    q = np.percentile(values, [0, 10, 25, 50, 75, 90, 100])
    return dict(zip(("min", "p10", "p25", "median", "p75", "p90", "max"), (float(v) for v in q)))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    node_rank = int(os.environ.get("GROUP_RANK", 0))  # torchrun: the node's rank in the rendezvous
    use_cuda = gltensor.cuda_available() and torch.cuda.is_available()
    if use_cuda:
        if local_rank >= torch.cuda.device_count():
            # NCCL runs one rank per GPU; say so instead of torch's "invalid device ordinal".
            raise SystemExit(f"LOCAL_RANK {local_rank}, but {torch.cuda.device_count()} CUDA device(s) are visible: "
                             f"start at most one rank per GPU (torchrun --nproc_per_node <= "
                             f"{torch.cuda.device_count()}), or check CUDA_VISIBLE_DEVICES")
        torch.cuda.set_device(local_rank)  # the context below follows torch's current device
        torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick its fastest kernels once
    if "RANK" in os.environ:
        backend = args.dist_backend if args.dist_backend != "auto" else ("nccl" if use_cuda else "gloo")
        dist.init_process_group(backend)
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
        timer = None
        if dist.is_initialized():
            # gradient_as_bucket_view: the gradients are views into DDP's all-reduce buckets (no copy in and out)
            model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                            gradient_as_bucket_view=True)
            if args.profile_phases:
                timer = AllReduceTimer(world, device.type == "cuda")
                model.register_comm_hook(None, timer.hook)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        targets = DeviceTargets(env.n, device)

        # Correctness first: the converted batch against glReadPixels of every camera.
        x = env.step()
        assert x.shape == (env.n, 3, env.size, env.size) and x.device == device, (x.shape, x.device)
        got = x.cpu().numpy()
        for k in range(env.n):
            want = env.reference(k)[..., :3].transpose(2, 0, 1).astype(np.float32) / 255.0
            if not np.allclose(got[k], want, atol=1e-6):
                raise SystemExit(f"rank {rank}: camera {k} differs from glReadPixels")

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        def gl_finish() -> None:
            from OpenGL import GL
            GL.glFinish()

        # One row per step, one column per phase: host seconds from the end of the previous phase (plain: where
        # the CPU spends the step, nothing waited for; --profile-phases: each phase waited for to its end).
        times = np.zeros((args.warmup + args.steps, len(PHASES)))
        allreduce_us = np.zeros(args.warmup + args.steps)
        profile = args.profile_phases

        def step(i: int) -> Any:
            row = times[i]
            t0 = time.perf_counter()
            env.advance()
            env.render()  # the draw calls of every camera
            if profile:
                gl_finish()
            t1 = time.perf_counter()
            x = env.read()  # ONE read: (N, 3, H, W) float32 on this GPU
            if profile:
                sync()
            t2 = time.perf_counter()
            row[0], row[1] = t1 - t0, t2 - t1
            if args.no_train:
                out = x.mean()
                if profile:
                    sync()
                row[3] = time.perf_counter() - t2  # the consumer op, in the forward column
                return out
            want = targets(env.t) if args.targets == "device" else host_targets(env.t, device)
            if profile:
                sync()
            t3 = time.perf_counter()
            loss = nn.functional.mse_loss(model(x), want)
            if profile:
                sync()
            t4 = time.perf_counter()
            loss.backward()  # DDP all-reduces the gradients across ranks here
            if profile:
                sync()
            t5 = time.perf_counter()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if profile:
                sync()
            t6 = time.perf_counter()
            row[2:] = t3 - t2, t4 - t3, t5 - t4, t6 - t5
            if timer is not None:
                allreduce_us[i] = timer.take_us()
            return loss

        for i in range(args.warmup):
            step(i)
        sync()
        if dist.is_initialized():
            dist.barrier()
        start = time.perf_counter()
        for i in range(args.warmup, args.warmup + args.steps):
            loss = step(i)
        sync()
        elapsed = time.perf_counter() - start
        timed = times[args.warmup:] * 1e6
        phases = {p: float(timed[:, k].mean()) for k, p in enumerate(PHASES)}
        if timer is not None:
            ar = allreduce_us[args.warmup:]
            phases["allreduce"] = float(ar.mean())  # part of backward: its all-reduce span (incl. waiting)
            phases["backward_local"] = phases["backward"] - phases["allreduce"]
        mine = dict(rank=rank, local_rank=local_rank, node_rank=node_rank, host=platform.node(), pid=os.getpid(),
                    cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"), gl_renderer=ctx.renderer,
                    context_cuda_device=ctx.cuda_device, **gpu_identity(device), backend=env.backend,
                    dist_backend=dist.get_backend() if dist.is_initialized() else None,
                    cameras=env.n, size=env.size, targets=args.targets, profile_phases=profile,
                    step_us=elapsed / args.steps * 1e6, frames_per_s=args.steps * env.n / elapsed,
                    step_host_us=spread(timed.sum(1)), phases_us=phases,
                    final_loss=float(loss.detach()))

    figures: list[Any] = [None] * world
    if dist.is_initialized():
        dist.all_gather_object(figures, mine)
    else:
        figures = [mine]
    if rank == 0:
        report(args, world, figures)
    if dist.is_initialized():
        # Tear down together: a rank that destroys its process group while rank 0 is still printing can leave
        # gloo's connection threads of rank 0 to abort ("terminate called without an active exception").
        dist.barrier()
        dist.destroy_process_group()
    return 0


def report(args: argparse.Namespace, world: int, figures: list[Any]) -> None:
    total = sum(f["frames_per_s"] for f in figures)
    what = "render + read only" if args.no_train else f"DDP training (targets built on the {args.targets})"
    print(f"{world} rank(s), {args.cameras} cameras of {args.size}x{args.size} per rank, mode {args.mode}, {what}, "
          f"{args.steps} steps{', phases waited for (--profile-phases)' if args.profile_phases else ''}")
    print(f"{'rank':>4} {'node':>4} {'host':<16} {'GL context':<12} {'step (us)':>10} {'frames/s':>10}  loss")
    for f in figures:
        where = f"cuda:{f['context_cuda_device']}" if f["context_cuda_device"] is not None else "cpu (Mesa)"
        print(f"{f['rank']:>4} {f['node_rank']:>4} {f['host'][:16]:<16} {where:<12} {f['step_us']:>10.0f} "
              f"{f['frames_per_s']:>10.0f}  {f['final_loss']:.4f}")
    names = list(figures[0]["phases_us"])
    print("per-phase us/step (" + ("each phase waited for" if args.profile_phases else
                                   "host time between phase ends, nothing waited for") + "):")
    print(f"{'rank':>4} " + " ".join(f"{n:>14}" for n in names) + f" {'step p10/p50/p90 (host)':>26}")
    for f in figures:
        s = f["step_host_us"]
        print(f"{f['rank']:>4} " + " ".join(f"{f['phases_us'][n]:>14.0f}" for n in names)
              + f" {s['p10']:>8.0f}/{s['median']:.0f}/{s['p90']:.0f}")
    nodes: dict[int, list[Any]] = {}
    for f in figures:
        nodes.setdefault(f["node_rank"], []).append(f)
    for n, fs in sorted(nodes.items()):
        gls = ", ".join(f"rank {f['rank']} on " + (f"cuda:{f['context_cuda_device']}"
                                                   + (f" ({f['gpu_uuid']})" if f.get("gpu_uuid") else "")
                                                   if f["context_cuda_device"] is not None else "cpu (Mesa)")
                        for f in fs)
        vis = fs[0]["cuda_visible_devices"]
        print(f"node {n}: host {fs[0]['host']}, CUDA_VISIBLE_DEVICES={vis if vis is not None else '(unset)'}, {gls}")
    print(f"total: {total:.0f} frames/s")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(args=vars(args), world=world, nodes=len(nodes),
                                                   total_frames_per_s=total, ranks=figures), indent=1))


if __name__ == "__main__":
    sys.exit(main())
