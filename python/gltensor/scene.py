"""A small offscreen scene for demos, tests and benchmarks.

It renders lit, coloured meshes (a spinning cube, a bouncing sphere, a checkered ground) into an FBO
whose colour attachment is a plain RGBA8 GL_TEXTURE_2D, the kind of image a simulator hands over.
Only PyOpenGL and numpy are needed, and only a core-profile 3.3+ context current in this thread
(for example the one `gltensor.Context.headless()` makes current).

Many cameras: one Scene (one program, one vertex buffer) can draw any camera into any framebuffer or
part of one, `scene.render(t, fbo=target.fbo, viewport=(x, y, w, h), camera=k)`, for example into
`RenderTarget`s (one texture per camera) or into the tiles of one atlas texture
(`viewport=atlas.viewport(k)`).
"""
import ctypes
import math
import os

# PyOpenGL picks its platform at first import; headless contexts are EGL contexts.
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np  # noqa: E402
from OpenGL import GL  # noqa: E402

_VERTEX_SHADER = """
#version 330 core
layout(location = 0) in vec3 a_pos;
layout(location = 1) in vec3 a_normal;
layout(location = 2) in vec3 a_color;
uniform mat4 u_model;
uniform mat4 u_view_proj;
out vec3 v_normal;
out vec3 v_color;
void main() {
    // Models are rotations + translations only, so mat3(u_model) transforms normals correctly.
    v_normal = mat3(u_model) * a_normal;
    v_color = a_color;
    gl_Position = u_view_proj * u_model * vec4(a_pos, 1.0);
}
"""

_FRAGMENT_SHADER = """
#version 330 core
in vec3 v_normal;
in vec3 v_color;
uniform vec3 u_light_dir;
out vec4 o_color;
void main() {
    float lambert = max(dot(normalize(v_normal), u_light_dir), 0.0);
    o_color = vec4(v_color * (0.3 + 0.7 * lambert), 1.0);   // ambient keeps shadowed faces visible
}
"""


def _cube():
    """36 vertices, one flat normal and one colour per face, so that faces stay distinguishable."""
    faces = [  # (normal, colour): +x red, -x cyan, +y yellow, -y grey, +z blue, -z magenta
        ((1, 0, 0), (0.9, 0.2, 0.2)), ((-1, 0, 0), (0.2, 0.8, 0.8)), ((0, 1, 0), (0.95, 0.85, 0.2)),
        ((0, -1, 0), (0.5, 0.5, 0.5)), ((0, 0, 1), (0.2, 0.35, 0.9)), ((0, 0, -1), (0.8, 0.3, 0.8))]
    verts = []
    for n, c in faces:
        n = np.array(n, np.float32)
        u = np.array([n[1], n[2], n[0]], np.float32)  # two axes orthogonal to n span the face
        v = np.cross(n, u)
        corners = [0.5 * (n + su * u + sv * v) for su, sv in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        for i in (0, 1, 2, 0, 2, 3):
            verts.append((*corners[i], *n, *c))
    return verts


def _sphere(radius=0.4, stacks=16, slices=24, color=(0.95, 0.55, 0.15)):
    """UV sphere with smooth per-vertex normals: shows that lighting varies across a surface."""
    def point(i, j):
        theta, phi = math.pi * i / stacks, 2 * math.pi * j / slices
        n = (math.sin(theta) * math.cos(phi), math.cos(theta), math.sin(theta) * math.sin(phi))
        return (radius * n[0], radius * n[1], radius * n[2], *n, *color)
    verts = []
    for i in range(stacks):
        for j in range(slices):
            a, b, c, d = point(i, j), point(i + 1, j), point(i + 1, j + 1), point(i, j + 1)
            verts += [a, b, c, a, c, d]
    return verts


def _ground(half=4.0, tiles=8):
    """Checkered plane at y = 0: the checker makes orientation and flips obvious in a picture."""
    verts, step = [], 2 * half / tiles
    for i in range(tiles):
        for j in range(tiles):
            x0, z0 = -half + i * step, -half + j * step
            c = (0.85, 0.85, 0.8) if (i + j) % 2 == 0 else (0.25, 0.45, 0.25)
            quad = [(x0, 0, z0), (x0 + step, 0, z0), (x0 + step, 0, z0 + step), (x0, 0, z0 + step)]
            for k in (0, 1, 2, 0, 2, 3):
                verts.append((*quad[k], 0, 1, 0, *c))
    return verts


def _perspective(fovy_deg, aspect, near, far):
    f = 1.0 / math.tan(math.radians(fovy_deg) / 2)
    return np.array([[f / aspect, 0, 0, 0], [0, f, 0, 0],
                     [0, 0, (far + near) / (near - far), 2 * far * near / (near - far)],
                     [0, 0, -1, 0]], np.float32)


def _look_at(eye, target, up=(0.0, 1.0, 0.0)):
    eye, target, up = (np.asarray(v, np.float32) for v in (eye, target, up))
    f = target - eye
    f /= np.linalg.norm(f)
    s = np.cross(f, up)
    s /= np.linalg.norm(s)
    u = np.cross(s, f)
    m = np.identity(4, np.float32)
    m[0, :3], m[1, :3], m[2, :3] = s, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def _model(rot_y=0.0, rot_x=0.0, translate=(0.0, 0.0, 0.0)):
    cy, sy, cx, sx = math.cos(rot_y), math.sin(rot_y), math.cos(rot_x), math.sin(rot_x)
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]], np.float32)
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]], np.float32)
    m = np.identity(4, np.float32)
    m[:3, :3], m[:3, 3] = ry @ rx, translate
    return m


def _compile(kind, source):
    shader = GL.glCreateShader(kind)
    GL.glShaderSource(shader, source)
    GL.glCompileShader(shader)
    if not GL.glGetShaderiv(shader, GL.GL_COMPILE_STATUS):
        raise RuntimeError("shader compile failed: %s" % GL.glGetShaderInfoLog(shader).decode())
    return shader


def _link(vs_source, fs_source):
    """A program of one vertex and one fragment shader; a RuntimeError with GL's log when either fails."""
    vs, fs = _compile(GL.GL_VERTEX_SHADER, vs_source), _compile(GL.GL_FRAGMENT_SHADER, fs_source)
    program = GL.glCreateProgram()
    GL.glAttachShader(program, vs)
    GL.glAttachShader(program, fs)
    GL.glLinkProgram(program)
    GL.glDeleteShader(vs)  # flagged only; they go away with the program
    GL.glDeleteShader(fs)
    if not GL.glGetProgramiv(program, GL.GL_LINK_STATUS):
        log = GL.glGetProgramInfoLog(program).decode()
        GL.glDeleteProgram(program)
        raise RuntimeError("program link failed: %s" % log)
    return program


def _camera_view_proj(camera, aspect):
    """View-projection of camera `camera`: on a circle around the cube, spaced by the golden angle so
    that any two indices differ."""
    az = 0.7 + camera * 2.39996
    height = 1.6 + 0.9 * (camera % 3)
    eye = (5.0 * math.cos(az), height, 5.0 * math.sin(az))
    proj = _perspective(45.0, aspect, 0.1, 50.0)
    return np.ascontiguousarray(proj @ _look_at(eye, (0.0, 0.4, 0.0)))


def read_pixels(fbo, viewport, flip=True, out=None):
    """glReadPixels of `viewport` (x, y, w, h) of colour attachment 0 of `fbo`: (h, w, 4) uint8, top row
    first unless flip=False. out: a C-contiguous (h, w, 4) uint8 array to read into."""
    x, y, w, h = (int(v) for v in viewport)
    GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, fbo)
    GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT0)
    GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)  # rows of RGBA8 are 4-aligned anyway; be explicit
    if out is None:
        out = np.empty((h, w, 4), np.uint8)
    GL.glReadPixels(x, y, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, out)
    if flip:
        out[:] = out[::-1].copy()
    return out


class RenderTarget:
    """An FBO whose colour attachment is a plain RGBA8 GL_TEXTURE_2D (`.texture`), with an optional
    depth renderbuffer: somewhere for `Scene.render(fbo=...)` to draw, e.g. one target per camera or
    one large atlas texture whose tiles are cameras."""

    def __init__(self, width, height, *, depth=True):
        self.width, self.height = int(width), int(height)
        self.texture = GL.glGenTextures(1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.texture)
        GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, self.width, self.height, 0,
                        GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        self.depth = 0
        if depth:
            self.depth = GL.glGenRenderbuffers(1)
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, self.depth)
            GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, GL.GL_DEPTH_COMPONENT24, self.width, self.height)
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
        self.fbo = GL.glGenFramebuffers(1)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, self.texture, 0)
        if depth:
            GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, GL.GL_DEPTH_ATTACHMENT, GL.GL_RENDERBUFFER, self.depth)
        status = GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER)
        if status != GL.GL_FRAMEBUFFER_COMPLETE:
            raise RuntimeError("framebuffer incomplete: 0x%04x" % status)
        self._closed = False

    @property
    def viewport(self):
        return (0, 0, self.width, self.height)

    def bind(self, viewport=None):
        """Binds the FBO and sets the viewport (default: the whole texture)."""
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        GL.glViewport(*(viewport or self.viewport))

    def read_pixels(self, flip=True, out=None, viewport=None):
        """Reference readback of the whole texture, or of `viewport` (x, y, w, h): see read_pixels()."""
        return read_pixels(self.fbo, viewport or self.viewport, flip=flip, out=out)

    def close(self):
        """Deletes the GL objects; needs the target's context current. Idempotent."""
        if self._closed:
            return
        self._closed = True
        GL.glDeleteFramebuffers(1, [self.fbo])
        if self.depth:
            GL.glDeleteRenderbuffers(1, [self.depth])
        GL.glDeleteTextures([self.texture])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Scene:
    """Offscreen renderer: `render(t)` draws into `.texture` (RGBA8 GL_TEXTURE_2D, `.fbo` bound)."""

    def __init__(self, width, height, *, camera=0):
        self.width, self.height, self.camera = int(width), int(height), int(camera)
        # Colour goes to a texture (what gets captured); depth to a renderbuffer nobody reads.
        self.target = RenderTarget(self.width, self.height, depth=True)
        self.texture, self.depth, self.fbo = self.target.texture, self.target.depth, self.target.fbo

        self.program = _link(_VERTEX_SHADER, _FRAGMENT_SHADER)
        self._u_model = GL.glGetUniformLocation(self.program, "u_model")
        self._u_view_proj = GL.glGetUniformLocation(self.program, "u_view_proj")
        self._u_light = GL.glGetUniformLocation(self.program, "u_light_dir")

        # One interleaved VBO (position, normal, colour) for all meshes; each is a (first, count) range.
        meshes, chunks, first = {}, [], 0
        for name, verts in (("cube", _cube()), ("sphere", _sphere()), ("ground", _ground())):
            meshes[name] = (first, len(verts))
            chunks.append(np.asarray(verts, np.float32))
            first += len(verts)
        self._meshes = meshes
        data = np.ascontiguousarray(np.concatenate(chunks))
        self.vao = GL.glGenVertexArrays(1)  # core profile: drawing needs a VAO bound
        GL.glBindVertexArray(self.vao)
        self.vbo = GL.glGenBuffers(1)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self.vbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, data.nbytes, data, GL.GL_STATIC_DRAW)
        stride = 9 * 4
        for loc in range(3):
            GL.glEnableVertexAttribArray(loc)
            GL.glVertexAttribPointer(loc, 3, GL.GL_FLOAT, GL.GL_FALSE, stride, ctypes.c_void_p(12 * loc))
        GL.glBindVertexArray(0)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)

        # Cameras sit on a circle around the cube, spaced by the golden angle so any index differs.
        self._view_proj = _camera_view_proj(self.camera, self.width / self.height)
        self._view_projs = {(self.camera, self.width, self.height): self._view_proj}
        light = np.array([0.4, 1.0, 0.3], np.float32)
        self._light = light / np.linalg.norm(light)
        self._closed = False

    def bind(self):
        """Binds the FBO and sets the viewport, for callers that draw into the texture themselves."""
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        GL.glViewport(0, 0, self.width, self.height)

    def render(self, t=0.0, fbo=None, viewport=None, camera=None):
        """Draws the frame at animation time t (seconds): the cube spins, the sphere bounces.

        By default into the scene's own `.texture`, from the scene's camera. Optional, for many cameras:
          fbo      : another framebuffer to draw into (e.g. `RenderTarget.fbo`, an atlas's FBO); it
                     needs a depth attachment for correct occlusion.
          viewport : (x, y, w, h) part of the framebuffer to draw into, e.g. `atlas.viewport(k)`; only
                     that rectangle is cleared (scissor) and drawn. Default: (0, 0, width, height).
          camera   : camera index to draw from (default: the scene's `camera`); the aspect ratio
                     follows the viewport.
        """
        if viewport is None:
            viewport = (0, 0, self.width, self.height)
            partial = False
        else:
            viewport = tuple(int(v) for v in viewport)
            partial = True
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo if fbo is None else fbo)
        GL.glViewport(*viewport)
        if partial:  # glClear ignores the viewport: a scissor keeps it inside this camera's rectangle
            GL.glEnable(GL.GL_SCISSOR_TEST)
            GL.glScissor(*viewport)
        else:
            GL.glDisable(GL.GL_SCISSOR_TEST)  # a caller's scissor would clip the clear
        GL.glEnable(GL.GL_DEPTH_TEST)
        GL.glClearColor(0.55, 0.7, 0.9, 1.0)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT | GL.GL_DEPTH_BUFFER_BIT)
        GL.glDisable(GL.GL_SCISSOR_TEST)  # drawing stays inside the viewport anyway
        GL.glUseProgram(self.program)
        GL.glBindVertexArray(self.vao)
        cam = self.camera if camera is None else int(camera)
        key = (cam, viewport[2], viewport[3])
        view_proj = self._view_projs.get(key)
        if view_proj is None:
            view_proj = self._view_projs[key] = _camera_view_proj(cam, viewport[2] / viewport[3])
        # transpose=GL_TRUE: numpy matrices are row-major, GLSL expects column-major.
        GL.glUniformMatrix4fv(self._u_view_proj, 1, GL.GL_TRUE, view_proj)
        GL.glUniform3f(self._u_light, *self._light)
        objects = (("cube", _model(rot_y=1.1 * t, rot_x=0.7 * t, translate=(0.0, 0.9, 0.0))),
                   ("sphere", _model(translate=(1.4, 0.4 + 0.6 * abs(math.sin(2.0 * t)), -0.9))),
                   ("ground", _model()))
        for name, model in objects:
            GL.glUniformMatrix4fv(self._u_model, 1, GL.GL_TRUE, model)
            first, count = self._meshes[name]
            GL.glDrawArrays(GL.GL_TRIANGLES, first, count)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)

    def read_pixels(self, flip=True, out=None):
        """Reference readback through glReadPixels: (H, W, 4) uint8, top row first unless flip=False.

        out: a C-contiguous (H, W, 4) uint8 array to read into (GL's bottom-up order is read, then
        flipped in place when flip=True), so that a caller can avoid an allocation per frame.
        """
        return read_pixels(self.fbo, (0, 0, self.width, self.height), flip=flip, out=out)

    def close(self):
        """Deletes the GL objects; needs the scene's context current. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.target.close()
        GL.glDeleteBuffers(1, [self.vbo])
        GL.glDeleteVertexArrays(1, [self.vao])
        GL.glDeleteProgram(self.program)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
