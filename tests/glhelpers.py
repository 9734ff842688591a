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
import pytest  # noqa: E402
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
    return program("pattern", _VERTEX_SHADER, _FRAGMENT_SHADER)


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


def have(module):
    """True when an optional package (torch, an engine) can be imported here."""
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def need_torch(why="this test hands frames to torch"):
    """torch, or a skip saying why it is needed: the [test] extra does not install it."""
    return pytest.importorskip("torch", reason=f"{why}; torch is not installed (pip install torch)")


def torch_to_numpy(t):
    """A CPU numpy copy of any torch tensor, also for the unsigned types torch converts poorly."""
    torch = need_torch()

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
    torch = need_torch("a CUDA frame is brought to the host through torch")
    return torch_to_numpy(torch.from_dlpack(frame))


def to_numpy_torch(frame):
    """Same as to_numpy, through torch.from_dlpack on every device."""
    torch = need_torch()

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


# ---------------------------------------------------------------- depth, multisampled images, drawing with depth
#
# Used by test_depth.py and test_msaa.py. Everything below restores the GL state it touches (bindings,
# viewport, enables, masks, program) so that tests stay independent.

GL_TEXTURE_2D_MULTISAMPLE = 0x9100

# Depth formats: key -> (internal format, client format, client type, bits of depth or None for float)
DEPTH = {
    "DEPTH_COMPONENT16": (GL.GL_DEPTH_COMPONENT16, GL.GL_DEPTH_COMPONENT, GL.GL_UNSIGNED_SHORT, 16),
    "DEPTH_COMPONENT24": (GL.GL_DEPTH_COMPONENT24, GL.GL_DEPTH_COMPONENT, GL.GL_UNSIGNED_INT, 24),
    "DEPTH_COMPONENT32": (GL.GL_DEPTH_COMPONENT32, GL.GL_DEPTH_COMPONENT, GL.GL_UNSIGNED_INT, 32),
    "DEPTH_COMPONENT32F": (GL.GL_DEPTH_COMPONENT32F, GL.GL_DEPTH_COMPONENT, GL.GL_FLOAT, None),
    "DEPTH24_STENCIL8": (GL.GL_DEPTH24_STENCIL8, GL.GL_DEPTH_STENCIL, GL.GL_UNSIGNED_INT_24_8, 24),
    "DEPTH32F_STENCIL8": (GL.GL_DEPTH32F_STENCIL8, GL.GL_DEPTH_STENCIL, GL.GL_FLOAT_32_UNSIGNED_INT_24_8_REV, None),
}
DEPTH_STENCIL_KEYS = ("DEPTH24_STENCIL8", "DEPTH32F_STENCIL8")


def _client_of(internal):
    """(client format, client type) that glTexImage2D accepts for a colour or depth internal format."""
    for key, (i, f, t, _) in DEPTH.items():
        if i == internal:
            return f, t
    if internal == GL.GL_DEPTH_COMPONENT:
        return GL.GL_DEPTH_COMPONENT, GL.GL_FLOAT
    if internal == GL.GL_STENCIL_INDEX8:
        return GL.GL_STENCIL_INDEX, GL.GL_UNSIGNED_BYTE
    fmt = as_fmt(internal)
    return fmt.gl_format, fmt.gl_type


def is_depth_internal(internal):
    return internal == GL.GL_DEPTH_COMPONENT or any(internal == d[0] for d in DEPTH.values())


def attachment_point(internal):
    if internal in (GL.GL_DEPTH24_STENCIL8, GL.GL_DEPTH32F_STENCIL8):
        return GL.GL_DEPTH_STENCIL_ATTACHMENT
    if is_depth_internal(internal):
        return GL.GL_DEPTH_ATTACHMENT
    return GL.GL_COLOR_ATTACHMENT0


class Surface:
    """A texture (2D, rectangle, 2D multisample) or renderbuffer of any internal format, colour or depth,
    single- or multisampled, with no contents until something draws into it. `internal` is a GL enum
    or a key of DEPTH / the format table."""

    def __init__(self, internal, width, height, target=GL.GL_TEXTURE_2D, samples=0):
        self.target = target
        self.name = gen_renderbuffer() if target == GL.GL_RENDERBUFFER else gen_texture()
        self.deleted = False
        self.allocate(internal, width, height, samples)

    @staticmethod
    def _internal(internal):
        if isinstance(internal, str):
            key = internal[3:] if internal.startswith("GL_") else internal
            return DEPTH[key][0] if key in DEPTH else as_fmt(key).internal
        return int(internal)

    def allocate(self, internal, width, height, samples=None):
        """(Re)allocate storage under the same name (renderbuffers and mutable textures only)."""
        self.internal = self._internal(internal)
        self.width, self.height = width, height
        if samples is not None:
            self.samples = samples
        if self.target == GL.GL_RENDERBUFFER:
            renderbuffer_storage(self.name, self.internal, width, height, samples=self.samples)
        elif self.target == GL_TEXTURE_2D_MULTISAMPLE:
            assert self.samples, "a multisample texture needs samples"
            prev = int(GL.glGetIntegerv(GL.GL_TEXTURE_BINDING_2D_MULTISAMPLE))
            GL.glBindTexture(GL_TEXTURE_2D_MULTISAMPLE, self.name)
            GL.glTexImage2DMultisample(GL_TEXTURE_2D_MULTISAMPLE, self.samples, self.internal, width, height,
                                       GL.GL_TRUE)
            GL.glBindTexture(GL_TEXTURE_2D_MULTISAMPLE, prev)
        else:
            assert not self.samples
            fmt, typ = _client_of(self.internal)
            _set_unpack_defaults()
            GL.glBindTexture(self.target, self.name)
            tex_image_2d(self.target, 0, self.internal, width, height, fmt, typ)
            GL.glTexParameteri(self.target, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
            GL.glTexParameteri(self.target, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
            GL.glBindTexture(self.target, 0)
        return self

    @property
    def is_depth(self):
        return is_depth_internal(self.internal)

    def attach(self, binding, point=None):
        point = attachment_point(self.internal) if point is None else point
        if self.target == GL.GL_RENDERBUFFER:
            GL.glFramebufferRenderbuffer(binding, point, GL.GL_RENDERBUFFER, self.name)
        else:
            GL.glFramebufferTexture2D(binding, point, self.target, self.name, 0)

    def delete(self):
        if not self.deleted:
            if self.target == GL.GL_RENDERBUFFER:
                GL.glDeleteRenderbuffers(1, [self.name])
            else:
                GL.glDeleteTextures(1, [self.name])
            self.deleted = True

    def __repr__(self):
        return f"Surface({self.internal:#x}, {self.width}x{self.height}, {self.target:#x}, samples={self.samples})"


class Target:
    """A framebuffer made of Surfaces (at most one colour, at most one depth), bound to `binding` while
    inside `with`; the previous binding is restored on exit and the framebuffer deleted."""

    def __init__(self, *surfaces, binding=GL.GL_FRAMEBUFFER):
        self.surfaces = [s for s in surfaces if s is not None]
        self.binding = binding
        self.colour = next((s for s in self.surfaces if not s.is_depth), None)
        self.depth = next((s for s in self.surfaces if s.is_depth), None)

    def __enter__(self):
        self.prev_read = int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING))
        self.prev_draw = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        self.fbo = int(GL.glGenFramebuffers(1))
        GL.glBindFramebuffer(self.binding, self.fbo)
        for s in self.surfaces:
            s.attach(self.binding)
        buf = GL.GL_COLOR_ATTACHMENT0 if self.colour is not None else GL.GL_NONE
        if self.binding in (GL.GL_FRAMEBUFFER, GL.GL_DRAW_FRAMEBUFFER):
            GL.glDrawBuffers(1, [buf])
        if self.binding in (GL.GL_FRAMEBUFFER, GL.GL_READ_FRAMEBUFFER):
            GL.glReadBuffer(buf)
        status = GL.glCheckFramebufferStatus(self.binding)
        if status != GL.GL_FRAMEBUFFER_COMPLETE:
            self.__exit__()
            raise AssertionError(f"test framebuffer incomplete: {int(status):#x} for {self.surfaces}")
        return self

    def __exit__(self, *exc):
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self.prev_read)
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, self.prev_draw)
        GL.glDeleteFramebuffers(1, [self.fbo])


def read_depth(surface):
    """Bottom-up (H, W, 1) float32 window depth of a single-sample depth Surface, by
    glReadPixels(GL_DEPTH_COMPONENT, GL_FLOAT): the ground truth for depth captures."""
    out = np.empty((surface.height, surface.width, 1), np.float32)
    _set_pack_defaults()
    with Target(surface, binding=GL.GL_READ_FRAMEBUFFER):
        _raw_read_pixels(0, 0, surface.width, surface.height, GL.GL_DEPTH_COMPONENT, GL.GL_FLOAT, _ptr(out))
    return out


def read_colour(surface):
    """Bottom-up (H, W, C) of a single-sample colour Surface by glReadPixels."""
    fmt = as_fmt(surface.internal)
    out = np.empty((surface.height, surface.width, fmt.channels), fmt.np_dtype)
    _set_pack_defaults()
    with Target(surface, binding=GL.GL_READ_FRAMEBUFFER):
        _raw_read_pixels(0, 0, surface.width, surface.height, fmt.gl_format, fmt.gl_type, _ptr(out))
    return out


def resolve(surface):
    """The caller's own resolve of a multisampled Surface: glBlitFramebuffer (GL_NEAREST, scissor and
    sRGB off) into a new single-sample renderbuffer of the same format, read back by glReadPixels.
    Bottom-up (H, W, C); float32 (H, W, 1) for depth."""
    single = Surface(surface.internal, surface.width, surface.height, GL.GL_RENDERBUFFER)
    scissor, srgb = GL.glIsEnabled(GL.GL_SCISSOR_TEST), GL.glIsEnabled(GL.GL_FRAMEBUFFER_SRGB)
    try:
        GL.glDisable(GL.GL_SCISSOR_TEST)
        GL.glDisable(GL.GL_FRAMEBUFFER_SRGB)
        with Target(surface, binding=GL.GL_READ_FRAMEBUFFER), Target(single, binding=GL.GL_DRAW_FRAMEBUFFER):
            bit = GL.GL_DEPTH_BUFFER_BIT if surface.is_depth else GL.GL_COLOR_BUFFER_BIT
            w, h = surface.width, surface.height
            GL.glBlitFramebuffer(0, 0, w, h, 0, 0, w, h, bit, GL.GL_NEAREST)
        return read_depth(single) if surface.is_depth else read_colour(single)
    finally:
        if scissor:
            GL.glEnable(GL.GL_SCISSOR_TEST)
        if srgb:
            GL.glEnable(GL.GL_FRAMEBUFFER_SRGB)
        single.delete()


_PLANE_VS = """
#version 330 core
// A strip of a plane facing the camera at eye-space distance `dist` (z_eye = -dist), covering NDC
// x in [xrange.x, xrange.y] and all of y. With proj[0][0] = proj[1][1] = 1 (90 degree frustum, or an
// orthographic box of half-size 1) the strip projects exactly onto that NDC range.
uniform mat4 proj;
uniform float dist;
uniform vec2 xrange;
uniform float perspective;
void main() {
    vec2 c = vec2(gl_VertexID & 1, gl_VertexID >> 1);  // triangle strip: (0,0) (1,0) (0,1) (1,1)
    float s = perspective > 0.5 ? dist : 1.0;
    vec2 ndc = vec2(mix(xrange.x, xrange.y, c.x), c.y * 2.0 - 1.0);
    gl_Position = proj * vec4(ndc * s, -dist, 1.0);
}
"""

_FLAT_FS = """
#version 330 core
uniform vec4 colour;
out vec4 frag;
void main() { frag = colour; }
"""

_HASH_VS = """
#version 330 core
void main() {
    vec2 p = vec2((gl_VertexID << 1) & 2, gl_VertexID & 2);
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
"""

_HASH_FS = """
#version 330 core
// Per-pixel pseudo-random depth in [0, 1] with many mantissa bits, plus exact 0 and 1 in column 0 / 1.
uniform uint seed;
out vec4 frag;
uint mix32(uint h) {
    h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
    return h;
}
void main() {
    uvec2 p = uvec2(gl_FragCoord.xy);
    uint h = mix32(p.x * 73856093u ^ p.y * 19349663u ^ seed * 83492791u);
    float d = float(h >> 8) * (1.0 / 16777216.0) + float(h & 255u) * (1.0 / 4294967296.0);
    if (p.x == 0u) d = 0.0;
    if (p.x == 1u) d = 1.0;
    gl_FragDepth = d;
    frag = vec4(d, 1.0 - d, 0.5, 1.0);
}
"""

_TRI_VS = """
#version 330 core
// Triangles with per-vertex colour and depth: edges cut through pixels so that samples differ.
uniform vec3 pos[6];
uniform vec4 col[6];
out vec4 v_col;
void main() {
    gl_Position = vec4(pos[gl_VertexID], 1.0);
    v_col = col[gl_VertexID];
}
"""

_TRI_FS = """
#version 330 core
in vec4 v_col;
out vec4 frag;
void main() { frag = v_col; }
"""


def program(key, vs_source, fs_source):
    """A linked program (and an empty VAO) per EGL context, cached."""
    from OpenGL import EGL

    ctx_key = (ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value, key)
    if ctx_key not in _programs:
        vs = _compile(GL.GL_VERTEX_SHADER, vs_source)
        fs = _compile(GL.GL_FRAGMENT_SHADER, fs_source)
        prog = GL.glCreateProgram()
        GL.glAttachShader(prog, vs)
        GL.glAttachShader(prog, fs)
        GL.glLinkProgram(prog)
        if not GL.glGetProgramiv(prog, GL.GL_LINK_STATUS):
            raise AssertionError(GL.glGetProgramInfoLog(prog))
        GL.glDeleteShader(vs)
        GL.glDeleteShader(fs)
        _programs[ctx_key] = (prog, int(GL.glGenVertexArrays(1)))
    return _programs[ctx_key]


class _DrawState:
    """Saves and restores what the drawing helpers change."""

    def __enter__(self):
        self.viewport = [int(v) for v in GL.glGetIntegerv(GL.GL_VIEWPORT)]
        self.enables = {cap: bool(GL.glIsEnabled(cap)) for cap in (GL.GL_DEPTH_TEST, GL.GL_SCISSOR_TEST,
                                                                 GL.GL_MULTISAMPLE, GL.GL_BLEND, GL.GL_CULL_FACE)}
        self.depth_func = int(GL.glGetIntegerv(GL.GL_DEPTH_FUNC))
        self.depth_mask = bool(GL.glGetBooleanv(GL.GL_DEPTH_WRITEMASK))
        self.clear_depth = float(GL.glGetDoublev(GL.GL_DEPTH_CLEAR_VALUE))
        self.program = int(GL.glGetIntegerv(GL.GL_CURRENT_PROGRAM))
        self.vao = int(GL.glGetIntegerv(GL.GL_VERTEX_ARRAY_BINDING))
        for cap in (GL.GL_SCISSOR_TEST, GL.GL_BLEND, GL.GL_CULL_FACE):
            GL.glDisable(cap)
        GL.glEnable(GL.GL_MULTISAMPLE)
        GL.glDepthMask(GL.GL_TRUE)
        return self

    def __exit__(self, *exc):
        GL.glViewport(*self.viewport)
        for cap, on in self.enables.items():
            (GL.glEnable if on else GL.glDisable)(cap)
        GL.glDepthFunc(self.depth_func)
        GL.glDepthMask(GL.GL_TRUE if self.depth_mask else GL.GL_FALSE)
        GL.glClearDepth(self.clear_depth)
        GL.glUseProgram(self.program)
        GL.glBindVertexArray(self.vao)


def perspective_matrix(near, far):
    """glFrustum(-near, near, -near, near, near, far) (90 degree field of view, aspect 1), float64, row-major."""
    n, f = float(near), float(far)
    return np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, -(f + n) / (f - n), -2 * f * n / (f - n)], [0, 0, -1, 0]])


def orthographic_matrix(near, far):
    """glOrtho(-1, 1, -1, 1, near, far), float64, row-major."""
    n, f = float(near), float(far)
    return np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, -2 / (f - n), -(f + n) / (f - n)], [0, 0, 0, 1]])


def draw_planes(target, distances, near, far, projection="perspective", colour=(1.0, 0.5, 0.25, 1.0)):
    """Into the bound-by-`target` (a Target, entered) framebuffer: clear depth to 1, then one vertical strip
    per distance (equal widths, left to right) of a plane at that eye-space distance, seen through a
    perspective (or orthographic) projection with these near/far planes. glDepthRange stays (0, 1)."""
    w, h = (target.depth or target.colour).width, (target.depth or target.colour).height
    k = len(distances)
    assert w % k == 0, "strip edges must fall on pixel boundaries"
    proj = perspective_matrix(near, far) if projection == "perspective" else orthographic_matrix(near, far)
    prog, vao = program("plane", _PLANE_VS, _FLAT_FS)
    with _DrawState():
        GL.glViewport(0, 0, w, h)
        GL.glEnable(GL.GL_DEPTH_TEST)
        GL.glDepthFunc(GL.GL_ALWAYS)
        GL.glClearDepth(1.0)
        GL.glClear(GL.GL_DEPTH_BUFFER_BIT | (GL.GL_COLOR_BUFFER_BIT if target.colour is not None else 0))
        GL.glUseProgram(prog)
        GL.glBindVertexArray(vao)
        GL.glUniformMatrix4fv(GL.glGetUniformLocation(prog, "proj"), 1, GL.GL_TRUE, proj.astype(np.float32))
        GL.glUniform1f(GL.glGetUniformLocation(prog, "perspective"), 1.0 if projection == "perspective" else 0.0)
        GL.glUniform4f(GL.glGetUniformLocation(prog, "colour"), *colour)
        for i, dist in enumerate(distances):
            GL.glUniform1f(GL.glGetUniformLocation(prog, "dist"), float(dist))
            GL.glUniform2f(GL.glGetUniformLocation(prog, "xrange"), -1 + 2 * i / k, -1 + 2 * (i + 1) / k)
            GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)


def draw_depth_noise(target, seed=0):
    """Per-pixel pseudo-random depth (gl_FragDepth) over the whole bound framebuffer of `target`."""
    s = target.depth or target.colour
    prog, vao = program("depth_noise", _HASH_VS, _HASH_FS)
    with _DrawState():
        GL.glViewport(0, 0, s.width, s.height)
        GL.glEnable(GL.GL_DEPTH_TEST)
        GL.glDepthFunc(GL.GL_ALWAYS)
        GL.glUseProgram(prog)
        GL.glBindVertexArray(vao)
        GL.glUniform1ui(GL.glGetUniformLocation(prog, "seed"), int(seed))
        GL.glDrawArrays(GL.GL_TRIANGLES, 0, 3)


def draw_triangles(target, seed=0, clear=(0.1, 0.2, 0.3, 1.0)):
    """Clear, then two overlapping triangles with per-vertex colours (values beyond [0, 1] too, for float
    formats) and depths, depth-tested (LESS): edges at odd angles, so multisampled pixels along them have
    samples that differ in colour and depth."""
    s = target.colour or target.depth
    r = np.random.default_rng(seed)
    pos = np.array([[-0.93, -0.81, -0.6], [0.87, -0.37, 0.4], [-0.29, 0.91, 0.9],
                    [-0.77, 0.33, 0.7], [0.95, 0.71, -0.3], [0.13, -0.97, 0.2]], np.float32)
    pos[:, :2] += r.uniform(-0.05, 0.05, size=(6, 2)).astype(np.float32)
    col = np.array([[1.0, 0.0, 0.2, 1.0], [0.0, 1.0, 0.4, 0.5], [0.3, 0.2, 1.0, 0.8],
                    [1.7, -0.5, 0.5, 1.0], [0.2, 0.9, 2.5, 0.0], [0.6, 0.6, 0.0, 0.3]], np.float32)
    prog, vao = program("triangles", _TRI_VS, _TRI_FS)
    with _DrawState():
        GL.glViewport(0, 0, s.width, s.height)
        GL.glEnable(GL.GL_DEPTH_TEST)
        GL.glDepthFunc(GL.GL_LESS)
        GL.glClearDepth(1.0)
        if target.colour is not None:
            GL.glClearBufferfv(GL.GL_COLOR, 0, (GL.GLfloat * 4)(*clear))
        if target.depth is not None:
            GL.glClear(GL.GL_DEPTH_BUFFER_BIT)
        GL.glUseProgram(prog)
        GL.glBindVertexArray(vao)
        GL.glUniform3fv(GL.glGetUniformLocation(prog, "pos"), 6, pos)
        GL.glUniform4fv(GL.glGetUniformLocation(prog, "col"), 6, col)
        GL.glDrawArrays(GL.GL_TRIANGLES, 0, 6)


def out_tensor(backend, kind, shape, dtype, fill=0):
    """A `fill`-valued destination for out=: numpy or torch, on the backend's device (skips where there is none)."""
    if kind == "numpy":
        if backend != "cpu":
            pytest.skip("numpy arrays live on the host; a CUDA read needs a CUDA tensor")
        return np.full(shape, fill, dtype)
    torch = pytest.importorskip("torch")
    device = "cpu"
    if backend == "cuda":
        if not torch.cuda.is_available():
            pytest.skip("torch has no CUDA here")
        device = "cuda"
    tdt = {"uint8": torch.uint8, "float16": torch.float16, "float32": torch.float32}[np.dtype(dtype).name]
    return torch.full(shape, fill, dtype=tdt, device=device)


def as_numpy(t):
    """A numpy array as is; a torch tensor copied to the host."""
    return t if isinstance(t, np.ndarray) else torch_to_numpy(t)


# GL state a read may touch while it works and must leave as it found it: (glGetIntegerv name, label).
READ_STATE = [
    (GL.GL_PIXEL_PACK_BUFFER_BINDING, "pbo"),
    (GL.GL_PIXEL_UNPACK_BUFFER_BINDING, "upbo"),
    (GL.GL_READ_FRAMEBUFFER_BINDING, "read_fbo"),
    (GL.GL_DRAW_FRAMEBUFFER_BINDING, "draw_fbo"),
    (GL.GL_RENDERBUFFER_BINDING, "rbo"),
    (GL.GL_TEXTURE_BINDING_2D, "tex2d"),
    (GL.GL_TEXTURE_BINDING_RECTANGLE, "texrect"),
    (GL.GL_ACTIVE_TEXTURE, "active_texture"),
    (GL.GL_PACK_ALIGNMENT, "pack_alignment"),
    (GL.GL_PACK_ROW_LENGTH, "pack_row_length"),
    (GL.GL_PACK_SKIP_ROWS, "pack_skip_rows"),
    (GL.GL_PACK_SKIP_PIXELS, "pack_skip_pixels"),
    (GL.GL_PACK_SWAP_BYTES, "pack_swap_bytes"),
]


def gl_state(items):
    """{label: value} of glGetIntegerv for each (name, label) of items, e.g. READ_STATE."""
    return {label: int(GL.glGetIntegerv(pname)) for pname, label in items}
