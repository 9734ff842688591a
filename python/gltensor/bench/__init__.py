"""gltensor's benchmark: every way of getting rendered OpenGL frames into torch (and back), measured one way.

    python -m gltensor.bench [MODE] [options]      # MODE defaults to grid; `MODE --help` lists its options

The package imports the library; the library never imports it (nothing under gltensor/ outside this folder
names gltensor.bench). Not public API: names and signatures change with the benchmarks.

Layers, each module importing only those above it:
  measure.py        CheckFailed, Skip, the timed loop of benchmarks/README.md's method (time_steps, time_calls)
  report.py         tables, the machine description, where a mode's JSON goes by default
  options.py        the parsers of sizes, camera counts and configurations; the fixed-step modes' shared options
  scenes.py         what the cameras draw: Cameras (N targets + an atlas of the same tiles), the single-camera draw
  paths.py          the compared GL paths, one definition each: BenchPath, the CPU round trips, the cuda-python recipe
  panda3d_paths.py  the Panda3D paths: Panda3DCameras (getRamImage), the RAM readback, MetaDrive's recipe
  grid.py, grid_report.py   the suite (mode grid): every path over sizes x camera counts, its tables and plot
  single.py, batch.py, convert.py, upload.py, panda3d.py, procs.py, mujoco.py, torchrl.py    the other
                    modes, one file each
  __main__.py       the command line: picks the mode and hands it the rest of the arguments

A mode plugs in with one module and one line:
  1. gltensor/bench/<name>.py with `main(argv) -> int` (the exit status): it parses its own options
     (argparse, prog "python -m gltensor.bench <name>"), runs, prints its tables and writes its JSON
     (report.results_path(<name>, host, args.json) gives the default path, <report.results_dir()>/<name>_<host>.json:
     $GLTENSOR_BENCH_DIR or ~/.cache/gltensor/bench, never the checkout unless --json asks for it).
     It follows the method: every compared path checked against a reference before it is timed (raise
     measure.CheckFailed, exit 1), warm-up, one synchronisation at the end of each timed loop (measure.time_steps),
     median of runs interleaved across paths; a path that cannot run is listed with its reason (measure.Skip).
     Reuse the paths of paths.py and the cameras of scenes.py rather than writing them again.
  2. an entry in MODES below: the CLI lists it in --help and dispatches `python -m gltensor.bench <name> ...`
     to it. Modules are imported only when their mode runs, so a mode may import what only it needs (an engine,
     multiprocessing) at its top.
"""
import os

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")  # headless: set before any benchmark module imports OpenGL

# mode -> (module, what it measures). The first is the default (no MODE given).
MODES = {
    "grid": ("gltensor.bench.grid",
             "the suite: every path (CPU round trips, cuda-python recipe, Panda3D, gltensor single/Batch/Atlas/fused) "
             "over image sizes x camera counts, tables, headline verdicts, JSON and plot"),
    "single": ("gltensor.bench.single",
               "one camera of the lit scene, fixed steps: read(), read(out=), the CPU round trips, the cuda-python "
               "recipe; the CPU time of one read() call against the plain C loop"),
    "batch": ("gltensor.bench.batch",
              "N cameras per step, fixed steps: per-camera reads and the cuda-python recipe against Batch, "
              "Batch(out=) and Atlas"),
    "convert": ("gltensor.bench.convert",
                "the fused conversion (flip, rgb, float32, CHW) against the plain copy and the torch chain; "
                "depth against colour"),
    "upload": ("gltensor.bench.upload",
               "tensor -> OpenGL: Upload.write and map_buffer against the numpy -> glTexSubImage2D / "
               "glBufferSubData round trip (also `--upload`)"),
    "procs": ("gltensor.bench.procs",
              "many engine processes, one GPU batch: host readback per worker, gltensor per worker, shared slots, "
              "the floor (render + fence) and one-process Atlas, N workers x sizes, device memory per worker"),
    "panda3d": ("gltensor.bench.panda3d",
                "Panda3D cameras under Panda's default PRC and configure(): getRamImage, MetaDrive's recipe, "
                "RGBCamera, CameraBatch, CameraAtlas"),
    "mujoco": ("gltensor.bench.mujoco",
               "pixel RL on MuJoCo, env-steps/s end to end (physics + N images on the device + a small CNN): "
               "Gymnasium's AsyncVectorEnv/SyncVectorEnv, shared slots, one-process MujocoVectorEnv, dm_control "
               "stock vs DmControlBatch, the batch's render floor"),
    "dmc": ("gltensor.bench.dmc",
            "dm_control suite steps, env-steps/s: each env's own step() against DmControlBatch's threaded physics "
            "(C threads, each task per env), the physics floor, and DmControlBatch with pixels on both paths"),
    "torchrl": ("gltensor.bench.torchrl",
                "TorchRL pixel envs, env-steps/s: TorchRL's ParallelEnv and SerialEnv of GymEnv(from_pixels=True) "
                "against gltensor.torchrl.GymBatchEnv and MujocoVectorEnv alone (the TorchRL layer's cost)"),
}
