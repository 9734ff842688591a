"""OpenGL helpers for the tests: make images with known contents and read them back independently.

Everything here goes through PyOpenGL on the context that is current in the calling thread (the
session's gltensor context). The read-back (`reference`) uses glGetTexImage for textures and
glReadPixels from a framebuffer for renderbuffers: it never goes through gltensor, so it can serve
as the ground truth. Arrays are (H, W, C) with row 0 = GL's bottom row, as GL stores them.
"""

import ctypes
import os

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np  # noqa: E402
from OpenGL import GL  # noqa: E402
from OpenGL.raw.GL.VERSION.GL_1_0 import glGetTexImage as _raw_get_tex_image  # noqa: E402
from OpenGL.raw.GL.VERSION.GL_1_0 import glReadPixels as _raw_read_pixels  # noqa: E402
from OpenGL.raw.GL.VERSION.GL_1_0 import glTexImage2D as _raw_tex_image_2d  # noqa: E402
from OpenGL.raw.GL.VERSION.GL_1_1 import glTexSubImage2D as _raw_tex_sub_image_2d  # noqa: E402

from formats import BY_KEY, FORMATS, Fmt, random_data  # noqa: E402

TARGET_NAMES = {
    GL.GL_TEXTURE_2D: "GL_TEXTURE_2D",
    GL.GL_TEXTURE_RECTANGLE: "GL_TEXTURE_RECTANGLE",
    GL.GL_RENDERBUFFER: "GL_RENDERBUFFER",
}


def as_fmt(fmt):
    """Accept a Fmt, a key of the format table ("RGBA8") or a sized internal format number."""
    if isinstance(fmt, Fmt):
        return fmt
    if isinstance(fmt, str):
        return BY_KEY[fmt[3:] if fmt.startswith("GL_") else fmt]
    for f in FORMATS:
        if f.internal == int(fmt):
            return f
    raise KeyError(f"format {fmt:#x} is not in tests/formats.py")


def drain_gl_errors():
    """Every pending glGetError code (empty list when none), leaving none pending."""
    errors = []
    for _ in range(32):
        err = GL.glGetError()
        if err == GL.GL_NO_ERROR:
            break
        errors.append(hex(int(err)))
    return errors


def check_gl(where=""):
    errors = drain_gl_errors()
    assert not errors, f"GL error(s) pending {where}: {errors}"


def _ptr(arr):
    return None if arr is None else arr.ctypes.data_as(ctypes.c_void_p)


def tex_image_2d(target, level, internal, width, height, gl_format, gl_type, data=None):
    """glTexImage2D without PyOpenGL's conversions: `data` is a C-contiguous numpy array or None."""
    if data is not None:
        assert data.flags.c_contiguous
    _raw_tex_image_2d(target, level, internal, width, height, 0, gl_format, gl_type, _ptr(data))


def _set_unpack_defaults():
    GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    GL.glPixelStorei(GL.GL_UNPACK_ROW_LENGTH, 0)
    GL.glPixelStorei(GL.GL_UNPACK_SKIP_ROWS, 0)
    GL.glPixelStorei(GL.GL_UNPACK_SKIP_PIXELS, 0)


def _set_pack_defaults():
    GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
    GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
    GL.glPixelStorei(GL.GL_PACK_ROW_LENGTH, 0)
    GL.glPixelStorei(GL.GL_PACK_SKIP_ROWS, 0)
    GL.glPixelStorei(GL.GL_PACK_SKIP_PIXELS, 0)


def _checked_data(fmt, width, height, data):
    if data is None:
        return None
    data = np.ascontiguousarray(data, dtype=fmt.np_dtype)
    assert data.shape == (height, width, fmt.channels), (data.shape, (height, width, fmt.channels))
    return data


# ---------------------------------------------------------------- textures


def gen_texture():
    return int(GL.glGenTextures(1))


def tex_image(name, target, fmt, width, height, data):
    """(Re)allocate level 0 of texture `name` with glTexImage2D and upload `data` (may be None)."""
    fmt = as_fmt(fmt)
    data = _checked_data(fmt, width, height, data)
    _set_unpack_defaults()
    GL.glBindTexture(target, name)
    tex_image_2d(target, 0, fmt.internal, width, height, fmt.gl_format, fmt.gl_type, data)
    GL.glTexParameteri(target, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
    GL.glTexParameteri(target, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
    GL.glBindTexture(target, 0)


def tex_sub_image(name, target, fmt, data):
    """Overwrite the whole level 0 of a texture with `data` (H, W, C)."""
    fmt = as_fmt(fmt)
    data = np.ascontiguousarray(data, dtype=fmt.np_dtype)
    height, width = data.shape[:2]
    _set_unpack_defaults()
    GL.glBindTexture(target, name)
    _raw_tex_sub_image_2d(target, 0, 0, 0, width, height, fmt.gl_format, fmt.gl_type, _ptr(data))
    GL.glBindTexture(target, 0)


def read_texture(name, target, fmt, width, height, level=0):
    fmt = as_fmt(fmt)
    out = np.empty((height, width, fmt.channels), dtype=fmt.np_dtype)
    _set_pack_defaults()
    GL.glBindTexture(target, name)
    _raw_get_tex_image(target, level, fmt.gl_format, fmt.gl_type, _ptr(out))
    GL.glBindTexture(target, 0)
    return out


# ---------------------------------------------------------------- framebuffers and renderbuffers


def gen_renderbuffer():
    return int(GL.glGenRenderbuffers(1))


def renderbuffer_storage(name, internal, width, height, samples=0):
    GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, name)
    if samples:
        GL.glRenderbufferStorageMultisample(GL.GL_RENDERBUFFER, samples, internal, width, height)
    else:
        GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, internal, width, height)
    GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)


class Framebuffer:
    """A framebuffer with one colour attachment; unbinds and deletes itself on exit."""

    def __init__(self, name, target, binding=GL.GL_FRAMEBUFFER):
        self.binding = binding
        self.fbo = int(GL.glGenFramebuffers(1))
        GL.glBindFramebuffer(binding, self.fbo)
        if target == GL.GL_RENDERBUFFER:
            GL.glFramebufferRenderbuffer(binding, GL.GL_COLOR_ATTACHMENT0, GL.GL_RENDERBUFFER, name)
        else:
            GL.glFramebufferTexture2D(binding, GL.GL_COLOR_ATTACHMENT0, target, name, 0)
        status = GL.glCheckFramebufferStatus(binding)
        if status != GL.GL_FRAMEBUFFER_COMPLETE:
            self.close()
            raise AssertionError(f"test framebuffer incomplete: {int(status):#x}")

    def close(self):
        GL.glBindFramebuffer(self.binding, 0)
        GL.glDeleteFramebuffers(1, [self.fbo])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def blit(src_name, src_target, dst_name, dst_target, width, height):
    """Exact copy of a whole colour image into another of the same size and format."""
    with Framebuffer(src_name, src_target, GL.GL_READ_FRAMEBUFFER), Framebuffer(
        dst_name, dst_target, GL.GL_DRAW_FRAMEBUFFER
    ):
        GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT0)
        GL.glDrawBuffers(1, [GL.GL_COLOR_ATTACHMENT0])
        GL.glBlitFramebuffer(0, 0, width, height, 0, 0, width, height, GL.GL_COLOR_BUFFER_BIT, GL.GL_NEAREST)


def fill_renderbuffer(name, fmt, width, height, data):
    """Put `data` into a renderbuffer: upload it to a scratch texture, blit that across."""
    fmt = as_fmt(fmt)
    tmp = gen_texture()
    try:
        tex_image(tmp, GL.GL_TEXTURE_2D, fmt, width, height, data)
        blit(tmp, GL.GL_TEXTURE_2D, name, GL.GL_RENDERBUFFER, width, height)
    finally:
        GL.glDeleteTextures(1, [tmp])


def read_framebuffer(name, target, fmt, width, height):
    fmt = as_fmt(fmt)
    out = np.empty((height, width, fmt.channels), dtype=fmt.np_dtype)
    _set_pack_defaults()
    with Framebuffer(name, target, GL.GL_READ_FRAMEBUFFER):
        GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT0)
        _raw_read_pixels(0, 0, width, height, fmt.gl_format, fmt.gl_type, _ptr(out))
    return out


def reference(name, target, fmt, width, height):
    """Bottom-up (H, W, C) contents of a texture (glGetTexImage) or renderbuffer (glReadPixels)."""
    if target == GL.GL_RENDERBUFFER:
        return read_framebuffer(name, target, fmt, width, height)
    return read_texture(name, target, fmt, width, height)


def clear_image(name, target, fmt, value):
    """Fill a colour image with one value per channel through glClearBuffer (no upload)."""
    fmt = as_fmt(fmt)
    with Framebuffer(name, target, GL.GL_DRAW_FRAMEBUFFER):
        GL.glDrawBuffers(1, [GL.GL_COLOR_ATTACHMENT0])
        vals = list(value) + [0] * (4 - len(value))
        if fmt.is_integer:
            GL.glClearBufferuiv(GL.GL_COLOR, 0, (GL.GLuint * 4)(*[int(v) for v in vals]))
        else:
            GL.glClearBufferfv(GL.GL_COLOR, 0, (GL.GLfloat * 4)(*[float(v) for v in vals]))


# ---------------------------------------------------------------- drawing with a shader

_VERTEX_SHADER = """
#version 330 core
void main() {
    // one triangle that covers the viewport, no vertex buffer needed
    vec2 p = vec2((gl_VertexID << 1) & 2, gl_VertexID & 2);
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
"""

_FRAGMENT_SHADER = """
#version 330 core
uniform float seed;
out vec4 color;
void main() {
    vec2 p = floor(gl_FragCoord.xy);
    color = vec4(fract(p.x * 0.1234 + seed), fract(p.y * 0.0771 + seed * 0.5),
                 fract((p.x + p.y) * 0.0333 + seed * 0.25), 1.0 - fract(seed * 0.7));
}
"""

_programs = {}  # EGL context address -> (program, vao)


def _compile(kind, source):
    shader = GL.glCreateShader(kind)
    GL.glShaderSource(shader, source)
    GL.glCompileShader(shader)
    if not GL.glGetShaderiv(shader, GL.GL_COMPILE_STATUS):
        raise AssertionError(GL.glGetShaderInfoLog(shader))
    return shader


def _pattern_program():
    from OpenGL import EGL

    key = ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value
    if key not in _programs:
        vs = _compile(GL.GL_VERTEX_SHADER, _VERTEX_SHADER)
        fs = _compile(GL.GL_FRAGMENT_SHADER, _FRAGMENT_SHADER)
        prog = GL.glCreateProgram()
        GL.glAttachShader(prog, vs)
        GL.glAttachShader(prog, fs)
        GL.glLinkProgram(prog)
        if not GL.glGetProgramiv(prog, GL.GL_LINK_STATUS):
            raise AssertionError(GL.glGetProgramInfoLog(prog))
        GL.glDeleteShader(vs)
        GL.glDeleteShader(fs)
        _programs[key] = (prog, int(GL.glGenVertexArrays(1)))
    return _programs[key]


def draw_pattern(name, target, width, height, seed):
    """Render a position- and seed-dependent pattern into a float/normalised colour image."""
    prog, vao = _pattern_program()
    with Framebuffer(name, target, GL.GL_DRAW_FRAMEBUFFER):
        GL.glDrawBuffers(1, [GL.GL_COLOR_ATTACHMENT0])
        GL.glViewport(0, 0, width, height)
        GL.glUseProgram(prog)
        GL.glUniform1f(GL.glGetUniformLocation(prog, "seed"), float(seed))
        GL.glBindVertexArray(vao)
        GL.glDrawArrays(GL.GL_TRIANGLES, 0, 3)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)


# ---------------------------------------------------------------- one image with known contents


class Image:
    """A GL texture or renderbuffer made by the tests, with the data last put into it."""

    def __init__(self, fmt, width, height, target=GL.GL_TEXTURE_2D, data=None, seed=0, samples=0):
        self.fmt = as_fmt(fmt)
        self.target = target
        self.width, self.height = width, height
        self.samples = samples
        if target == GL.GL_RENDERBUFFER:
            self.name = gen_renderbuffer()
        else:
            self.name = gen_texture()
        self.deleted = False
        self.reallocate(self.fmt, width, height, data=data, seed=seed)

    @property
    def target_name(self):
        return TARGET_NAMES[self.target]

    @property
    def shape(self):
        return (self.height, self.width, self.fmt.channels)

    def reallocate(self, fmt, width, height, data=None, seed=0):
        """New storage (size and/or format) under the same name, filled with `data`."""
        fmt = as_fmt(fmt)
        if data is None and not self.samples:
            data = random_data(fmt, width, height, seed=seed)
        self.fmt, self.width, self.height = fmt, width, height
        if self.target == GL.GL_RENDERBUFFER:
            renderbuffer_storage(self.name, fmt.internal, width, height, samples=self.samples)
            if data is not None:
                fill_renderbuffer(self.name, fmt, width, height, data)
        else:
            tex_image(self.name, self.target, fmt, width, height, data)
        self.data = data
        return self

    def upload(self, data):
        """New contents, same storage."""
        data = np.ascontiguousarray(data, dtype=self.fmt.np_dtype)
        assert data.shape == self.shape
        if self.target == GL.GL_RENDERBUFFER:
            fill_renderbuffer(self.name, self.fmt, self.width, self.height, data)
        else:
            tex_sub_image(self.name, self.target, self.fmt, data)
        self.data = data
        return self

    def fill(self, value):
        """Clear to one value per channel (GL-side, no upload)."""
        clear_image(self.name, self.target, self.fmt, value)
        self.data = None
        return self

    def draw(self, seed):
        """Render a pattern into the image (float/normalised formats); no CPU-side data."""
        draw_pattern(self.name, self.target, self.width, self.height, seed)
        self.data = None
        return self

    def reference(self):
        return reference(self.name, self.target, self.fmt, self.width, self.height)

    def delete(self):
        if not self.deleted:
            if self.target == GL.GL_RENDERBUFFER:
                GL.glDeleteRenderbuffers(1, [self.name])
            else:
                GL.glDeleteTextures(1, [self.name])
            self.deleted = True

    def __repr__(self):
        return f"Image({self.fmt.key}, {self.width}x{self.height}, {self.target_name}, name={self.name})"


# ---------------------------------------------------------------- consuming frames


def torch_to_numpy(t):
    """A CPU numpy copy of any torch tensor, also for the unsigned types torch converts poorly."""
    import torch

    t = t.detach()
    if t.dtype in (getattr(torch, "uint16", None), getattr(torch, "uint32", None)):
        signed = torch.int16 if t.dtype == torch.uint16 else torch.int32
        unsigned = np.uint16 if t.dtype == torch.uint16 else np.uint32
        return t.view(signed).cpu().numpy().view(unsigned)
    return t.cpu().numpy()


def to_numpy(frame):
    """A frame's pixels as a numpy array (H, W, C): zero-copy on CPU, via torch from CUDA."""
    dev_type, _ = frame.__dlpack_device__()
    if dev_type == 1:
        return np.from_dlpack(frame)
    import torch

    return torch_to_numpy(torch.from_dlpack(frame))


def to_numpy_torch(frame):
    """Same as to_numpy, through torch.from_dlpack on every device."""
    import torch

    return torch_to_numpy(torch.from_dlpack(frame))


def rss_bytes():
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------- cameras with distinct contents (batches, atlases)


def camera_colour(fmt, index):
    """The colour of camera `index`'s band (left half of its on-screen top row): R encodes the index."""
    fmt = as_fmt(fmt)
    if fmt.is_integer:
        return (index, 200, 100, 250)
    return (index / 255.0, 0.25, 0.75, 1.0)


def marker_colour(fmt, index):
    fmt = as_fmt(fmt)
    if fmt.is_integer:
        return (255, index, 7, 1)
    return (1.0, index / 255.0, 0.0, 0.5)


def marker_rect(viewport, index):
    """A 2x2 square (x, y, w, h) at a per-index place inside `viewport`, below its top row."""
    x, y, w, h = viewport
    mx = x + (3 * index) % max(1, w - 1)
    my = y + (5 * index) % max(1, h - 2)
    return (mx, my, min(2, x + w - mx), min(2, max(1, y + h - 1 - my)))


def _scissor_clear(fmt, rect, value):
    GL.glEnable(GL.GL_SCISSOR_TEST)
    GL.glScissor(*[int(v) for v in rect])
    vals = list(value) + [0] * (4 - len(value))
    if fmt.is_integer:
        GL.glClearBufferuiv(GL.GL_COLOR, 0, (GL.GLuint * 4)(*[int(v) for v in vals]))
    else:
        GL.glClearBufferfv(GL.GL_COLOR, 0, (GL.GLfloat * 4)(*[float(v) for v in vals]))
    GL.glDisable(GL.GL_SCISSOR_TEST)


def render_camera(name, target, fmt, viewport, index):
    """Render camera `index` into `viewport` (x, y, w, h, GL coordinates) of a colour image.

    Float/normalised formats get the seeded shader pattern (depends on position and index), integer
    formats a per-index clear; then the left half of the viewport's top row (top as seen on screen)
    is cleared to camera_colour(index) and a 2x2 marker_colour square is put at marker_rect(index).
    Content differs between cameras and is not symmetric under a vertical flip.
    """
    fmt = as_fmt(fmt)
    x, y, w, h = (int(v) for v in viewport)
    saved = [int(v) for v in GL.glGetIntegerv(GL.GL_VIEWPORT)]
    with Framebuffer(name, target, GL.GL_DRAW_FRAMEBUFFER):
        GL.glDrawBuffers(1, [GL.GL_COLOR_ATTACHMENT0])
        if fmt.is_integer:
            _scissor_clear(fmt, (x, y, w, h), (index + 1, 2 * index + 7, 3, 9))
            if h > 1:  # a bottom row unlike the rest, so that flips show
                _scissor_clear(fmt, (x, y, w, 1), (5, 6, 7, 8))
        else:
            prog, vao = _pattern_program()
            GL.glViewport(x, y, w, h)
            GL.glUseProgram(prog)
            GL.glUniform1f(GL.glGetUniformLocation(prog, "seed"), 0.0173 * index + 0.005)
            GL.glBindVertexArray(vao)
            GL.glDrawArrays(GL.GL_TRIANGLES, 0, 3)
            GL.glBindVertexArray(0)
            GL.glUseProgram(0)
        _scissor_clear(fmt, (x, y + h - 1, max(1, w // 2), 1), camera_colour(fmt, index))
        _scissor_clear(fmt, marker_rect((x, y, w, h), index), marker_colour(fmt, index))
    GL.glViewport(*saved)
