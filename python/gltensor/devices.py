"""Which GPU a process renders and captures on, and how to tell an engine to use it.

On a node with several GPUs each process (one rank per GPU under torchrun) must render on its own GPU
and hand its frames to CUDA on that same GPU. `Context.headless()` with no `cuda_device` picks the
device the process works on; engines that open their own EGL display need an *EGL device index*,
which is not the CUDA ordinal (EGL lists every GPU, CUDA only the visible ones, in its own order):

    import gltensor
    dev = gltensor.default_cuda_device()          # 1 for the rank with LOCAL_RANK=1, say
    idx = gltensor.egl_device_index(dev)          # the EGL device that is CUDA device `dev`

    # Panda3D (before ShowBase()):   loadPrcFileData("", f"egl-device-index {idx}")
    # MuJoCo (before `import mujoco`): os.environ["MUJOCO_EGL_DEVICE_ID"] = str(idx)
    # moderngl:                      moderngl.create_context(standalone=True, backend="egl", device_index=idx)
"""

from __future__ import annotations

import sys

from . import _gltensor

__all__ = ["default_cuda_device", "egl_device_index"]


def default_cuda_device() -> int | None:
    """The CUDA device this process works on, or None when CUDA is unusable here.

    torch's current device once torch has initialised CUDA (so a script that called
    `torch.cuda.set_device(k)` renders on k); else `LOCAL_RANK` (set by torchrun and most launchers)
    when it names a visible device; else 0. With `CUDA_VISIBLE_DEVICES` set, ordinals count the
    visible devices in the order it lists them, as torch's do. A launcher that gives each rank a
    single visible GPU gets 0 whatever its `LOCAL_RANK`.

        >>> gltensor.default_cuda_device()     # LOCAL_RANK=1 on a 2-GPU node
        1
    """
    torch = sys.modules.get("torch")  # only a torch the program imported itself: never imported here
    if torch is not None:
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():
            return int(cuda.current_device())
    return _gltensor._core_default_cuda_device()


def egl_device_index(cuda_device: int | None = None) -> int:
    """The index, in EGL's device list (eglQueryDevicesEXT), of the GPU that CUDA calls `cuda_device`.

    That is the number engines that open their own EGL display take: Panda3D's `egl-device-index`,
    MuJoCo's `MUJOCO_EGL_DEVICE_ID`, moderngl/glcontext's `device_index`. None: the process's device
    (`default_cuda_device()`). Each NVIDIA EGL device is confirmed through CUDA with a short-lived
    context (the result is cached); the calling thread's current EGL context is restored. Call it
    before creating the engine's context.

        >>> gltensor.egl_device_index(1)
        1

    Raises CudaUnavailableError without CUDA, WrongDeviceError when no EGL device runs on that GPU.
    """
    if cuda_device is None:
        cuda_device = default_cuda_device()
        if cuda_device is None:
            raise _gltensor.CudaUnavailableError(
                "egl_device_index: CUDA is unavailable here (" + str(_gltensor.cuda_unavailable_reason())
                + "), so no EGL device can be matched to a CUDA device; engines then render on their default device")
    if isinstance(cuda_device, bool) or not isinstance(cuda_device, int):
        raise TypeError(f"cuda_device must be an int CUDA ordinal or None, got {cuda_device!r}")
    return _gltensor._egl_device_index(cuda_device)
