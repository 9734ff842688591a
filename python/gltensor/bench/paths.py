"""The compared paths: every way of getting the N frames of a step into torch, defined once for every mode.

Every path is a `BenchPath`: `draw(i)` renders step i (N cameras), `transfer()` hands the N frames to torch
and returns the tensor a consumer op then runs on. What that tensor must equal comes from glReadPixels of the
cameras (scenes.Cameras.reference), so that every path is checked before it is timed (the method in
benchmarks/README.md). A path that cannot run here raises measure.Skip with the reason.
"""
import ctypes

import numpy as np

from .measure import Skip

GL_TEXTURE_2D = 0x0DE1


class BenchPath:
    """One way of getting the N frames of a step into torch.

    draw(i): render step i; transfer(): the tensor the consumer op runs on; flipped: top row first;
    atlas: the reference is the atlas's tiles; squeeze: transfer() gives one camera's frame without the leading
    camera axis; expect(ref_k): turns camera k's reference readback ((H, W, 4) uint8 torch tensor, on the
    output's device, rows as `flipped` says) into what transfer()[k] must equal (default: ref_k itself);
    skipped: the reason when the path cannot run; close(): releases what the path made."""

    def __init__(self, key, name, draw=None, transfer=None, flipped=True, atlas=False, note="", skipped=None,
                 close=None, expect=None, squeeze=False):
        self.key, self.name, self.draw, self.transfer, self.flipped = key, name, draw, transfer, flipped
        self.atlas, self.note, self.skipped, self.close = atlas, note, skipped, close
        self.expect, self.squeeze = expect, squeeze


def torch_stream_arg(torch):
    """stream= for gltensor that names torch's current stream (a side stream when the caller set one). Handle 0
    (torch's default stream) is passed as 1 (cudaStreamLegacy, the same stream, which gltensor also copies on
    without stream=; gltensor maps 0 to it too): the one value that means the same in every CUDA API."""
    handle = torch.cuda.current_stream().cuda_stream
    return handle if handle else 1


def cuda_python_recipe(textures, w, h, torch, cuda_in_use):
    """The per-frame recipe users write with cuda-python today (the Panda3D forum recipe): each texture
    registered once (cudaGraphicsGLRegisterImage); per camera per step cudaGraphicsMapResources,
    cudaGraphicsSubResourceGetMappedArray, cudaMemcpy2DFromArrayAsync into slice k of a torch batch,
    cudaGraphicsUnmapResources, all on torch's stream. GL's bottom-up rows.

    Returns (transfer, close); transfer() returns the (N, H, W, 4) CUDA batch. Raises Skip(reason)."""
    if not cuda_in_use:
        raise Skip("the GL context is not on a CUDA device (CUDA interop impossible)")
    try:
        from cuda.bindings import runtime as cudart
    except ImportError as e:
        raise Skip("cuda-python not installed: cuda.bindings not importable (%s)" % e)

    def check(result, call):
        err = result[0]
        if err != cudart.cudaError_t.cudaSuccess:
            raise RuntimeError("%s failed: %s" % (call, err))
        return result[1] if len(result) > 1 else None

    flags = cudart.cudaGraphicsRegisterFlags.cudaGraphicsRegisterFlagsReadOnly
    resources = []
    try:  # each texture registered once, up front
        for tex in textures:
            resources.append(check(cudart.cudaGraphicsGLRegisterImage(tex, GL_TEXTURE_2D, flags),
                                   "cudaGraphicsGLRegisterImage"))
    except RuntimeError as e:
        for r in resources:
            cudart.cudaGraphicsUnregisterResource(r)
        raise Skip(str(e))
    n = len(textures)
    out = torch.empty((n, h, w, 4), dtype=torch.uint8, device="cuda")
    image = w * h * 4
    ptrs = [out.data_ptr() + k * image for k in range(n)]
    d2d = cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice
    map_, get, copy, unmap = (cudart.cudaGraphicsMapResources, cudart.cudaGraphicsSubResourceGetMappedArray,
                              cudart.cudaMemcpy2DFromArrayAsync, cudart.cudaGraphicsUnmapResources)

    def transfer():
        # On torch's stream, so that the consumer op that follows is ordered after the copies.
        stream = torch.cuda.current_stream().cuda_stream
        for res, ptr in zip(resources, ptrs):
            check(map_(1, res, stream), "cudaGraphicsMapResources")
            array = check(get(res, 0, 0), "cudaGraphicsSubResourceGetMappedArray")
            check(copy(ptr, w * 4, array, 0, 0, w * 4, h, d2d, stream), "cudaMemcpy2DFromArrayAsync")
            check(unmap(1, res, stream), "cudaGraphicsUnmapResources")
        return out

    def close():
        torch.cuda.synchronize()
        for r in resources:
            cudart.cudaGraphicsUnregisterResource(r)

    return transfer, close


def cpu_round_trip(fbos, w, h, torch, to_cuda):
    """glReadPixels (PyOpenGL, into a new numpy array) per camera -> torch.from_numpy -> .cuda(): what most
    simulator code does today. Returns transfer() giving (N, H, W, 4), GL's bottom-up rows."""
    from OpenGL import GL
    n = len(fbos)

    def transfer():
        host = np.empty((n, h, w, 4), np.uint8)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        for k, fbo in enumerate(fbos):
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, fbo)
            GL.glReadPixels(0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, host[k])
        x = torch.from_numpy(host)
        return x.cuda() if to_cuda else x

    return transfer


def cpu_round_trip_as_usually_written(fbos, w, h, torch, to_cuda):
    """The trip as simulator code usually writes it: PyOpenGL's glReadPixels returning a new buffer per camera,
    rows flipped upright with NumPy (np.flipud + np.ascontiguousarray, since torch refuses negative strides),
    torch.from_numpy(...).cuda(), np.stack-ed into one batch for several cameras. Gives (N, H, W, 4) upright,
    the same image gltensor's paths give."""
    from OpenGL import GL

    def transfer():
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        imgs = []
        for fbo in fbos:
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, fbo)
            data = GL.glReadPixels(0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE)
            imgs.append(np.ascontiguousarray(np.flipud(np.frombuffer(data, np.uint8).reshape(h, w, 4))))
        # One camera: no np.stack (its copy is not what single-camera code pays); [None] is a view.
        x = torch.from_numpy(np.stack(imgs) if len(imgs) > 1 else imgs[0][None])
        return x.cuda() if to_cuda else x

    return transfer


def pinned_pbo_round_trip(fbos, w, h, torch, to_cuda):
    """glReadPixels per camera into one GL_PIXEL_PACK_BUFFER, glMapBufferRange, one memcpy into a pinned
    torch tensor (torch.empty(..., pin_memory=True)), then .cuda(non_blocking=True): the careful CPU round
    trip. Two pinned buffers alternate, each guarded by a CUDA event, so that a step never overwrites host
    memory an earlier upload still reads. Without CUDA: the same into plain host memory, no upload.
    Returns (transfer, close); transfer() gives (N, H, W, 4), GL's bottom-up rows."""
    from OpenGL import GL
    from OpenGL.raw.GL.VERSION import GL_1_0, GL_1_5, GL_3_0
    n = len(fbos)
    image = w * h * 4
    nbytes = n * image
    pbo = int(GL.glGenBuffers(1))
    GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, pbo)
    GL.glBufferData(GL.GL_PIXEL_PACK_BUFFER, nbytes, None, GL.GL_STREAM_READ)
    GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
    host = [torch.empty((n, h, w, 4), dtype=torch.uint8, pin_memory=to_cuda) for _ in range(2 if to_cuda else 1)]
    events = [None] * len(host)
    state = [0]
    read, bind_fb = GL_1_0.glReadPixels, GL_3_0.glBindFramebuffer
    bind_buf, map_range, unmap = GL_1_5.glBindBuffer, GL_3_0.glMapBufferRange, GL_1_5.glUnmapBuffer
    PACK, READ_FB, RGBA, UBYTE = GL.GL_PIXEL_PACK_BUFFER, GL.GL_READ_FRAMEBUFFER, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE
    offsets = [ctypes.c_void_p(k * image) for k in range(n)]

    def transfer():
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        bind_buf(PACK, pbo)
        for fbo, off in zip(fbos, offsets):
            bind_fb(READ_FB, fbo)
            read(0, 0, w, h, RGBA, UBYTE, off)
        ptr = map_range(PACK, 0, nbytes, GL.GL_MAP_READ_BIT)
        if not ptr:
            bind_buf(PACK, 0)
            raise RuntimeError("glMapBufferRange(GL_PIXEL_PACK_BUFFER) returned NULL (GL error 0x%x)"
                               % GL.glGetError())
        j = state[0]
        state[0] = (j + 1) % len(host)
        if events[j] is not None:
            events[j].synchronize()  # the upload that last read this pinned buffer is done
        ctypes.memmove(host[j].data_ptr(), ptr, nbytes)
        unmap(PACK)
        bind_buf(PACK, 0)
        if not to_cuda:
            return host[j]
        x = host[j].cuda(non_blocking=True)
        ev = torch.cuda.Event()
        ev.record()
        events[j] = ev
        return x

    def close():
        if to_cuda:
            torch.cuda.synchronize()
        GL.glDeleteBuffers(1, [pbo])

    return transfer, close
