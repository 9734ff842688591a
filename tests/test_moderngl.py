"""gltensor.moderngl: moderngl renders a lit, depth-tested mesh; captures must equal moderngl's own readback.

moderngl is attached to the session's gltensor context (gltensor.moderngl.attach), so the same tests run
on the CPU backend (Mesa) and, on a GPU machine, on the CUDA backend. `Framebuffer.read()` returns GL's
bottom-up rows, each padded to `alignment` bytes; `ref_*` below undo both.
"""

import math
import sys

import numpy as np
import pytest

moderngl = pytest.importorskip("moderngl")

import gltensor  # noqa: E402
import gltensor.moderngl as gm  # noqa: E402
from OpenGL import GL  # noqa: E402

import glhelpers  # noqa: E402

W, H = 97, 61  # not powers of two, and W * 3 is not a multiple of 4 (row padding in moderngl's reads)

VS = """
#version 330
uniform mat4 mvp;
uniform mat3 nrm;
in vec3 in_pos;
in vec3 in_normal;
out vec3 v_normal;
out vec3 v_pos;
void main() {
    v_normal = nrm * in_normal;
    v_pos = in_pos;
    gl_Position = mvp * vec4(in_pos, 1.0);
}
"""
FS = """
#version 330
in vec3 v_normal;
in vec3 v_pos;
out vec4 f_color;
void main() {
    vec3 n = normalize(v_normal);
    float diffuse = max(dot(n, normalize(vec3(0.4, 0.8, 0.6))), 0.0);
    vec3 base = 0.5 + 0.5 * sin(v_pos * 3.0 + vec3(0.0, 2.0, 4.0));
    f_color = vec4(base * (0.2 + 0.8 * diffuse), 1.0);
}
"""


def sphere(n_lat=12, n_lon=18):
    """Interleaved (pos, normal) float32 triangles of a unit sphere."""
    verts = []
    for i in range(n_lat):
        t0, t1 = math.pi * i / n_lat, math.pi * (i + 1) / n_lat
        for j in range(n_lon):
            p0, p1 = 2 * math.pi * j / n_lon, 2 * math.pi * (j + 1) / n_lon
            quad = [(t0, p0), (t1, p0), (t1, p1), (t0, p0), (t1, p1), (t0, p1)]
            for t, p in quad:
                v = (math.sin(t) * math.cos(p), math.cos(t), math.sin(t) * math.sin(p))
                verts.extend(v + v)
    return np.array(verts, "f4")


def perspective(fovy, aspect, near, far):
    f = 1.0 / math.tan(fovy / 2)
    m = np.zeros((4, 4), "f4")
    m[0, 0], m[1, 1] = f / aspect, f
    m[2, 2], m[2, 3] = (far + near) / (near - far), 2 * far * near / (near - far)
    m[3, 2] = -1
    return m


def view(angle, dist=3.0):
    """Camera on a circle around the origin, looking at it (rotation then translation)."""
    c, s = math.cos(angle), math.sin(angle)
    rot = np.array([[c, 0, -s, 0], [0, 1, 0, 0], [s, 0, c, 0], [0, 0, 0, 1]], "f4")
    tr = np.eye(4, dtype="f4")
    tr[2, 3] = -dist
    return tr @ rot


NEAR, FAR = 0.5, 10.0


class Scene:
    """A lit sphere: program, vertex buffer, vertex array; draw(fbo, angle) renders one camera."""

    def __init__(self, mctx):
        self.ctx = mctx
        self.prog = mctx.program(vertex_shader=VS, fragment_shader=FS)
        self.vbo = mctx.buffer(sphere().tobytes())
        self.vao = mctx.vertex_array(self.prog, [(self.vbo, "3f 3f", "in_pos", "in_normal")])

    def draw(self, fbo, angle=0.3, clear=(0.1, 0.15, 0.2, 1.0)):
        w, h = fbo.size
        v = view(angle)
        mvp = perspective(math.radians(60), w / h, NEAR, FAR) @ v
        self.prog["mvp"].write(mvp.T.astype("f4").tobytes())  # moderngl wants column-major
        self.prog["nrm"].write(np.ascontiguousarray(v[:3, :3].T).astype("f4").tobytes())
        fbo.use()
        self.ctx.enable_only(moderngl.DEPTH_TEST)  # no culling: the depth test hides the back
        fbo.clear(*clear, depth=1.0)
        self.vao.render()

    def release(self):
        for o in (self.vao, self.vbo, self.prog):
            o.release()


class Mgl:
    """moderngl attached to the session context, and what a test made (released after it)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.objects, self.captures = [], []
        self._scene = None

    def track(self, obj):
        self.objects.append(obj)
        return obj

    def scene(self):
        if self._scene is None:
            self._scene = Scene(self.ctx)
        return self._scene

    def capture(self, obj, **kwargs):
        cap = gm.capture(obj, **kwargs)
        self.captures.append(cap)
        return cap

    def batch(self, objs, **kwargs):
        b = gm.batch(objs, **kwargs)
        self.captures.append(b)
        self.captures.extend(b.captures)
        return b

    def fbo(self, size=(W, H), color="texture", depth="renderbuffer", samples=0, components=4):
        c = self.ctx
        col = (c.texture(size, components, samples=samples) if color == "texture"
               else c.renderbuffer(size, components, samples=samples))
        dep = None
        if depth == "renderbuffer":
            dep = c.depth_renderbuffer(size, samples=samples)
        elif depth == "texture":
            dep = c.depth_texture(size, samples=samples)
        self.track(col)
        if dep is not None:
            self.track(dep)
        return self.track(c.framebuffer([col], dep))

    def close(self):
        for cap in reversed(self.captures):  # captures go before the GL objects they registered
            cap.close()
        # moderngl re-binds the framebuffer it last used after making a new one: make that the default
        # framebuffer, not one released below (binding a deleted name is GL_INVALID_OPERATION)
        self.ctx.screen.use()
        unbind_moderngl_state()
        for o in reversed(self.objects):
            o.release()
        if self._scene is not None:
            self._scene.release()


def unbind_moderngl_state():
    """Leave the shared session context as the other test modules expect it: moderngl keeps its program,
    vertex array and buffers bound after a draw, and a program deleted while current stays current (the
    next glUseProgram of its name then fails in another test)."""
    GL.glUseProgram(0)
    GL.glBindVertexArray(0)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
    GL.glDisable(GL.GL_DEPTH_TEST)
    GL.glDisable(GL.GL_CULL_FACE)
    GL.glDisable(GL.GL_BLEND)


@pytest.fixture(scope="module")
def mctx(ctx):
    ctx.make_current()
    m = gm.attach()
    yield m
    ctx.make_current()
    unbind_moderngl_state()
    m.release()  # releases moderngl's own state only; the GL context stays the session's


@pytest.fixture
def mg(gl, mctx):
    m = Mgl(mctx)
    yield m
    gl.make_current()
    m.close()


# ---------------------------------------------------------------- references from moderngl itself


def ref_color(fbo, components=4, attachment=0, alignment=1):
    """Framebuffer.read() made upright: rows bottom-up, each padded to `alignment` bytes."""
    w, h = fbo.size
    raw = fbo.read(components=components, attachment=attachment, alignment=alignment)
    stride = (w * components + alignment - 1) // alignment * alignment
    assert len(raw) == stride * h
    rows = np.frombuffer(raw, "u1").reshape(h, stride)[:, : w * components]
    return rows.reshape(h, w, components)[::-1]


def ref_depth(fbo):
    w, h = fbo.size
    raw = fbo.read(attachment=-1, components=1, dtype="f4")
    return np.frombuffer(raw, "f4").reshape(h, w, 1)[::-1]


def host(frame):
    """numpy copy of a frame or tensor, wherever it lives."""
    if hasattr(frame, "__cuda_array_interface__") or getattr(frame, "device", "cpu") != "cpu":
        torch = pytest.importorskip("torch")
        return torch.from_dlpack(frame).cpu().numpy()
    return np.asarray(frame).copy()


def assert_drawn(img):
    """The sphere is in the picture (not just the clear colour)."""
    assert len(np.unique(img.reshape(-1, img.shape[-1]), axis=0)) > 20


# ---------------------------------------------------------------- colour


def test_texture_attachment_matches_framebuffer_read(backend, mg):
    fbo = mg.fbo()
    mg.scene().draw(fbo)
    cap = mg.capture(fbo, backend=backend)
    assert (cap.target, cap.format, cap.shape, cap.backend) == ("GL_TEXTURE_2D", "GL_RGBA8", (H, W, 4), backend)
    ref = ref_color(fbo)
    assert_drawn(ref)
    np.testing.assert_array_equal(host(cap.read()), ref)
    np.testing.assert_array_equal(host(cap.read(flip=False)), ref[::-1])
    # moderngl's default alignment is 1; with alignment=4 its RGB rows carry padding (97 * 3 = 291 -> 292)
    np.testing.assert_array_equal(host(cap.read(channels="rgb")), ref_color(fbo, 3, alignment=4))
    np.testing.assert_array_equal(host(cap.read(channels="rgb", dtype="float32", layout="chw")),
                                  ref[..., :3].transpose(2, 0, 1).astype(np.float32) / np.float32(255))
    # the texture object itself and fbo.color_attachments[0] are the same image
    np.testing.assert_array_equal(host(mg.capture(fbo.color_attachments[0], backend=backend).read()), ref)


def test_every_step_follows_the_render(backend, mg):
    fbo = mg.fbo()
    cap = mg.capture(fbo, backend=backend)
    frames = []
    for step in range(4):
        mg.scene().draw(fbo, angle=0.5 * step)
        frames.append(cap.read())
        np.testing.assert_array_equal(host(frames[-1]), ref_color(fbo))
    # earlier frames were not overwritten by later reads
    assert not np.array_equal(host(frames[0]), host(frames[-1]))


def test_renderbuffer_attachment(backend, mg):
    fbo = mg.fbo(color="renderbuffer")
    mg.scene().draw(fbo, angle=1.1)
    cap = mg.capture(fbo, backend=backend)
    assert (cap.target, cap.format) == ("GL_RENDERBUFFER", "GL_RGBA8")
    ref = ref_color(fbo)
    assert_drawn(ref)
    np.testing.assert_array_equal(host(cap.read()), ref)
    np.testing.assert_array_equal(host(mg.capture(fbo.color_attachments[0], backend=backend).read()), ref)


def test_second_colour_attachment(backend, mg):
    c = mg.ctx
    a, b = mg.track(c.texture((W, H), 4)), mg.track(c.renderbuffer((W, H), 4))
    fbo = mg.track(c.framebuffer([a, b], mg.track(c.depth_renderbuffer((W, H)))))
    fbo.use()
    fbo.clear(0.2, 0.4, 0.6, 1.0)  # clears both colour attachments
    cap = mg.capture(fbo, attachment=1, backend=backend)
    assert cap.target == "GL_RENDERBUFFER"
    np.testing.assert_array_equal(host(cap.read()), ref_color(fbo, attachment=1))
    with pytest.raises(ValueError, match="2 colour attachment"):
        gm.capture(fbo, attachment=2)


# ---------------------------------------------------------------- depth


@pytest.mark.parametrize("depth", ["renderbuffer", "texture"])
def test_depth_attachment(backend, mg, depth):
    fbo = mg.fbo(depth=depth)
    mg.scene().draw(fbo, angle=0.7)
    for attachment in ("depth", -1):
        cap = mg.capture(fbo, attachment=attachment, backend=backend)
        assert cap.shape == (H, W, 1) and cap.dtype == "float32"
        assert cap.target == ("GL_RENDERBUFFER" if depth == "renderbuffer" else "GL_TEXTURE_2D")
        ref = ref_depth(fbo)
        assert 0.0 < ref.min() < 1.0 and ref.max() == 1.0  # the sphere, and the cleared background
        np.testing.assert_array_equal(host(cap.read()), ref)
    lin = host(cap.read(depth="linear", near=NEAR, far=FAR))
    want = (FAR * NEAR / (FAR - ref.astype(np.float64) * (FAR - NEAR))).astype(np.float32)
    np.testing.assert_allclose(lin, want, rtol=1e-5)
    # the sphere's front is about 2 units from the camera (distance 3, radius 1)
    assert 1.9 < lin.min() < 2.2


def test_no_depth_attachment(mg):
    fbo = mg.fbo(depth=None)
    with pytest.raises(ValueError, match="no depth attachment"):
        gm.capture(fbo, attachment="depth")


# ---------------------------------------------------------------- resizing


def test_resized_framebuffer_between_steps(backend, mg):
    """The usual moderngl way: a window resize makes a new texture + framebuffer, hence a new capture."""
    scene = mg.scene()
    sizes = [(W, H), (64, 40), (W + 30, H + 7), (W, H)]
    fbo = cap = None
    for step, size in enumerate(sizes):
        if fbo is None or fbo.size != size:
            if cap is not None:
                cap.close()  # before the old texture goes (it may be registered with CUDA)
            fbo = mg.fbo(size=size)
            cap = mg.capture(fbo, backend=backend)
        scene.draw(fbo, angle=0.4 * step)
        frame = cap.read()
        assert frame.shape == (size[1], size[0], 4)
        np.testing.assert_array_equal(host(frame), ref_color(fbo))


def test_texture_reallocated_under_the_same_name(backend, mg):
    """Storage re-specified under the same GL name (glTexImage2D on tex.glo): resizable=True follows it
    (NVIDIA refuses to reallocate a texture while it is registered with CUDA, see README)."""
    tex = mg.track(mg.ctx.texture((W, H), 4))
    cap = mg.capture(tex, backend=backend, resizable=True)
    first = host(cap.read())
    assert first.shape == (H, W, 4)
    w2, h2 = 50, 33
    fmt = glhelpers.as_fmt("RGBA8")
    data = np.random.default_rng(3).integers(0, 256, (h2, w2, 4), dtype=np.uint8)
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex.glo)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    glhelpers.tex_image_2d(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, w2, h2, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, data)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    frame = host(cap.read())
    assert frame.shape == (h2, w2, 4)
    np.testing.assert_array_equal(frame, data[::-1])
    np.testing.assert_array_equal(frame, glhelpers.reference(tex.glo, GL.GL_TEXTURE_2D, fmt, w2, h2)[::-1])


# ---------------------------------------------------------------- several cameras


def test_two_cameras_in_one_step(backend, mg):
    scene = mg.scene()
    fbos = [mg.fbo(), mg.fbo()]
    b = mg.batch(fbos, backend=backend)
    assert len(b) == 2 and b.shape == (2, H, W, 4)
    for step in range(2):
        for k, fbo in enumerate(fbos):
            scene.draw(fbo, angle=0.2 * step + 1.5 * k)
        got = host(b.read())
        refs = [ref_color(f) for f in fbos]
        assert not np.array_equal(refs[0], refs[1])
        np.testing.assert_array_equal(got, np.stack(refs))


def test_batch_of_mixed_targets(backend, mg):
    scene = mg.scene()
    fbos = [mg.fbo(), mg.fbo(color="renderbuffer"), mg.fbo(size=(40, 30))]
    for k, fbo in enumerate(fbos):
        scene.draw(fbo, angle=k)
    b = mg.batch(fbos, backend=backend)
    assert [c.target for c in b.captures] == ["GL_TEXTURE_2D", "GL_RENDERBUFFER", "GL_TEXTURE_2D"]
    for frame, fbo in zip(b.read_list(), fbos):
        np.testing.assert_array_equal(host(frame), ref_color(fbo))
    with pytest.raises(gltensor.InvalidArgumentError):
        b.read()  # sizes differ


def test_regions(backend, mg):
    """region= reaches the captures made here, also in a batch of mixed targets (one per source)."""
    scene = mg.scene()
    fbos = [mg.fbo(), mg.fbo(color="renderbuffer"), mg.fbo(size=(40, 30))]
    for k, fbo in enumerate(fbos):
        scene.draw(fbo, angle=k)
    refs = [ref_color(f)[::-1] for f in fbos]  # bottom-up, as regions count rows

    def part(k, r):
        x, y, w, h = r
        return refs[k][y : y + h, x : x + w][::-1]

    r = (10, 5, 30, 20)
    cap = mg.capture(fbos[0], backend=backend, region=r)
    np.testing.assert_array_equal(host(cap.read()), part(0, r))
    regions = [(0, 0, 30, 20), (5, 7, 30, 20), (9, 9, 30, 20)]
    b = mg.batch(fbos, backend=backend, regions=regions)
    assert b.regions == tuple(regions)
    np.testing.assert_array_equal(host(b.read()), np.stack([part(k, regions[k]) for k in range(3)]))
    b = mg.batch(fbos, backend=backend, region=r)
    assert b.regions == (r,) * 3
    np.testing.assert_array_equal(host(b.read()), np.stack([part(k, r) for k in range(3)]))
    with pytest.raises(ValueError, match=r"regions\[0\] is given, but batch source 0 is a gltensor.Capture"):
        mg.batch([cap, fbos[1]], backend=backend, regions=[r, None])


# ---------------------------------------------------------------- before the first frame, misuse


@pytest.mark.parametrize("color", ["texture", "renderbuffer"])
def test_capture_before_first_render(backend, mg, color):
    """Before anything is drawn a read gives what GL holds (moderngl's own read agrees), never the
    contents of an earlier frame from the capture pool; after a clear, exactly the clear colour."""
    busy = mg.fbo()
    mg.scene().draw(busy)
    busy_cap = mg.capture(busy, backend=backend)
    for _ in range(3):
        busy_cap.read()  # frames returned to the pool with drawn contents
    fbo = mg.fbo(color=color)
    cap = mg.capture(fbo, backend=backend)
    first = host(cap.read())
    np.testing.assert_array_equal(first, ref_color(fbo))
    fbo.use()
    fbo.clear(0.2, 0.4, 0.6, 1.0)
    np.testing.assert_array_equal(host(cap.read()), np.broadcast_to(np.array([51, 102, 153, 255], np.uint8),
                                                                    (H, W, 4)))


def test_clear_errors(mg):
    c = mg.ctx
    tex = c.texture((8, 8), 4)
    tex.release()
    with pytest.raises(ValueError, match="released"):
        gm.capture(tex)
    arr = mg.track(c.texture_array((8, 8, 2), 4))
    with pytest.raises(TypeError, match="TextureArray"):
        gm.capture(arr)
    with pytest.raises(TypeError):
        gm.capture(mg.track(c.texture((8, 8), 4)), attachment=0)
    with pytest.raises(ValueError, match="attachment"):
        gm.capture(mg.fbo(), attachment="stencil")


def test_missing_moderngl_names_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "moderngl", None)  # makes `import moderngl` raise ImportError
    with pytest.raises(ImportError, match="pip install moderngl"):
        gm.capture(object())
    with pytest.raises(ImportError, match="pip install moderngl"):
        gm.headless_context()


# ---------------------------------------------------------------- multisampling


@pytest.mark.parametrize("color", ["texture", "renderbuffer"])
def test_multisampled_matches_moderngl_resolve(backend, mg, color):
    ms = mg.fbo(color=color, samples=4)
    assert ms.color_attachments[0].samples == 4
    mg.scene().draw(ms, angle=0.9)
    resolved = mg.fbo(depth="texture")
    mg.ctx.copy_framebuffer(resolved, ms)
    cap = mg.capture(ms, backend=backend)
    assert cap.target == ("GL_TEXTURE_2D_MULTISAMPLE" if color == "texture" else "GL_RENDERBUFFER")
    ref = ref_color(resolved)
    assert_drawn(ref)
    np.testing.assert_array_equal(host(cap.read()), ref)
    dcap = mg.capture(ms, attachment="depth", backend=backend)
    np.testing.assert_array_equal(host(dcap.read()), ref_depth(resolved))


# ---------------------------------------------------------------- headless_context


def test_headless_context(backend, gl):
    # Mesa's software renderer where there is one (CI); on a GPU machine without Mesa the CPU backend is
    # tested on the NVIDIA context instead.
    software = True if backend == "cpu" and gl.cuda_device is None else None
    gl_ctx, m = gm.headless_context(software=software)
    try:
        assert gl_ctx.renderer == m.info["GL_RENDERER"]
        if backend == "cuda":
            assert gl_ctx.cuda_device is not None
        scene = Scene(m)
        tex = m.texture((W, H), 4)
        rbo = m.depth_renderbuffer((W, H))
        fbo = m.framebuffer([tex], rbo)
        scene.draw(fbo, angle=2.0)
        with gm.capture(fbo, backend=backend) as cap:
            np.testing.assert_array_equal(host(cap.read()), ref_color(fbo))
        for o in (fbo, rbo, tex):
            o.release()
        scene.release()
        m.release()
    finally:
        gl_ctx.close()
        gl.make_current()
