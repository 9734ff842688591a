"""Can a worker render straight into the trainer's slot memory? (the lead after issue #21: no pass per write)

The trainer's CUDA slot memory (SharedSlots, CUDA backend: a VMM allocation exported as a POSIX fd) is imported
into GL as a *texture* (glTexStorageMem2DEXT, optimal tiling), rendered into through a framebuffer, and read by
CUDA as an array mapped from the same memory (cuImportExternalMemory + cuExternalMemoryGetMappedMipmappedArray).
Both sides run in this one process here; a worker would do the GL half. For each size and offset it prints
whether every byte CUDA reads equals GL's glReadPixels of the texture, and where they differ, how much.

    python3 tools/slots_texture_probe.py            # on the GPU machine; needs cuda-python (cuda.bindings)
"""
import os
import sys

import numpy as np

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import gltensor  # noqa: E402

# Every pixel of its own: a tiling mismatch moves bytes, and the comparison sees it.
_FS = """#version 430
out vec4 color;
uniform int seed;
void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    uint h = uint(p.x * 73856093 ^ p.y * 19349663 ^ seed * 83492791);
    color = vec4(float(p.x & 255), float(p.y & 255), float(h & 255u), float((h >> 8) & 255u)) / 255.0;
}
"""


def check(cu, err, what):
    code = err[0] if isinstance(err, tuple) else err
    if int(code) != 0:
        name = cu.cuGetErrorName(code)[1]
        raise RuntimeError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name}")
    return err[1] if isinstance(err, tuple) and len(err) == 2 else err


def main():
    from cuda.bindings import driver as cu
    from OpenGL import GL
    from OpenGL.GL.EXT import memory_object as mo
    from OpenGL.GL.EXT import memory_object_fd as mofd
    from gltensor.bench.passes import _VERTEX  # one triangle that covers the viewport
    from gltensor.scene import _link

    ctx = gltensor.Context.headless()
    ctx.make_current()
    side = 512
    slots = gltensor.SharedSlots(2, (side, side), backend="cuda", buffers=1)
    # Two 512x512 RGBA8 slots: at least 2 MiB; each texture below goes at 0 or at 1 MiB and takes at most 1 MiB.
    fd, size, slot_bytes = slots._client._fds.memory_fd, slots.memory_bytes, 1 << 20
    print(f"GL: {ctx.renderer} | slots memory {size} bytes; textures at offsets 0 and {slot_bytes}")

    check(cu, cu.cuInit(0), "cuInit")
    dev = check(cu, cu.cuDeviceGet(slots.cuda_device), "cuDeviceGet")
    pctx = check(cu, cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(cu, cu.cuCtxSetCurrent(pctx), "cuCtxSetCurrent")
    desc = cu.CUDA_EXTERNAL_MEMORY_HANDLE_DESC()
    desc.type = cu.CUexternalMemoryHandleType.CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD
    desc.handle.fd = os.dup(fd)
    desc.size = size
    ext = check(cu, cu.cuImportExternalMemory(desc), "cuImportExternalMemory of the slots' own fd")

    mem = np.zeros(1, np.uint32)
    mo.glCreateMemoryObjectsEXT(1, mem)
    mofd.glImportMemoryFdEXT(int(mem[0]), size, mofd.GL_HANDLE_TYPE_OPAQUE_FD_EXT, os.dup(fd))
    program = _link(_VERTEX, _FS)
    vao = GL.glGenVertexArrays(1)
    fbo = GL.glGenFramebuffers(1)
    seed_loc = GL.glGetUniformLocation(program, "seed")
    flags = getattr(cu, "CUDA_ARRAY3D_COLOR_ATTACHMENT", 0x20)
    results = []
    for (w, h) in [(256, 256), (84, 84), (97, 61), (512, 512), (640, 360)]:
        if w * h * 4 > slot_bytes:
            continue
        for offset in (0, slot_bytes):
            tex = int(GL.glGenTextures(1))
            GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
            GL.glTexParameteri(GL.GL_TEXTURE_2D, mo.GL_TEXTURE_TILING_EXT, mo.GL_OPTIMAL_TILING_EXT)
            mo.glTexStorageMem2DEXT(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, w, h, int(mem[0]), offset)
            gl_error = GL.glGetError()
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
            GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, tex, 0)
            complete = GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER) == GL.GL_FRAMEBUFFER_COMPLETE
            GL.glViewport(0, 0, w, h)
            GL.glUseProgram(program)
            GL.glUniform1i(seed_loc, w * 7 + offset)
            GL.glBindVertexArray(vao)
            GL.glDrawArrays(GL.GL_TRIANGLES, 0, 3)
            GL.glFinish()
            GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
            ref = np.frombuffer(GL.glReadPixels(0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE), np.uint8).reshape(h, w, 4)
            md = cu.CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC()
            md.offset = offset
            md.arrayDesc.Width, md.arrayDesc.Height, md.arrayDesc.Depth = w, h, 0
            md.arrayDesc.Format = cu.CUarray_format.CU_AD_FORMAT_UNSIGNED_INT8
            md.arrayDesc.NumChannels = 4
            md.arrayDesc.Flags = flags
            md.numLevels = 1
            got = np.zeros((h, w, 4), np.uint8)
            try:
                mip = check(cu, cu.cuExternalMemoryGetMappedMipmappedArray(ext, md), "cuExternalMemoryGetMappedMipmappedArray")
                arr = check(cu, cu.cuMipmappedArrayGetLevel(mip, 0), "cuMipmappedArrayGetLevel")
                cp = cu.CUDA_MEMCPY2D()
                cp.srcMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_ARRAY
                cp.srcArray = arr
                cp.dstMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_HOST
                cp.dstHost = got.ctypes.data
                cp.dstPitch = w * 4
                cp.WidthInBytes = w * 4
                cp.Height = h
                check(cu, cu.cuMemcpy2D(cp), "cuMemcpy2D from the array")
                differ = float(np.mean(got != ref))
                first_bad = np.argwhere((got != ref).any(axis=2))
                note = f"first differing pixel (x, y) = {tuple(first_bad[0][::-1])}" if len(first_bad) else ""
                check(cu, cu.cuMipmappedArrayDestroy(mip), "cuMipmappedArrayDestroy")
            except RuntimeError as e:
                differ, note = None, str(e)
            results.append((w, h, offset, gl_error, complete, differ, note))
            print(f"{w}x{h} at offset {offset}: GL error {gl_error:#x}, framebuffer complete {complete}, "
                  f"bytes differing {'-' if differ is None else f'{differ:.1%}'} {note}")
            GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, 0, 0)
            GL.glDeleteTextures(1, [tex])
    check(cu, cu.cuDestroyExternalMemory(ext), "cuDestroyExternalMemory")
    mo.glDeleteMemoryObjectsEXT(1, mem)
    slots.close()
    exact = [r for r in results if r[5] == 0.0]
    print(f"exact: {len(exact)} of {len(results)} cases")
    return 0 if results and len(exact) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
