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

import contextlib

from ._gltensor import Buffer, Upload

__all__ = ["upload", "map_buffer", "read_buffer"]


def upload(texture, x, *, target=None, backend="auto", flip=True, stream=None, channels=None, layout="hwc",
           region=None):
    """Write tensor `x` into `texture` (a gltensor.Upload, or a GL texture name registered for this call).

    See Upload.write for the arguments. A 2-D `x` is taken as one channel (H, W) -> (H, W, 1)."""
    if getattr(x, "ndim", 3) == 2:
        x = x[..., None]  # torch, NumPy, CuPy and JAX arrays all index this way
    kwargs = dict(flip=flip, stream=stream, channels=channels, layout=layout, region=region)
    if isinstance(texture, Upload):
        return texture.write(x, **kwargs)
    args = (texture,) if target is None else (texture, target)
    with Upload(*args, backend=backend) as up:
        up.write(x, **kwargs)


@contextlib.contextmanager
def map_buffer(buffer, dtype="uint8", shape=None, *, mode="readwrite", stream=None, offset=0, backend="auto"):
    """`with map_buffer(buf, dtype=..., shape=..., mode=..., stream=...) as view:` a zero-copy tensor view.

    buffer: a gltensor.Buffer (registered once: use this per step) or a GL buffer name (registered for the
    block). Leaving the block unmaps: GL work issued afterwards sees what was written, and `view` refuses
    any further export. Tensors already made from `view` inside the block still point at the mapping and
    must not be used after it (gltensor cannot revoke them)."""
    owned = not isinstance(buffer, Buffer)
    buf = Buffer(buffer, backend=backend) if owned else buffer
    try:
        view = buf.map(dtype, shape, mode=mode, stream=stream, offset=offset)
        try:
            yield view
        finally:
            buf.unmap()
    finally:
        if owned:
            buf.close()


def read_buffer(buffer, dtype="uint8", shape=None, *, offset=0, stream=None, backend="auto"):
    """A copy of a GL buffer's contents as a BufferView that stays valid (CUDA memory on the CUDA backend)."""
    if isinstance(buffer, Buffer):
        return buffer.read(dtype, shape, offset=offset, stream=stream)
    with Buffer(buffer, backend=backend) as buf:
        return buf.read(dtype, shape, offset=offset, stream=stream)
