"""Mode procs: many engine processes, one GPU batch. One step = every worker renders its camera,
the trainer gets all N images as one batch on its device and runs the consumer op (x.float().mean()).

Paths, all in the same run, interleaved, median of runs:
  host        each worker glReadPixels -> numpy -> pipe (pickled, as SubprocVecEnv sends observations);
              the trainer stacks and copies to the GPU (what users run today)
  per_worker  gltensor in each worker: Capture.read(out=) into its row of a CUDA batch shared by torch's IPC
              (every worker holds a CUDA context and pays its own GL->CUDA switch)
  slots       gltensor.SharedSlots: workers write with GL alone into the trainer's memory, one read for all
              (the default write: a compute shader packs the image into the slot)
  slots_copy  the same with GLTENSOR_SLOTS_WRITE=copy in the workers (glReadPixels into a buffer of their own,
              then glCopyBufferSubData into the slot: the copy engines), on slots and workers of its own
  slots_blit  (diagnostic) as slots with GLTENSOR_SLOTS_PACK_INPUT=blit in the workers: the shader reads a copy
              blitted from the texture, not the texture itself (what `slots` did before it read textures directly)
  slots_out   as slots, the trainer reading into a batch tensor it keeps (read(out=)): no new frame and no
              DLPack hand-over per step
  slots_view  as slots, the trainer reading with copy=False: the set the workers wrote, handed to torch as it
              is (no copy, no kernel; torch.from_dlpack of the view)
  slots_torch as slots, the trainer reading into a new torch tensor each step (torch.empty, then read(out=)):
              fresh memory per step as with a frame, allocated by torch's caching allocator
  slots_noread  (diagnostic) the workers write their slots as in `slots`, the trainer reads nothing: the
              workers' share of the slots' time over the floor, the rest being the trainer's read
  floor       workers render and fence, nothing copied; the trainer's consumer op on a batch it already has
  floor_compute, floor_draw  (diagnostics) as floor, plus one pass in each worker that writes every pixel into a
              buffer of its own as a compute dispatch or as a draw (bench/passes.py): what the kind of pass costs
  pack        as floor, plus each worker's glReadPixels into a pixel-pack buffer of its own (what a slot write
              does on the GPU before its copy into the slot): where the slots' time over the floor goes
  atlas       one process draws N tiles of one texture and reads them with one Atlas read (no workers)

Every path's batch is checked against each worker's own glReadPixels before it is timed. Device memory per
worker process (NVML, when it can be read) is reported per path: GL-only workers vs workers with CUDA.

    python -m gltensor.bench procs [--workers 1,4,8,16,64] [--sizes 84,256,512] [--steps 200] [--runs 3]
"""
import argparse
import multiprocessing as mp
import os
import sys
import time

import numpy as np

from .measure import CheckFailed, Skip, median
from .options import arg, parse_sizes
from .report import fmt_us, machine_info, print_table, results_path, save_json

# What a worker's CUDA context takes on the device (measured on an H100: 1,050 MiB with torch): the per-worker
# path is skipped where N of them would not fit.
PER_WORKER_CONTEXT_BYTES = 1.2 * 2**30

PATHS = ("host", "per_worker", "slots", "slots_out", "slots_view", "slots_torch", "slots_copy", "slots_blit", "slots_noread", "floor", "floor_compute",
         "floor_draw", "pack", "atlas")
DEFAULT_PATHS = ("host", "per_worker", "slots", "slots_out", "slots_view", "floor", "atlas")
GL_ONLY_PATHS = ("host", "slots", "slots_out", "slots_view", "slots_torch", "slots_copy", "slots_blit", "slots_noread", "floor",
                 "floor_compute", "floor_draw", "pack")  # the workers of these never touch CUDA
# Each GL-only path's pool of workers and its slots: "slots_copy" has its own, written the other way.
POOL_OF = {"host": "gl", "slots": "gl", "slots_out": "gl", "slots_view": "gl", "slots_torch": "gl", "slots_noread": "gl", "floor": "gl", "pack": "gl",
           "floor_compute": "gl", "floor_draw": "gl",
           "slots_copy": "gl_copy", "slots_blit": "gl_blit"}
# The slot-write variables each pool's workers run with (the others unset).
WRITE_ENV = {"gl": {}, "gl_copy": {"GLTENSOR_SLOTS_WRITE": "copy"},
             "gl_blit": {"GLTENSOR_SLOTS_PACK_INPUT": "blit"}}


# ---------------------------------------------------------------- the worker process


def _worker(k, n, conn, slots_handle, batch, slots_env=None):
    """Serves the trainer: ("setup", w, h) makes the camera; ("step", i, path) renders step i and hands the
    image over the path's way; ("check", i, path) does the same and also returns the reference glReadPixels;
    ("write_path",) says how its slot writes; None ends. Replies ("ok", value) or ("error", text).
    `slots_env`: the slot-write variables for this worker (a WRITE_ENV value; the others are unset)."""
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    for name in ("GLTENSOR_SLOTS_WRITE", "GLTENSOR_SLOTS_PACK_INPUT"):
        os.environ.pop(name, None)
    os.environ.update(slots_env or {})
    try:
        import ctypes

        import gltensor
        from OpenGL import GL

        from .scenes import Cameras

        if slots_handle is not None:
            ctx = slots_handle.headless_context()  # no CUDA call in a GL-only worker, not even to pick the GPU
        else:
            ctx = gltensor.Context.headless()
        cams = cap = None
        passes = {}  # floor_compute / floor_draw: the extra pass of each, made at its first step
        # This worker's wall time per step in its two phases (render; hand-over: write, read or fence), kept
        # until the trainer asks for their medians ("timings"): where the workers' share of a step goes.
        spent = {"render": [], "handover": []}
        clock = time.perf_counter
        conn.send(("ok", os.getpid()))
        while True:
            msg = conn.recv()
            if msg is None:
                break
            cmd = msg[0]
            if cmd == "setup":
                _, w, h = msg
                if cams is not None:
                    if cap is not None:
                        cap.close()
                    cams.close()
                for extra in passes.values():
                    extra.close()
                passes = {}
                cams = Cameras(1, w, h, atlas=False, draw="pattern")
                tex = int(cams.targets[0].texture)
                pbo = int(GL.glGenBuffers(1))
                GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, pbo)
                GL.glBufferStorage(GL.GL_PIXEL_PACK_BUFFER, w * h * 4, None, 0)  # video memory, as the slots' stage
                GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
                cap = gltensor.Capture(tex) if batch is not None else None
                GL.glFinish()
                conn.send(("ok", None))
                continue
            if cmd == "write_path":
                conn.send(("ok", slots_handle.client.writer(slots_handle.slot).write_path))
                continue
            if cmd == "timings":
                conn.send(("ok", {phase: median(v) * 1e6 if v else None for phase, v in spent.items()}))
                spent = {phase: [] for phase in spent}
                continue
            _, i, path = msg
            t0 = clock()
            cams.draw_targets(i * n + k)  # a picture of its own for every worker and step
            t1 = clock()
            value = None
            if path == "host":
                value = cams.targets[0].read_pixels(flip=True)
            elif path == "per_worker":
                import torch

                cap.read(out=batch[k, :h, :w])  # its row of the shared batch, at this cell's size
                torch.cuda.current_stream().synchronize()  # the reply says the frame is there
            elif path in ("slots", "slots_out", "slots_view", "slots_torch", "slots_copy", "slots_blit", "slots_noread"):
                slots_handle.write(tex)
            elif path == "floor":
                GL.glFinish()
            elif path in ("floor_compute", "floor_draw"):
                if path not in passes:
                    from .passes import ExtraPass

                    passes[path] = ExtraPass(path[len("floor_"):], tex, w, h)
                    passes[path].check(cams.targets[0].read_pixels(flip=False))
                passes[path].run()
                GL.glFinish()
            elif path == "pack":
                GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, int(cams.targets[0].fbo))
                GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, pbo)
                GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
                GL.glReadPixels(0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, ctypes.c_void_p(0))
                GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
                GL.glFinish()
            if cmd == "step":
                spent["render"].append(t1 - t0)
                spent["handover"].append(clock() - t1)
            if cmd == "check":
                value = (value, cams.targets[0].read_pixels(flip=True))
            conn.send(("ok", value))
    except Exception as e:  # reported by the trainer, which knows which path and worker
        import traceback

        conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    finally:
        if slots_handle is not None:
            slots_handle.close()


class Pool:
    """N worker processes (spawn) serving one set of paths; `cuda_batch` (a CUDA tensor shared by IPC) for the
    per-worker path."""

    def __init__(self, n, slots_handles=None, cuda_batch=None, torch=None, slots_env=None):
        ctx = (torch.multiprocessing if cuda_batch is not None else mp).get_context("spawn")
        self.n, self.conns, self.procs = n, [], []
        for k in range(n):
            parent, child = ctx.Pipe()
            handle = slots_handles[k] if slots_handles else None
            p = ctx.Process(target=_worker, args=(k, n, child, handle, cuda_batch, slots_env), daemon=True)
            p.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(p)
        self.pids = self._gather()

    def _gather(self):
        out = []
        for k, c in enumerate(self.conns):
            if not c.poll(300):
                raise RuntimeError(f"worker {k} did not answer in 300 s")
            msg = c.recv()
            if msg[0] != "ok":
                raise RuntimeError(f"worker {k}: {msg[1]}")
            out.append(msg[1])
        return out

    def all(self, *cmd):
        for c in self.conns:
            c.send(cmd)
        return self._gather()

    def close(self):
        for c in self.conns:
            try:
                c.send(None)
            except OSError:
                pass
        for p in self.procs:
            p.join(30)
            if p.is_alive():
                p.kill()


def worker_memory_mib(pids):
    """Device memory (MiB) each pid holds on any GPU, from NVML (compute and graphics processes); None when
    NVML cannot be read."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    used = {}
    try:
        for d in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(d)
            for query in (pynvml.nvmlDeviceGetComputeRunningProcesses, pynvml.nvmlDeviceGetGraphicsRunningProcesses):
                for p in query(h):
                    mem = p.usedGpuMemory or 0
                    used[p.pid] = used.get(p.pid, 0) + mem
    finally:
        pynvml.nvmlShutdown()
    return [used.get(pid, 0) / 2**20 for pid in pids]


# ---------------------------------------------------------------- one cell: N workers at one size


class Cell:
    """What each path does on the trainer's side for N workers at w x h."""

    def __init__(self, torch, gltensor, device, n, w, h, pools, slots, cuda_batch):
        """pools: path -> Pool; slots: pool name ("gl", "gl_copy", "gl_blit") -> SharedSlots."""
        self.torch, self.gltensor, self.device = torch, gltensor, device
        self.n, self.w, self.h = n, w, h
        self.pools, self.slots, self.cuda_batch = pools, slots, cuda_batch
        self.floor_batch = torch.zeros((n, h, w, 4), dtype=torch.uint8, device=device)
        self.out_batch = torch.zeros((n, h, w, 4), dtype=torch.uint8, device=device)
        self.atlas_cams = self.atlas = None
        self.phases = {}  # path -> {"workers": [s], "read": [s]}: the trainer's wall time per step in each phase

    def setup(self, paths):
        done = set()
        for path in paths:
            if path == "atlas":
                from .scenes import Cameras

                self.atlas_cams = Cameras(self.n, self.w, self.h, atlas=True, draw="pattern")
                rows, cols = self.atlas_cams.rows, self.atlas_cams.cols
                self.atlas = self.gltensor.Atlas(int(self.atlas_cams.atlas_target.texture), tiles=(rows, cols),
                                                 count=self.n)
            elif id(self.pools[path]) not in done:
                done.add(id(self.pools[path]))
                self.pools[path].all("setup", self.w, self.h)

    def close(self):
        if self.atlas is not None:
            self.atlas.close()
            self.atlas_cams.close()

    def step_fn(self, path):
        """fn(i, check) -> the batch as a tensor (check: also the references, (N, H, W, 4) numpy)."""
        torch = self.torch
        if path == "atlas":
            from OpenGL import GL

            def atlas_step(i, check=False):
                self.atlas_cams.draw_atlas(i)
                GL.glFlush()  # the method: GL's work is submitted before the CUDA work that depends on it
                x = torch.from_dlpack(self.atlas.read())
                return (x, self.atlas_cams.reference(atlas=True, flip=True)) if check else x
            return atlas_step
        pool = self.pools[path]

        # The trainer's wall time per step: waiting for the workers, then reading (for slots, split into the
        # read itself and torch's DLPack hand-over of the frame).
        phases = self.phases.setdefault(path, {"workers": [], "read": [], "read_call": [], "handover": []})

        def step(i, check=False):
            t0 = time.perf_counter()
            values = pool.all("check" if check else "step", i, path)
            t1 = time.perf_counter()
            refs = np.stack([v[1] for v in values]) if check else None
            got = [v[0] for v in values] if check else values
            if path == "host":
                x = torch.from_numpy(np.stack(got)).to(self.device)
            elif path == "per_worker":
                x = self.cuda_batch
            elif path in ("slots", "slots_view", "slots_copy", "slots_blit"):
                frame = self.slots[POOL_OF[path]].read(copy=path != "slots_view")
                t2 = time.perf_counter()
                x = torch.from_dlpack(frame)
                phases["read_call"].append(t2 - t1)
                phases["handover"].append(time.perf_counter() - t2)
            elif path == "slots_out":
                x = self.slots[POOL_OF[path]].read(out=self.out_batch)
            elif path == "slots_torch":
                x = self.slots[POOL_OF[path]].read(out=torch.empty_like(self.out_batch))
            else:  # floor (and its diagnostics), pack, slots_noread: nothing handed over
                x = self.floor_batch
            phases["workers"].append(t1 - t0)
            phases["read"].append(time.perf_counter() - t1)
            return (x, refs) if check else x
        return step


def check(cell, path):
    if path.startswith("floor") or path in ("pack", "slots_noread"):
        return
    x, refs = cell.step_fn(path)(10_000, check=True)
    got = x.cpu().numpy()
    if got.shape != refs.shape or not np.array_equal(got, refs):
        bad = float(np.mean(got != refs)) if got.shape == refs.shape else 1.0
        raise CheckFailed(f"{path}, {cell.n} workers at {cell.w}x{cell.h}: {bad:.1%} of the bytes differ from the "
                          "workers' glReadPixels")


def time_path(cell, path, steps, warmup, max_seconds, sync, first):
    """µs per step (render + hand-over + consumer op), one sync at the end of the timed loop; the step count
    is cut so that one loop takes at most max_seconds (the count used is returned)."""
    fn = cell.step_fn(path)
    t0 = time.perf_counter()
    for i in range(first, first + warmup):
        fn(i).float().mean()
    sync()
    per = (time.perf_counter() - t0) / max(warmup, 1)
    steps = max(20, min(steps, int(max_seconds / max(per, 1e-6))))
    start = time.perf_counter()
    for i in range(first + warmup, first + warmup + steps):
        fn(i).float().mean()
    sync()
    return (time.perf_counter() - start) / steps * 1e6, steps


# ---------------------------------------------------------------- the mode


def build_parser():
    ap = argparse.ArgumentParser(prog="python -m gltensor.bench procs", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", default="1,4,8,16,64", help="worker counts N (comma-separated)")
    ap.add_argument("--sizes", type=arg(parse_sizes), default=parse_sizes("84,256,512"),
                    help="image sizes per worker, e.g. 84,256 or 97x61")
    ap.add_argument("--paths", default=",".join(DEFAULT_PATHS), help="paths to run, of " + ", ".join(PATHS))
    ap.add_argument("--steps", type=int, default=200, help="timed steps per run (cut to --max-seconds)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3, help="runs per path, interleaved; the median is reported")
    ap.add_argument("--max-seconds", type=float, default=2.0, help="longest timed loop of one run")
    ap.add_argument("--slot-buffers", type=int, default=3, help="SharedSlots(buffers=...) of the slot paths")
    ap.add_argument("--profile", default=None, metavar="DIR",
                    help="(diagnostic) after the timed runs, one more run of each path under torch.profiler (the "
                         "trainer's CUDA API calls and kernels): a table per cell and path in DIR")
    ap.add_argument("--quick", action="store_true", help="smoke test: 1 and 2 workers at 32x24, few steps")
    ap.add_argument("--json", default=None, help="where the JSON goes (default ~/.cache/gltensor/bench/procs_HOST.json)")
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.quick:
        args.workers, args.sizes, args.steps, args.warmup, args.runs = "1,2", [(32, 24)], 20, 3, 1
    counts = [int(v) for v in args.workers.split(",")]
    paths = [p for p in args.paths.split(",") if p]
    unknown = set(paths) - set(PATHS)
    if unknown:
        print(f"error: unknown path(s) {sorted(unknown)}; choose from {', '.join(PATHS)}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("error: this benchmark needs torch", file=sys.stderr)
        return 2
    import gltensor

    ctx = gltensor.Context.headless()
    info = machine_info(ctx, torch)
    cuda = torch.cuda.is_available() and gltensor.cuda_available()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    info["backend"] = "cuda" if cuda else "cpu"
    json_path = results_path("procs", info["host"], args.json)
    print(f"GL: {ctx.renderer} | torch {torch.__version__} | GPU: {info['gpu_name'] or 'none'} | "
          f"trainer device {device}")

    def sync():
        from OpenGL import GL

        GL.glFinish()
        if cuda:
            torch.cuda.synchronize()

    report = {"benchmark": "procs", "machine": info, "args": {k: v for k, v in vars(args).items() if k != "sizes"},
              "sizes": [list(s) for s in args.sizes], "cells": [], "status": "ok"}
    skipped = {}
    if "per_worker" in paths and not cuda:
        skipped["per_worker"] = "needs CUDA (each worker reads into a CUDA batch shared by IPC)"
    run_paths = [p for p in paths if p not in skipped]
    rows = []
    for n in counts:
        w_max, h_max = max(s[0] for s in args.sizes), max(s[1] for s in args.sizes)
        pools, slots, cuda_batch = {}, {}, None
        backend = "cuda" if cuda else "cpu"

        def gl_pool(name, size):
            """(Re)makes the GL-only pool `name` with slots of `size`: workers attach at their next write."""
            if name in pools:
                pools[name].close()
                slots.pop(name).close()
            slots[name] = gltensor.SharedSlots(n, size, backend=backend, buffers=args.slot_buffers)
            pools[name] = Pool(n, slots_handles=slots[name].handles(), slots_env=WRITE_ENV[name])

        try:
            for path in run_paths:
                if path in GL_ONLY_PATHS and POOL_OF[path] not in pools:
                    gl_pool(POOL_OF[path], args.sizes[0])
                if path == "per_worker" and "cuda" not in pools:
                    free = torch.cuda.mem_get_info(device)[0]
                    if n * PER_WORKER_CONTEXT_BYTES > 0.8 * free:
                        skipped[f"per_worker at {n} workers"] = (
                            f"{n} CUDA contexts of ~{PER_WORKER_CONTEXT_BYTES / 2**30:.1f} GiB would not fit the "
                            f"{free / 2**30:.0f} GiB free")
                        continue
                    cuda_batch = torch.zeros((n, h_max, w_max, 4), dtype=torch.uint8, device=device).share_memory_()
                    pools["cuda"] = Pool(n, cuda_batch=cuda_batch, torch=torch)
            cell_paths = [p for p in run_paths if p != "per_worker" or "cuda" in pools]
            memory = {name: worker_memory_mib(pool.pids) for name, pool in pools.items()}
            for (w, h) in args.sizes:
                for name in list(slots):
                    if slots[name].size != (w, h):
                        gl_pool(name, (w, h))
                by_path = {p: pools[POOL_OF.get(p, "cuda")] for p in cell_paths if p != "atlas"}
                batch_view = cuda_batch[:, :h, :w] if cuda_batch is not None else None
                cell = Cell(torch, gltensor, device, n, w, h, by_path, slots, batch_view)
                label = f"{n} x {w}x{h}"
                try:
                    cell.setup(cell_paths)
                    for path in cell_paths:
                        check(cell, path)
                    write_paths = {name: sorted(set(pools[name].all("write_path"))) for name in slots
                                   if any(POOL_OF.get(p) == name and p.startswith("slots") for p in cell_paths)}
                    times = {p: [] for p in cell_paths}
                    worker_phases = {p: [] for p in cell_paths if p != "atlas"}  # per run: each worker's medians
                    used = {}
                    first = 0
                    for run in range(args.runs):
                        # Each run starts at another path, so that no path always follows the same one (the
                        # host path's pipes and the GPU's state after a path shift what runs next).
                        shift = run % len(cell_paths)
                        for path in cell_paths[shift:] + cell_paths[:shift]:
                            if path != "atlas":
                                cell.pools[path].all("timings")  # drops what earlier paths left
                            us, steps = time_path(cell, path, args.steps, args.warmup, args.max_seconds, sync, first)
                            first += args.warmup + steps
                            times[path].append(us)
                            used[path] = steps
                            if path != "atlas":
                                worker_phases[path].append(cell.pools[path].all("timings"))
                    if args.profile:
                        profile_paths(cell, cell_paths, args, sync, first, os.path.join(args.profile, label))
                    med = {p: median(v) for p, v in times.items()}
                    cell_report = {"workers": n, "width": w, "height": h, "us_per_step": med, "runs": times,
                                   "steps": used, "worker_memory_mib": memory, "skipped": skipped,
                                   "slot_write_paths": write_paths,
                                   "phase_us": {p: {k: median(v) * 1e6 for k, v in ph.items() if v}
                                                for p, ph in cell.phases.items()},
                                   # each worker's own wall time per step (median over its steps, then the
                                   # median and the largest over workers and runs): render, and hand-over
                                   "worker_phase_us": {p: worker_summary(runs) for p, runs in worker_phases.items()},
                                   # reads that waited for the GPU before letting the workers into a set, of all
                                   # reads so far on those slots (this cell and the ones before at this N)
                                   "slot_read_waits": {name: {"waits": sl.read_waits, "reads": sl.reads,
                                                              "wait_us": sl.read_wait_us}
                                                       for name, sl in slots.items()}}
                    report["cells"].append(cell_report)
                    rows.append(row_of(label, med, run_paths))
                    if write_paths:
                        print(f"{label}: slot writes by pool: {write_paths}")
                    print_table(f"{label}: µs per step (median of {args.runs}); where it goes: the trainer's wait "
                                "for the workers and its read, each worker's render and hand-over (median / max)",
                                ["path", "µs/step", "frames/s", "trainer wait", "trainer read", "worker render",
                                 "worker hand-over"],
                                [phase_row(p, med[p], n, cell_report) for p in cell_paths])
                except (CheckFailed, Skip) as e:
                    print(f"{label}: {type(e).__name__}: {e}", file=sys.stderr)
                    report["cells"].append({"workers": n, "width": w, "height": h, "error": str(e)})
                    if isinstance(e, CheckFailed):
                        report["status"] = f"check failed: {e}"
                finally:
                    cell.close()
        finally:
            for pool in pools.values():
                pool.close()
            for sl in slots.values():
                sl.close()
    save_json(json_path, report)
    summarize(report, rows, run_paths, skipped)
    print(f"JSON: {json_path}")
    return 0 if report["status"] == "ok" else 1


def phase_row(path, us, n, cell_report):
    trainer = cell_report["phase_us"].get(path, {})
    workers = cell_report["worker_phase_us"].get(path, {})

    def both(phase):
        w = workers.get(phase)
        return f"{fmt_us(w['median'])} / {fmt_us(w['max'])}" if w else "-"
    return [path, fmt_us(us), "%.0f" % (n * 1e6 / us), fmt_us(trainer.get("workers")), fmt_us(trainer.get("read")),
            both("render"), both("handover")]


def profile_paths(cell, paths, args, sync, first, stem):
    """One untimed run of each path under torch.profiler: the trainer's CPU ops, CUDA API calls and kernels,
    summed over the run, as a table per path (STEM.PATH.txt; the profiler slows what it watches, so these are
    for finding where the trainer's time goes, not figures)."""
    from torch.profiler import ProfilerActivity, profile

    os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
    for path in paths:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            _, steps = time_path(cell, path, args.steps, args.warmup, args.max_seconds, sync, first)
        first += args.warmup + steps
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=50)
        with open(f"{stem.replace(' ', '')}.{path}.txt", "w") as f:
            f.write(f"{path}: {steps} timed steps + {args.warmup} warm-up\n{table}\n")


def worker_summary(runs):
    """{phase: {"median": µs, "max": µs}} over every worker of every run (each worker's median per run)."""
    out = {}
    for phase in ("render", "handover"):
        vals = [w[phase] for run in runs for w in run if w.get(phase) is not None]
        if vals:
            out[phase] = {"median": median(vals), "max": max(vals)}
    return out


# The slot paths the summary compares with host readback and the floor: the frame read (torch.from_dlpack of a
# new frame each step), the read into a batch the trainer keeps, and the zero-copy view.
SUMMARY_SLOTS = ("slots", "slots_out", "slots_view")


def row_of(label, med, paths):
    host, floor = med.get("host"), med.get("floor")
    ratios = []
    for p in SUMMARY_SLOTS:
        if p in paths:
            slots = med.get(p)
            ratios += ["%.2fx" % (host / slots) if host and slots else "-",
                       "%.2f" % (slots / floor) if slots and floor else "-"]
    return [label] + [fmt_us(med.get(p)) for p in paths] + ratios


def summarize(report, rows, paths, skipped):
    header = ["N x size"] + list(paths) + [h for p in SUMMARY_SLOTS if p in paths
                                            for h in (f"host/{p}", f"{p}/floor")]
    print_table("µs per step, every path in the same run (render + hand-over + consumer op)", header, rows)
    for p, why in skipped.items():
        print(f"skipped {p}: {why}")
    mem = [c for c in report["cells"] if c.get("worker_memory_mib")]
    if mem:
        last = {}
        for c in mem:
            last[c["workers"]] = c["worker_memory_mib"]
        lines = []
        for n, m in sorted(last.items()):
            for name, vals in m.items():
                if vals:
                    lines.append([f"{n} workers", "GL only" if name.startswith("gl") else "gltensor per worker (CUDA)",
                                  "%.0f" % (sum(vals) / len(vals)), "%.0f" % max(vals)])
        if lines:
            print_table("device memory per worker process (MiB, NVML)", ["workers", "pool", "mean", "max"], lines)
