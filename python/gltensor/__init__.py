"""gltensor: what OpenGL rendered, as a GPU tensor, with no trip through host memory.

    import gltensor, torch
    cap = gltensor.Capture(texture_name)          # in the GL context current in this thread
    frame = cap.read()                            # top row first; CUDA when the context runs on the GPU
    x = torch.from_dlpack(frame)                  # (H, W, C), no copy

See docs/python-api.md for the whole API.
"""

# Before anything imports PyOpenGL: EGL where the user chose no platform and there is no display (as MuJoCo
# does for MUJOCO_GL); a warning naming the fix where PyOpenGL already runs on GLX without a display.
from . import _pyopengl

_pyopengl.choose_platform()
_pyopengl.check_platform(stacklevel=2)

from ._pyopengl import PyOpenGLPlatformWarning  # noqa: E402,F401
from ._gltensor import (  # noqa: E402,F401  (re-exported API)
    GL_RENDERBUFFER,
    GL_TEXTURE_2D,
    GL_TEXTURE_2D_MULTISAMPLE,
    GL_TEXTURE_RECTANGLE,
    Atlas,
    Batch,
    Capture,
    ClosedError,
    Context,
    CudaError,
    CudaUnavailableError,
    EGLError,
    Frame,
    GLError,
    GLTensorError,
    InvalidArgumentError,
    InvalidObjectError,
    NoContextError,
    OutOfMemoryError,
    UnsupportedFormatError,
    WrongContextError,
    WrongDeviceError,
    __version__,
    cuda_available,
    cuda_compiled,
    cuda_device_count,
    cuda_unavailable_reason,
    fork_is_safe,
)
from .devices import default_cuda_device, egl_device_index  # noqa: F401
from ._gltensor import Buffer, BufferView, Upload  # noqa: F401  (tensor -> GL)
from .to_gl import map_buffer, read_buffer, upload  # noqa: F401
from ._gltensor import SlotsBusyError, StaleSlotError, UnsupportedError  # noqa: F401
from .slots import GLImage, SharedSlots, SlotClient, SlotHandle  # noqa: F401  (many processes, one batch)

__all__ = [
    "Capture", "Batch", "Atlas", "Context", "Frame",
    "GL_TEXTURE_2D", "GL_TEXTURE_RECTANGLE", "GL_TEXTURE_2D_MULTISAMPLE", "GL_RENDERBUFFER",
    "cuda_available", "cuda_compiled", "cuda_device_count", "cuda_unavailable_reason", "default_cuda_device", "egl_device_index",
    "GLTensorError", "NoContextError", "WrongContextError", "InvalidObjectError", "UnsupportedFormatError",
    "WrongDeviceError", "CudaUnavailableError", "ClosedError", "InvalidArgumentError", "CudaError", "GLError",
    "EGLError", "OutOfMemoryError", "__version__",
    "Upload", "Buffer", "BufferView", "upload", "map_buffer", "read_buffer",
    "fork_is_safe", "PyOpenGLPlatformWarning", "SharedSlots", "SlotHandle", "SlotClient", "GLImage", "StaleSlotError", "SlotsBusyError", "UnsupportedError",
]
