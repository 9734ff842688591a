"""Tensor -> OpenGL: write tensors into textures and use GL buffer objects as tensors.

    up = gltensor.Upload(texture)                  # register once
    up.write(x)                                    # x: (H, W, C) CUDA tensor; row 0 = top of the image

    vbo = gltensor.Buffer(vbo_name)                # register once
    with gltensor.map_buffer(vbo, dtype="float32", shape=(n, 4), mode="write") as v:
        torch.from_dlpack(v).copy_(positions)      # zero copy: writes land in the GL buffer
    # here GL draws see the new vertices; `v` refuses further use

The one-off forms (`gltensor.upload(texture_name, x)`, `map_buffer(buffer_name, ...)`,
`read_buffer(buffer_name)`) register for the call only: fine for tests and tools, slower per step.
"""

from __future__ import annotations  # the option types below exist only in the stub (_gltensor.pyi)

import contextlib
from typing import TYPE_CHECKING, Iterator

from ._gltensor import Buffer, BufferView, Upload

if TYPE_CHECKING:
    from ._gltensor import (_Backend, _Channels, _FrameworkDType, _GLName, _MapMode, _Region, _Stream, _Tensor,
                            _ViewDType, _ViewShape, _WriteLayout)

__all__ = ["upload", "map_buffer", "read_buffer"]


def upload(texture: Upload | _GLName, x: _Tensor, *, target: int | None = None, backend: _Backend = "auto",
           flip: bool = True, stream: _Stream = None, channels: _Channels | None = None,
           layout: _WriteLayout = "hwc", region: _Region | None = None) -> None:
    """Write tensor `x` into `texture` (a gltensor.Upload, or a GL texture name registered for this call).

    See Upload.write for the arguments. A 2-D `x` is taken as one channel (H, W) -> (H, W, 1)."""
    if getattr(x, "ndim", 3) == 2:
        x = x[..., None]  # torch, NumPy, CuPy and JAX arrays all index this way
    if isinstance(texture, Upload):
        texture.write(x, flip, stream=stream, channels=channels, layout=layout, region=region)
        return
    with Upload(texture, backend=backend) if target is None else Upload(texture, target, backend=backend) as up:
        up.write(x, flip, stream=stream, channels=channels, layout=layout, region=region)


@contextlib.contextmanager
def map_buffer(buffer: Buffer | _GLName, dtype: _ViewDType | _FrameworkDType = "uint8",
               shape: _ViewShape | None = None, *, mode: _MapMode = "readwrite", stream: _Stream = None,
               offset: int = 0, backend: _Backend = "auto") -> Iterator[BufferView]:
    """`with map_buffer(buf, dtype=..., shape=..., mode=..., stream=...) as view:` a zero-copy tensor view.

    buffer: a gltensor.Buffer (registered once: use this per step) or a GL buffer name (registered for the
    block). Leaving the block unmaps: GL work issued afterwards sees what was written, and `view` refuses
    any further export. Tensors already made from `view` inside the block still point at the mapping and
    must not be used after it (gltensor cannot revoke them)."""
    if isinstance(buffer, Buffer):
        buf, owned = buffer, False
    else:
        buf, owned = Buffer(buffer, backend=backend), True
    try:
        view = buf.map(dtype, shape, mode=mode, stream=stream, offset=offset)
        try:
            yield view
        finally:
            buf.unmap()
    finally:
        if owned:
            buf.close()


def read_buffer(buffer: Buffer | _GLName, dtype: _ViewDType | _FrameworkDType = "uint8",
                shape: _ViewShape | None = None, *, offset: int = 0, stream: _Stream = None,
                backend: _Backend = "auto") -> BufferView:
    """A copy of a GL buffer's contents as a BufferView that stays valid (CUDA memory on the CUDA backend)."""
    if isinstance(buffer, Buffer):
        return buffer.read(dtype, shape, offset=offset, stream=stream)
    with Buffer(buffer, backend=backend) as buf:
        return buf.read(dtype, shape, offset=offset, stream=stream)
