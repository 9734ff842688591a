"""MuJoCo batch rendering: N environments, one GL context, one MjrContext, one sheet of N tiles, one read.

    import mujoco, gltensor.mujoco as gmj                         # MUJOCO_GL=egl
    r = gmj.BatchRenderer(model, n=16, height=84, width=84, camera="track")
    frames = r.render_and_read(datas)                            # (16, 84, 84, 3) uint8, tile k == env k

Every env is drawn by MuJoCo's own ``mjv_updateScene`` + ``mjr_render`` at (0, 0) of ONE ``MjrContext``'s
multisampled offscreen buffer, exactly where ``mujoco.Renderer`` draws, and resolved (the GL_NEAREST blit
``mjr_readPixels`` does) into its tile of a single-sample sheet of ``rows x cols`` tiles; the sheet is read once
by a :class:`gltensor.Atlas` (colour) or one :class:`gltensor.Capture` split into tiles (depth), upright per
tile, on the GPU with the CUDA backend. ``mujoco.Renderer`` does the same calls per env in its own GL context and
reads each env back with ``mjr_readPixels``; here there is one context and one copy for the batch, and every
tile is bit-equal to ``Renderer.render()`` (``tiling="viewport"``, n viewports of one buffer, is not: see
``_tiles``).
"""

from __future__ import annotations

import copy
import gc


import numpy as np

import gltensor
from gltensor import _gltensor as _core

from .._adapter import NotRenderedError
from ._gl_backend import close_at_exit as _close_at_exit
from ._gl_backend import context_class as _gl_context_class  # also: MUJOCO_GL=egl where there is no display
from ._models import as_data, as_model, context_mismatch, render_flag, scene_key
from ._tiles import TileSheet, _gl, grid_shape, max_sizes

__all__ = ["BatchRenderer", "grid_shape"]

def _require_mujoco():
    try:
        import mujoco
    except ImportError as exc:  # pragma: no cover - exercised only without mujoco
        raise ImportError("gltensor.mujoco.BatchRenderer needs MuJoCo's Python bindings: pip install mujoco; "
                          "then set MUJOCO_GL=egl before importing mujoco") from exc
    return mujoco


_WINDOW_SYSTEM_EGL = 1  # glt_window_system's GLT_WINDOW_SYSTEM_EGL (gltensor.h), the first field of a saved record


class _ContextKept:
    """Makes the batch's GL context current for one call and puts back exactly what was current before: the
    caller's context, or none. Why it matters here: an MjrContext that dies by garbage collection (Gymnasium's
    OffScreenViewer frees only its GL context on close() and leaves its MjrContext to the GC) runs mjr_freeContext
    in whatever context is current, deleting framebuffers and textures by name; with our context left current, it
    deleted ours (seen on an H200: offFBO 1 gone, glBindFramebuffer -> GL_INVALID_OPERATION; then again with ours
    left current where none had been: collections ran in the caller's code between two steps). No collection runs
    while ours is current (the garbage collector is off for the call). The record and the restore are the core's
    (EGL and GLX); a context of another kind (OSMesa) is not seen, and ours is then left current."""

    __slots__ = ("_glc", "_own", "_saved", "_gc_was_enabled")

    def __init__(self, glc, own=None):
        self._glc = glc
        self._own = own  # the core's record of glc current (EGL), or None: glc.make_current()
        self._saved = None
        self._gc_was_enabled = None

    def save(self):
        if self._saved is None:
            self._saved = _core._save_gl_context()  # the core's record: one place saves and restores GL state

    def __enter__(self):
        self.save()
        # No garbage collection while our context is current: a collected MjrContext would free its names in it.
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        if self._own is not None:
            # The core's eglMakeCurrent with what MuJoCo's GLContext.make_current passes (recorded with it current):
            # through PyOpenGL's EGL binding that call cost 36 µs of a 4-env step on an H200 host
            # (benchmarks/results/mujoco_phases_breakdown_n4_h200.json).
            _core._restore_gl_context(self._own)
        else:
            self._glc.make_current()
        return self

    def __exit__(self, *exc):
        try:
            if self._saved is not None:
                _core._restore_or_release_gl_context(self._saved)  # the caller's context, or none
            return False
        finally:
            if self._gc_was_enabled:
                gc.enable()


def _put_back(saved):
    """Makes the context recorded by _core._save_gl_context() current again, or releases the current one when the
    recorded context no longer exists (a close destroyed it: the batch's own, an env's viewer) or none was."""
    try:
        _core._restore_or_release_gl_context(saved)
    except gltensor.GLTensorError:  # destroyed: nothing of the caller's is left to put back
        _core._restore_or_release_gl_context((0, 0, 0, 0, 0, saved[5]))  # GLT_WINDOW_SYSTEM_NONE: release


class _CallersContextKept:
    """Around a close: the context current before (the caller's, or none) is current after. MuJoCo's
    GLContext.free() ends with eglReleaseThread(), which releases whatever is current in the thread (so does the
    free of a Gymnasium viewer an env holds); a stock env drawing afterwards into "its" context then drew black.
    No garbage collection meanwhile: an MjrContext collected while ours is current would free its names in it."""

    def __enter__(self):
        self._saved = _core._save_gl_context()
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc):
        try:
            _put_back(self._saved)
        finally:
            if self._gc_was_enabled:
                gc.enable()
        return False


class BatchRenderer:
    """N MuJoCo environments rendered in one GL context into the tiles of one sheet, read at once.

    model: one ``mujoco.MjModel`` for all n envs, or a sequence of n models (domain randomisation: colours,
        sizes, lights, cameras may differ; meshes, textures, height field sizes, planes, ``vis.global/quality/map``
        and ``stat.extent`` -- what ``mjr_makeContext`` uploads once -- must be equal, else
        ``InvalidArgumentError`` naming the env and the field). dm_control Physics / model wrappers are accepted.
        Height field data is followed: an env whose ``hfield_data`` differs from what the context holds (new
        terrain at a reset, different per env) has its own uploaded (``mjr_uploadHField``) before it is drawn.
    n, height, width: the batch size and every tile's size in pixels.
    camera: every env's camera: a camera id, a name, or -1 (MuJoCo's default free camera), as
        ``Renderer.update_scene(data, camera)``; ``render(cameras=...)`` overrides it per call.
    depth: read distances (n, H, W) float32 as ``Renderer.render()`` in depth mode (and ``RendererCapture``).
    segmentation: read (n, H, W, 2) int32 (object id, object type; -1 for background) as
        ``Renderer.render()`` in segmentation mode.
    backend / cuda_device: as for :class:`gltensor.Capture` ("auto": CUDA tensors when MuJoCo's EGL context
        runs on a CUDA device, else CPU tensors).
    max_geom: ``MjvScene`` size, as ``mujoco.Renderer``. scene_option: the default ``MjvOption``.
    render_flags: {"shadow": False, "reflection": False, ...} (mjtRndFlag names or values) set on every scene
        (``scenes`` gives them, as ``renderer.scene``).
    tiling: "exact" (default): each env drawn at (0, 0) of the MjrContext's offscreen buffer, as
        ``mujoco.Renderer`` draws; its samples copied into its tile of a multisampled sheet, resolved once into a
        single-sample sheet after the last env (a resolve blit per env where GL 4.3's glCopyImageSubData is absent);
        "viewport": each env drawn into its own viewport of one n-tile multisampled buffer, resolved once --
        equal to ``Renderer.render()`` only for the tile at (0, 0), since rasterisation depends on the window
        position (docs/python-api.md, "BatchRenderer").

    Exactness: tile k equals ``mujoco.Renderer(model_k, height, width)`` after ``update_scene(data_k, camera_k,
    scene_option)`` and ``render()`` -- see docs/python-api.md ("BatchRenderer") for the measured cases.
    """

    # Exact tiling copies each env's samples into a multisampled sheet and resolves all tiles at once where GL 4.3's
    # glCopyImageSubData is there (_tiles.TileSheet); False: a resolve blit per env. The same pixels either way
    # (tests/test_mujoco_batch.py compares them); a class attribute so that tests and tools/mujoco_tile_profile.py
    # can time and compare both.
    _sample_copy = True

    def __init__(self, model, n: int, height: int = 84, width: int = 84, *, camera=-1, depth: bool = False,
                 segmentation: bool = False, backend: str = "auto", cuda_device=None, max_geom: int = 10000,
                 scene_option=None, render_flags=None, tiling: str = "exact"):
        mj = _require_mujoco()
        import torch

        self._mj = mj
        self._torch = torch
        self._closed = True  # until everything below exists
        self._glc = None
        self._con = None
        self._reader = None
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise gltensor.InvalidArgumentError(
                f"BatchRenderer: n must be a positive int (the number of envs), got {n!r}")
        for label, v in (("height", height), ("width", width)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise gltensor.InvalidArgumentError(f"BatchRenderer: {label} must be a positive int, got {v!r}")
        if depth and segmentation:
            raise gltensor.InvalidArgumentError("BatchRenderer: depth=True and segmentation=True cannot both be on "
                                                "(as mujoco.Renderer); make two BatchRenderers")
        self._n, self._h, self._w = int(n), int(height), int(width)
        self._depth, self._seg = bool(depth), bool(segmentation)

        # -- models
        if isinstance(model, (list, tuple)):
            if len(model) != self._n:
                raise gltensor.InvalidArgumentError(
                    f"BatchRenderer: {len(model)} models for n={self._n} envs; pass one model (shared) or n models")
            models = [as_model(mj, m, f"model[{k}]") for k, m in enumerate(model)]
        else:
            models = [as_model(mj, model, "model")] * self._n
        ref = models[0]
        for k, m in enumerate(models):
            if m is ref:
                continue
            field = context_mismatch(mj, ref, m)
            if field is not None:
                raise gltensor.InvalidArgumentError(
                    f"BatchRenderer: env {k}'s model differs from env 0's in {field}, which MuJoCo uploads once per "
                    "MjrContext (meshes, textures, height fields, planes, vis.global/quality/map, stat.extent); "
                    "randomise only what mjv_updateScene reads (colours, sizes, lights, cameras), or use one "
                    "BatchRenderer per group of equal models")
        self._models = models
        self._shared_model = all(m is ref for m in models)

        # -- scenes: one per group of models with the same buffer sizes (mjv_updateScene fills it, mjr_render
        #    draws it right away, so envs can take turns in one scene)
        self._scenes: dict = {}
        self._scene_of = []
        for m in models:
            key = scene_key(m)
            if key not in self._scenes:
                self._scenes[key] = mj.MjvScene(m, maxgeom=int(max_geom))
            self._scene_of.append(self._scenes[key])
        for flag, value in dict(render_flags or {}).items():
            index = render_flag(mj, flag)
            for scene in self._scenes.values():
                scene.flags[index] = bool(value)
        self._option = scene_option if scene_option is not None else mj.MjvOption()
        self._cameras = self._resolve_cameras(camera, "camera")

        # -- one GL context, one MjrContext, one sheet of rows x cols tiles
        if tiling not in ("exact", "viewport"):
            raise gltensor.InvalidArgumentError(f"BatchRenderer: tiling must be 'exact' or 'viewport', got {tiling!r}")
        self._tiling = tiling
        glc_cls = _gl_context_class(mj)
        kept = _ContextKept(None)  # what is current now: creating MuJoCo's EGL context releases it
        kept.save()
        self._glc = glc_cls(self._w, self._h)
        kept._glc = self._glc
        self._sheet = None
        self._own_context = None
        try:
            kept.__enter__()
            own = _core._save_gl_context()
            if own[0] == _WINDOW_SYSTEM_EGL:  # else (GLX, OSMesa): MuJoCo's own make_current each time
                self._own_context = own
            limits = max_sizes()
            grid = grid_shape(self._n, self._h, self._w, limits[0], limits[1])
            if grid is None:
                raise gltensor.InvalidArgumentError(
                    f"BatchRenderer: {self._n} tiles of {self._w}x{self._h} do not fit one renderbuffer of this GL "
                    f"context (GL_MAX_RENDERBUFFER_SIZE / GL_MAX_VIEWPORT_DIMS: {limits[0]}x{limits[1]}); use "
                    "several BatchRenderers with fewer envs each")
            self._rows, self._cols = grid
            sheet_w, sheet_h = self._cols * self._w, self._rows * self._h
            if tiling == "viewport":
                # Every env drawn into its own viewport of one big multisampled buffer, resolved once.
                off = (sheet_w, sheet_h)
            else:
                # Every env drawn at (0, 0) of a buffer of the model's own offscreen size, as mujoco.Renderer
                # draws it, then resolved into its tile of the sheet (see _tiles for why).
                off = (max(int(ref.vis.global_.offwidth), self._w), max(int(ref.vis.global_.offheight), self._h))
            ctx_model = ref
            if off != (int(ref.vis.global_.offwidth), int(ref.vis.global_.offheight)):
                ctx_model = copy.copy(ref)  # only the copy's offscreen size changes; the envs' models stay as given
                ctx_model.vis.global_.offwidth, ctx_model.vis.global_.offheight = off
            self._con = mj.MjrContext(ctx_model, mj.mjtFontScale.mjFONTSCALE_150.value)
            mj.mjr_setBuffer(mj.mjtFramebuffer.mjFB_OFFSCREEN.value, self._con)
            con = self._con
            if not con.offFBO:
                raise gltensor.InvalidArgumentError("MjrContext has no offscreen framebuffer (offFBO is 0)")
            if (con.offWidth, con.offHeight) != off:
                raise gltensor.InvalidArgumentError(
                    f"MjrContext made a {con.offWidth}x{con.offHeight} offscreen buffer, not the {off[0]}x{off[1]} "
                    "asked for")
            if tiling == "viewport":
                source = con.offDepthStencil if self._depth else con.offColor
            else:
                self._sheet = TileSheet(sheet_w, sheet_h, self._depth,
                                        like=con.offDepthStencil if self._depth else con.offColor,
                                        sample_copy=self._sample_copy)
                source = self._sheet.rb
            if self._depth:
                # Depth cannot go through an Atlas: read the grid as one depth image, split tiles in torch.
                self._reader = gltensor.Capture(source, gltensor.GL_RENDERBUFFER, backend=backend,
                                                cuda_device=cuda_device, region=(0, 0, sheet_w, sheet_h))
            else:
                self._reader = gltensor.Atlas(source, gltensor.GL_RENDERBUFFER, tiles=(self._rows, self._cols),
                                              tile_size=(self._h, self._w), count=self._n, backend=backend,
                                              cuda_device=cuda_device, region=(0, 0, sheet_w, sheet_h))
        except BaseException:
            try:
                self._free_gl()
            finally:
                kept.__exit__(None, None, None)  # the caller's context back, garbage collection on again
            raise
        kept.__exit__(None, None, None)
        # Height fields: the context holds ctx_model's (= env 0's at construction); _follow_height_fields uploads
        # an env's own before it is drawn when its data differs (one comparison of the data per env and render).
        self._hfields = [(h, int(ref.hfield_adr[h]), int(ref.hfield_nrow[h]) * int(ref.hfield_ncol[h]))
                         for h in range(int(ref.nhfield))]
        self._hfield_held = [np.array(ref.hfield_data[a:a + c]) for _, a, c in self._hfields]
        self._origin = mj.MjrRect(0, 0, self._w, self._h)
        # Tile k: row k // cols from the top, column k % cols; GL's y grows upwards.
        self._rects = []
        for k in range(self._n):
            r, c = divmod(k, self._cols)
            self._rects.append(mj.MjrRect(c * self._w, (self._rows - 1 - r) * self._h, self._w, self._h))
        self._closed = False
        self._rendered = False
        self._linear = None  # per env (orthographic, a, b) of the last depth render
        self._seg_tables = None  # per env segid -> (objid, objtype) of the last segmentation render
        _close_at_exit(self)  # before MuJoCo's own atexit terminates its EGL display

    # ------------------------------------------------------------------ info
    @property
    def n(self) -> int:
        return self._n

    @property
    def height(self) -> int:
        return self._h

    @property
    def width(self) -> int:
        return self._w

    @property
    def depth(self) -> bool:
        return self._depth

    @property
    def segmentation(self) -> bool:
        return self._seg

    @property
    def backend(self) -> str:
        return self._reader.backend if self._reader is not None else "closed"

    @property
    def shape(self):
        if self._depth:
            return (self._n, self._h, self._w)
        if self._seg:
            return (self._n, self._h, self._w, 2)
        return (self._n, self._h, self._w, 3)

    @property
    def grid(self):
        """(rows, cols) of tiles in the offscreen buffer; tile k is row k // cols (from the top), col k % cols."""
        return (self._rows, self._cols)

    @property
    def viewports(self):
        """Tile k's (x, y, width, height) in the offscreen buffer (GL coordinates, lower-left origin)."""
        return [(r.left, r.bottom, r.width, r.height) for r in self._rects]

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def tiling(self) -> str:
        return self._tiling

    @property
    def scenes(self):
        """The MjvScene(s) the envs are drawn from (one per group of models with equal buffer sizes; one for a
        shared model). Their ``flags`` (mjtRndFlag: shadow, reflection, skybox, fog, haze...) apply to every
        env of the group, as ``renderer.scene.flags`` does to a mujoco.Renderer."""
        return tuple(self._scenes.values())

    @property
    def models(self):
        return tuple(self._models)

    @property
    def mjr_context(self):
        return self._con

    @property
    def gl_context(self):
        return self._glc

    # ------------------------------------------------------------------ cameras
    def _camera_for(self, k, model, cam, what):
        """An MjvCamera for env k as Renderer.update_scene(data, cam) makes it."""
        mj = self._mj
        if isinstance(cam, mj.MjvCamera):
            return cam
        if isinstance(cam, bool) or not isinstance(cam, (int, np.integer, str)):
            raise gltensor.InvalidArgumentError(
                f"{what} for env {k}: expected a camera id, a camera name, -1 (free camera) or a "
                f"mujoco.MjvCamera, got {type(cam).__name__}")
        cam_id = cam
        if isinstance(cam, str):
            cam_id = mj.mj_name2id(model, mj.mjtObj.mjOBJ_CAMERA.value, cam)
            if cam_id == -1:
                names = [mj.mj_id2name(model, mj.mjtObj.mjOBJ_CAMERA.value, i) for i in range(model.ncam)]
                raise gltensor.InvalidArgumentError(
                    f"{what} for env {k}: the camera {cam!r} does not exist in env {k}'s model (its cameras: "
                    f"{names}); pass a name from that list, an id, or -1 for the free camera")
        cam_id = int(cam_id)
        if cam_id < -1 or cam_id >= model.ncam:
            raise gltensor.InvalidArgumentError(
                f"{what} for env {k}: camera id {cam_id} is out of range [-1, {model.ncam}) of env {k}'s model")
        c = mj.MjvCamera()
        c.fixedcamid = cam_id
        if cam_id == -1:
            c.type = mj.mjtCamera.mjCAMERA_FREE
            mj.mjv_defaultFreeCamera(model, c)
        else:
            c.type = mj.mjtCamera.mjCAMERA_FIXED
        return c

    def _resolve_cameras(self, cameras, what):
        mj = self._mj
        if cameras is None:
            return self._cameras
        if isinstance(cameras, (str, int, np.integer, mj.MjvCamera)) and not isinstance(cameras, bool):
            if self._shared_model or isinstance(cameras, mj.MjvCamera):
                return [self._camera_for(0, self._models[0], cameras, what)] * self._n  # one camera, one model
            return [self._camera_for(k, self._models[k], cameras, what) for k in range(self._n)]
        try:
            seq = list(cameras)
        except TypeError:
            raise gltensor.InvalidArgumentError(
                f"{what}: expected None, one camera (id, name, -1 or MjvCamera) or a sequence of {self._n}, got "
                f"{type(cameras).__name__}") from None
        if len(seq) != self._n:
            raise gltensor.InvalidArgumentError(f"{what}: {len(seq)} cameras for {self._n} envs; pass one camera "
                                                f"for all or exactly {self._n}")
        return [self._camera_for(k, self._models[k], c, what) for k, c in enumerate(seq)]

    # ------------------------------------------------------------------ work
    def _check_open(self):
        if self._closed:
            raise gltensor.ClosedError("this BatchRenderer was closed; make a new one")

    def _datas(self, datas):
        mj = self._mj
        try:
            seq = list(datas)
        except TypeError:
            raise gltensor.InvalidArgumentError(
                f"render: datas must be a sequence of {self._n} mujoco.MjData (or dm_control Physics), got "
                f"{type(datas).__name__}") from None
        if len(seq) != self._n:
            raise gltensor.InvalidArgumentError(
                f"render: {len(seq)} datas for a BatchRenderer of n={self._n} envs; pass exactly {self._n}")
        out = []
        for k, obj in enumerate(seq):
            d = as_data(mj, obj, k)
            m = self._models[k]
            dm = getattr(d, "model", None)
            if dm is not None:
                same = dm is m or getattr(dm, "_address", None) == getattr(m, "_address", 0)
            else:  # no back reference (other bindings): the sizes mjv_updateScene indexes with must agree
                same = (d.qpos.shape[0] == m.nq and d.xpos.shape[0] == m.nbody and d.geom_xpos.shape[0] == m.ngeom
                        and d.cam_xpos.shape[0] == m.ncam and d.light_xpos.shape[0] == m.nlight)
            if not same:
                raise gltensor.InvalidArgumentError(
                    f"render: datas[{k}] was not made from env {k}'s model (the BatchRenderer's model"
                    f"{'' if self._shared_model else '[' + str(k) + ']'}); pass MjData(model) of that model")
            out.append(d)
        return out

    def render(self, datas, cameras=None, scene_option=None, *, order=None) -> None:
        """Draw env k's ``datas[k]`` from ``cameras[k]`` (default: the constructor's camera) into tile k.

        order: the env indices in the order to draw them, each exactly once (default ``range(n)``). It may be an
        iterator that blocks until an env is ready: :class:`gltensor.mujoco.MujocoVectorEnv` passes the
        indices as its physics thread finishes them, so drawing env k (``mjr_render`` releases the GIL) overlaps
        the physics of the next. An index out of range, repeated or missing raises ``InvalidArgumentError``; an
        exception the iterator raises propagates. Either way nothing is left readable: ``read()`` then raises
        ``NotRenderedError`` until a render completes."""
        self._check_open()
        with _ContextKept(self._glc, self._own_context):
            self._render_current(datas, cameras, scene_option, order)

    def _order(self, order):
        """The indices of `order`, checked one by one as they come (the iterator may block between them)."""
        n = self._n
        if order is None:
            yield from range(n)
            return
        seen = bytearray(n)
        count = 0
        for k in order:
            index = not isinstance(k, (bool, np.bool_)) and isinstance(k, (int, np.integer)) and 0 <= k < n
            if not index or seen[k]:
                why = "repeated" if index else "not an env index"
                raise gltensor.InvalidArgumentError(
                    f"render: order gave {k!r} ({why}); order must give each of 0..{n - 1} exactly once")
            seen[k] = 1
            count += 1
            yield int(k)
        if count != n:
            missing = [k for k in range(n) if not seen[k]][:8]
            raise gltensor.InvalidArgumentError(
                f"render: order gave {count} of the {n} env indices (missing e.g. {missing}); it must give each "
                "exactly once")

    def _render_current(self, datas, cameras, scene_option, order=None) -> None:
        """render() with our context current already (_ContextKept made it so; making it current again here cost a
        second eglMakeCurrent per call)."""
        mj = self._mj
        ds = self._datas(datas)
        cams = self._resolve_cameras(cameras, "render: cameras")
        option = scene_option if scene_option is not None else self._option
        self._rendered = False  # until every tile is drawn: a render cut short leaves nothing readable
        if not _gl().glIsFramebuffer(self._con.offFBO):
            raise gltensor.GLError(
                "BatchRenderer: its offscreen framebuffer was deleted by another MjrContext freed while this "
                "renderer's GL context was current (an MjrContext frees its GL names in whatever context is "
                "current, e.g. a closed Gymnasium MuJoCo viewer collected by the garbage collector); close such "
                "renderers and run gc.collect() while another context (or none) is current, then make a new "
                "BatchRenderer")
        mj.mjr_setBuffer(mj.mjtFramebuffer.mjFB_OFFSCREEN.value, self._con)  # a read may have bound another
        special = self._depth or self._seg
        sheet = self._sheet
        rect_x = [r.left for r in self._rects]
        rect_y = [r.bottom for r in self._rects]
        linear = [None] * self._n if self._depth else None
        tables = [None] * self._n if self._seg else None
        followed = None  # the model whose height fields the context holds, within this render
        copied = sheet is not None and sheet.samples_copied
        source_rb = self._con.offDepthStencil if self._depth else self._con.offColor
        for k in self._order(order):
            if self._hfields and self._models[k] is not followed:
                followed = self._models[k]
                self._follow_height_fields(followed)
            scene = self._scene_of[k]
            mj.mjv_updateScene(self._models[k], ds[k], option, None, cams[k], mj.mjtCatBit.mjCAT_ALL.value, scene)
            rect = self._rects[k] if sheet is None else self._origin
            if not special:
                mj.mjr_render(rect, scene, self._con)
                if copied:
                    sheet.copy_into(source_rb, self._w, self._h, rect_x[k], rect_y[k])
                elif sheet is not None:
                    sheet.resolve_into(self._con.offFBO, self._w, self._h, rect_x[k], rect_y[k])
                continue
            # As Renderer.render() in depth/segmentation mode: segmentation flags on for the draw, then restored.
            flags = scene.flags.copy()
            try:
                scene.flags[mj.mjtRndFlag.mjRND_SEGMENT] = True
                scene.flags[mj.mjtRndFlag.mjRND_IDCOLOR] = True
                mj.mjr_render(rect, scene, self._con)
            finally:
                np.copyto(scene.flags, flags)
            if copied:
                sheet.copy_into(source_rb, self._w, self._h, rect_x[k], rect_y[k])
            elif sheet is not None:
                sheet.resolve_into(self._con.offFBO, self._w, self._h, rect_x[k], rect_y[k])
            if self._depth:
                linear[k] = self._depth_coefficients(self._models[k], bool(scene.camera[0].orthographic))
            else:
                tables[k] = self._segment_table(scene)
        if copied:
            sheet.finish(self._con.offFBO)  # every tile resolved at once
        self._linear = linear
        self._seg_tables = tables
        self._rendered = True

    def _follow_height_fields(self, model):
        """Uploads model's height fields whose data differ from what the MjrContext holds (context current)."""
        data = model.hfield_data
        for j, (h, adr, count) in enumerate(self._hfields):
            now = data[adr:adr + count]
            if not np.array_equal(now, self._hfield_held[j]):
                self._mj.mjr_uploadHField(model, self._con, h)
                self._hfield_held[j] = np.array(now)

    @staticmethod
    def _depth_coefficients(model, orthographic):
        # Renderer.render()'s own arithmetic: planes and coefficients in float32, the conversion in float64.
        extent = model.stat.extent
        zfar = np.float32(model.vis.map.zfar * extent)
        znear = np.float32(model.vis.map.znear * extent)
        if orthographic:
            return True, float(zfar), float(zfar - znear)
        c_coef = -(zfar + znear) / (zfar - znear)
        d_coef = -(np.float32(2) * zfar * znear) / (zfar - znear)
        c_coef = np.float32(-0.5) * c_coef - np.float32(0.5)  # reversed Z
        d_coef = np.float32(-0.5) * d_coef
        return False, float(c_coef), float(d_coef)

    @staticmethod
    def _segment_table(scene):
        # Renderer.render()'s segmentation map: segid + 1 -> (objid, objtype); 0 (background) -> (-1, -1).
        ngeom = scene.ngeom
        table = np.full((ngeom + 1, 2), -1, dtype=np.int32)
        for g in scene.geoms[:ngeom]:
            if g.segid != -1:
                table[g.segid + 1] = (g.objid, g.objtype)
        return table

    def read(self, *, channels=None, dtype=None, layout="hwc", out=None, stream=None):
        """The last ``render()``'s tiles as one torch tensor: (n, H, W, 3) uint8 RGB by default (tile k = env k,
        top row first); depth: (n, H, W) float32; segmentation: (n, H, W, 2) int32. Read options as for
        :meth:`gltensor.Atlas.read` (colour); depth takes ``dtype`` float32/float16/bfloat16, ``layout="chw"``
        ((n, 1, H, W)) and ``out=``; segmentation takes ``out=``."""
        self._check_open()
        if not self._rendered:
            raise NotRenderedError("BatchRenderer.read() before render(): nothing has been drawn into the tiles yet; "
                                   "call render(datas) first (or render_and_read(datas))")
        with _ContextKept(self._glc, self._own_context):
            return self._read_current(channels, dtype, layout, out, stream)

    def _read_in_context(self, *, channels=None, dtype=None, layout="hwc", out=None, stream=None):
        return self._read_current(channels, dtype, layout, out, stream)

    def _read_current(self, channels, dtype, layout, out, stream):
        torch = self._torch
        if self._depth:
            return self._read_depth(channels, dtype, layout, out, stream)
        if self._seg:
            return self._read_segmentation(channels, dtype, layout, out, stream)
        frame = self._reader.read(channels="rgb" if channels is None else channels, dtype=dtype, layout=layout,
                                  out=out, stream=stream)
        return frame if out is not None else torch.from_dlpack(frame)

    def _tiles(self, image):
        """(rows*H, cols*W, ...) image, top row first -> (n, H, W, ...) tiles in env order (a copy)."""
        rows, cols, h, w = self._rows, self._cols, self._h, self._w
        rest = image.shape[2:]
        t = image.reshape(rows, h, cols, w, *rest).transpose(1, 2).reshape(rows * cols, h, w, *rest)
        return t[: self._n]

    def _with_stream(self, stream):
        torch = self._torch
        if stream is None or self.backend != "cuda":
            if stream is not None:
                raise gltensor.InvalidArgumentError("stream= is for the CUDA backend; this BatchRenderer reads on "
                                                    "the CPU backend")
            return _nullcontext()
        if isinstance(stream, int):
            stream = torch.cuda.ExternalStream(stream)
        elif not isinstance(stream, torch.cuda.Stream):
            handle = getattr(stream, "cuda_stream", None) or getattr(stream, "ptr", None)
            stream = torch.cuda.ExternalStream(int(handle))
        return torch.cuda.stream(stream)

    def _read_depth(self, channels, dtype, layout, out, stream):
        torch = self._torch
        if channels is not None:
            raise gltensor.InvalidArgumentError("read(channels=...) is for colour; a depth BatchRenderer reads one "
                                                "channel")
        lay = str(layout).lower()
        if lay not in ("hwc", "chw"):
            raise gltensor.InvalidArgumentError(f"read: layout must be 'hwc' or 'chw', got {layout!r}")
        tdtype = _torch_float_dtype(torch, dtype)
        raw = torch.from_dlpack(self._reader.read(stream=stream))[..., 0]  # (rows*H, cols*W) window depth
        with self._with_stream(stream):
            d = self._tiles(raw).double()
            orth = torch.tensor([o for o, _, _ in self._linear], dtype=torch.bool, device=d.device).view(-1, 1, 1)
            a = torch.tensor([x for _, x, _ in self._linear], dtype=torch.float64, device=d.device).view(-1, 1, 1)
            b = torch.tensor([x for _, _, x in self._linear], dtype=torch.float64, device=d.device).view(-1, 1, 1)
            res = torch.where(orth, a - d * b, b / (d + a)).float()
            if tdtype != torch.float32:
                res = res.to(tdtype)
            if lay == "chw":
                res = res.unsqueeze(1)
            return _into(res, out, "depth")

    def _read_segmentation(self, channels, dtype, layout, out, stream):
        torch = self._torch
        if channels is not None or dtype is not None or str(layout).lower() != "hwc":
            raise gltensor.InvalidArgumentError("read: a segmentation BatchRenderer gives (n, H, W, 2) int32 "
                                                "(object id, object type); channels/dtype/layout do not apply")
        rgb = torch.from_dlpack(self._reader.read(channels="rgb", stream=stream))
        with self._with_stream(stream):
            ids = rgb.to(torch.int64)
            segid = ids[..., 0] + ids[..., 1] * 256 + ids[..., 2] * 65536
            size = max(t.shape[0] for t in self._seg_tables)
            table = np.full((self._n, size, 2), -1, dtype=np.int32)
            for k, t in enumerate(self._seg_tables):
                table[k, : t.shape[0]] = t
            tab = torch.from_numpy(table).to(rgb.device).view(-1, 2)
            base = (torch.arange(self._n, device=rgb.device) * size).view(-1, 1, 1)
            res = tab[(segid.clamp_(0, size - 1) + base).view(-1)].view(self._n, self._h, self._w, 2)
            return _into(res, out, "segmentation")

    def render_and_read(self, datas, cameras=None, *, scene_option=None, order=None, **read_options):
        """``render(datas, cameras, scene_option, order=order)`` then ``read(**read_options)``."""
        self._check_open()
        with _ContextKept(self._glc, self._own_context):
            self._render_current(datas, cameras, scene_option, order)
            return self._read_in_context(**read_options)  # no second save/restore: ours is current here

    # ------------------------------------------------------------------ lifetime
    def _free_gl(self):
        with _CallersContextKept():  # the caller's context current again afterwards (glc.free() releases it)
            if self._glc is not None:
                self._glc.make_current()
            if self._reader is not None:
                self._reader.close()
                self._reader = None
            if getattr(self, "_sheet", None) is not None:
                self._sheet.close()
                self._sheet = None
            if self._con is not None:
                self._con.free()
                self._con = None
            if self._glc is not None:
                self._glc.free()
                self._glc = None

    def close(self) -> None:
        """Release the tiles' reader, the MjrContext and the GL context (idempotent). The context current before
        (the caller's, or none) is current after, as after every other call."""
        if self._closed:
            return
        self._closed = True
        self._free_gl()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        kind = "depth" if self._depth else ("segmentation" if self._seg else "rgb")
        state = "closed" if self._closed else self.backend
        sheet = getattr(self, "_sheet", None)  # None once closed
        way = ("viewport" if getattr(self, "_tiling", "exact") == "viewport" else "exact" if sheet is None else
               "exact, samples copied, one resolve" if sheet.samples_copied else "exact, a resolve per env")
        return (f"<gltensor.mujoco.BatchRenderer n={self._n} {kind} {self._h}x{self._w} "
                f"grid={self._rows}x{self._cols} tiling={way} {state}>" if hasattr(self, "_rows") else
                f"<gltensor.mujoco.BatchRenderer n={self._n} {kind} {state}>")


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _torch_float_dtype(torch, dtype):
    if dtype is None:
        return torch.float32
    table = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    if isinstance(dtype, torch.dtype) and dtype in table.values():
        return dtype
    name = getattr(dtype, "name", None) or str(dtype)
    name = name.replace("torch.", "")
    if name in table:
        return table[name]
    raise gltensor.InvalidArgumentError(f"read: a depth BatchRenderer reads float32 distances; dtype may be "
                                        f"float32, float16 or bfloat16, got {dtype!r}")


def _into(res, out, what):
    if out is None:
        return res.contiguous()
    if tuple(out.shape) != tuple(res.shape) or out.dtype != res.dtype or out.device != res.device:
        raise gltensor.InvalidArgumentError(
            f"read(out=): a {what} read gives {tuple(res.shape)} {res.dtype} on {res.device}; out= is "
            f"{tuple(out.shape)} {out.dtype} on {out.device}")
    out.copy_(res)
    return out
