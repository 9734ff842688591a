"""MuJoCo: what ``mujoco.Renderer`` drew, as a torch tensor, without ``mjr_readPixels``.

    import mujoco, gltensor.mujoco
    renderer = mujoco.Renderer(model, height=120, width=160)       # MUJOCO_GL=egl
    cap = gltensor.mujoco.RendererCapture(renderer)                  # depth=True for depth
    rgb = cap.render_and_read(data, camera="cam0")                   # (120, 160, 3) uint8, top row first

``mujoco.Renderer`` draws into the offscreen framebuffer of its ``MjrContext``: a multisampled colour
renderbuffer (``offColor``) and a multisampled DEPTH32F_STENCIL8 renderbuffer (``offDepthStencil``), both
``offWidth x offHeight`` (the model's ``<visual><global offwidth offheight>``), of which the renderer uses
the bottom-left ``width x height`` corner. ``Renderer.render()`` calls ``mjr_render`` and then
``mjr_readPixels`` (a blit-resolve into ``offFBO_r`` and ``glReadPixels`` into host memory) and flips the
rows. ``RendererCapture.render()`` calls only ``mjr_render``; ``read()`` hands the renderer's corner of the
multisampled renderbuffer (``region=(0, 0, width, height)``) to a :class:`gltensor.Capture`, which resolves
just that corner with the same GL_NEAREST blit and reads it upright (on the GPU with the CUDA backend), so
the result equals ``Renderer.render()`` pixel for pixel and no pixel outside the corner is copied. Depth
is read as window depth and converted exactly as ``Renderer`` does in its depth mode (MuJoCo renders with
reversed Z: 1 at the near plane, 0 at the far plane).

The GL context is the renderer's own (``renderer._gl_context``); this module makes it current in the
calling thread for every render and read, as ``Renderer.render()`` does.
"""

from __future__ import annotations

import numpy as np

import gltensor

from . import _gl_backend  # noqa: F401  (MUJOCO_GL=egl where there is no display, before mujoco is imported)

__all__ = ["RendererCapture", "BatchRenderer", "NotRenderedError"]


def _require_mujoco():
    try:
        import mujoco
    except ImportError as exc:  # pragma: no cover - exercised only without mujoco
        raise ImportError(
            "gltensor.mujoco needs MuJoCo's Python bindings: pip install mujoco "
            "(or pip install 'gltensor[mujoco]'); then create mujoco.Renderer with MUJOCO_GL=egl"
        ) from exc
    return mujoco


def _require_torch():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover
        raise ImportError("gltensor.mujoco returns torch tensors: pip install torch") from exc
    return torch


from .._adapter import NotRenderedError  # noqa: E402  (one class for every adapter; read() before render())


class RendererCapture:
    """Reads a ``mujoco.Renderer``'s offscreen buffer into torch.

    depth=False: ``read()`` gives (H, W, 3) uint8 RGB, equal to ``Renderer.render()``.
    depth=True:  ``read()`` gives (H, W) float32 distances, equal to ``Renderer.render()`` after
                 ``enable_depth_rendering()`` (rendered with the same segmentation flags it sets).
    backend / cuda_device: as for :class:`gltensor.Capture` ("auto" gives CUDA tensors when the
    renderer's EGL context runs on a CUDA device, else CPU tensors).

    Use: ``renderer.update_scene(data, camera)``, then ``cap.render()``, then ``cap.read()``; or
    ``cap.render_and_read(data, camera)``. ``read()`` before the first ``render()`` of this capture raises
    :class:`NotRenderedError` (the buffer may hold nothing or another camera's image). Each ``read()``
    returns a new tensor that later reads never overwrite. When the renderer is smaller than the model's
    offscreen buffer, only its bottom-left corner is resolved and read (a region of the capture).
    """

    def __init__(self, renderer, depth: bool = False, *, backend: str = "auto", cuda_device=None):
        self._mj = _require_mujoco()
        self._torch = _require_torch()
        con = getattr(renderer, "_mjr_context", None)
        glc = getattr(renderer, "_gl_context", None)
        if con is None or glc is None:
            raise gltensor.InvalidArgumentError(
                f"{type(renderer).__name__} has no open MjrContext and GL context (closed, or not the classic "
                "OpenGL mujoco.Renderer); create mujoco.Renderer with MUJOCO_GL=egl (or osmesa/glfw)"
            )
        if not con.offFBO:
            raise gltensor.InvalidArgumentError("the renderer's MjrContext has no offscreen framebuffer (offFBO is 0)")
        self._renderer = renderer
        self._con = con
        self._glc = glc
        self.depth = bool(depth)
        self.width, self.height = int(renderer.width), int(renderer.height)
        self._rect = self._mj.MjrRect(0, 0, self.width, self.height)
        self._rendered = False
        self._linear = None  # (orthographic, coefficients) of the last depth render
        glc.make_current()
        name = con.offDepthStencil if self.depth else con.offColor
        # mjr_render draws into the bottom-left width x height corner of the offscreen buffer: read that alone.
        self._cap = gltensor.Capture(name, gltensor.GL_RENDERBUFFER, backend=backend, cuda_device=cuda_device,
                                     region=(0, 0, self.width, self.height))

    # ------------------------------------------------------------------ info
    @property
    def renderer(self):
        return self._renderer

    @property
    def backend(self) -> str:
        return self._cap.backend

    @property
    def shape(self):
        return (self.height, self.width) if self.depth else (self.height, self.width, 3)

    @property
    def closed(self) -> bool:
        return self._cap.closed

    @property
    def capture(self) -> gltensor.Capture:
        """The underlying gltensor.Capture: the renderer's corner (``capture.region``) of the multisampled
        offscreen renderbuffer (``capture.image_size``)."""
        return self._cap

    # ------------------------------------------------------------------ work
    def _check_open(self):
        if self._cap.closed:
            raise gltensor.ClosedError("this RendererCapture was closed")
        if self._renderer._mjr_context is not self._con or self._renderer._gl_context is not self._glc:
            raise gltensor.ClosedError(
                "the mujoco.Renderer of this RendererCapture was closed; make a new Renderer and RendererCapture"
            )

    def render(self) -> None:
        """Draw the renderer's scene (as left by ``renderer.update_scene``) without reading it back."""
        self._check_open()
        mj = self._mj
        scene = self._renderer.scene
        self._glc.make_current()
        if not self.depth:
            mj.mjr_render(self._rect, scene, self._con)
        else:
            # As Renderer.render() in depth mode: segmentation flags on for the draw, then restored.
            flags = scene.flags.copy()
            try:
                scene.flags[mj.mjtRndFlag.mjRND_SEGMENT] = True
                scene.flags[mj.mjtRndFlag.mjRND_IDCOLOR] = True
                mj.mjr_render(self._rect, scene, self._con)
            finally:
                np.copyto(scene.flags, flags)
            self._linear = self._depth_coefficients(bool(scene.camera[0].orthographic))
        self._rendered = True

    def _depth_coefficients(self, orthographic):
        # Renderer.render()'s own arithmetic: planes and coefficients in float32, the conversion in float64.
        model = self._renderer.model
        extent = model.stat.extent
        zfar = np.float32(model.vis.map.zfar * extent)
        znear = np.float32(model.vis.map.znear * extent)
        if orthographic:
            return True, (float(zfar), float(zfar - znear))
        c_coef = -(zfar + znear) / (zfar - znear)
        d_coef = -(np.float32(2) * zfar * znear) / (zfar - znear)
        c_coef = np.float32(-0.5) * c_coef - np.float32(0.5)  # reversed Z
        d_coef = np.float32(-0.5) * d_coef
        return False, (float(c_coef), float(d_coef))

    def read(self, stream=None):
        """The last ``render()``'s image as a torch tensor (see the class docstring for shapes)."""
        self._check_open()
        if not self._rendered:
            raise NotRenderedError(
                "read() before render(): nothing of this capture's has been drawn into the renderer's offscreen "
                "buffer yet; call renderer.update_scene(data, camera) and cap.render() first (or "
                "cap.render_and_read(data, camera))"
            )
        torch = self._torch
        self._glc.make_current()
        if not self.depth:
            return torch.from_dlpack(self._cap.read(stream=stream, channels="rgb"))
        d = torch.from_dlpack(self._cap.read(stream=stream))[..., 0].double()
        orthographic, (a, b) = self._linear
        if orthographic:
            out = a - d * b
        else:
            out = b / (d + a)
        return out.float()

    def render_and_read(self, data, camera=-1, scene_option=None, stream=None):
        """``renderer.update_scene(data, camera, scene_option)``, ``render()``, ``read()``."""
        self._check_open()
        self._renderer.update_scene(data, camera=camera, scene_option=scene_option)
        self.render()
        return self.read(stream=stream)

    def close(self) -> None:
        """Release the GL/CUDA resources (idempotent). Close before ``renderer.close()`` to free them in GL;
        after it they went with the renderer's context and only host/CUDA memory is released."""
        if self._cap.closed:
            return
        if self._renderer._gl_context is self._glc and self._glc is not None:
            self._glc.make_current()
        self._cap.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else self.backend
        return f"<gltensor.mujoco.RendererCapture {'depth' if self.depth else 'rgb'} {self.height}x{self.width} {state}>"


