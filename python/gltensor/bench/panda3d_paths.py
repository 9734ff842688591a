"""The Panda3D paths: Panda3D's own ways of getting a camera's frame into torch, which gltensor is compared with.

  Panda3DCameras    the grid's "panda3d" path: N offscreen buffers copied to RAM each frame, getRamImage()
  ram_rgb           the panda3d mode's usual CPU path and reference: extractTextureData -> getRamImage()
  metadrive_recipe  the panda3d mode's MetaDrive image_on_cuda recipe (cuda-python + CuPy)
panda3d is imported inside the functions, so that the other modes run where it is not installed.
"""
import numpy as np

from .measure import Skip


def panda3d_available():
    """None when panda3d can be imported, else the reason it cannot."""
    try:
        import panda3d.core  # noqa: F401  (import check only)
    except ImportError as e:
        return "panda3d not installed (pip install panda3d): %s" % e
    except Exception as e:  # a broken install
        return "panda3d cannot be imported: %s: %s" % (type(e).__name__, e)
    return None


class Panda3DCameras:
    """N offscreen Panda3D buffers (FBOs hosted by one small buffer kept for the process, as a window hosts them
    in a ShowBase program), each rendering into a texture kept in RAM (RTMCopyRam), drawn the
    way the suite's "clears" draw does: a full clear and a clear of the bottom-left corner (display regions with
    clear colours), colours that change with the step and the camera. Panda3D runs its own GL context, made
    current before each Panda3D frame; the caller's is made current again by `restore` after it.

    transfer(): per camera tex.getRamImage() -> numpy -> torch.from_numpy -> .cuda(), then BGRA -> RGBA on
    the device (Panda3D keeps RAM images as BGRA). Rows bottom-up as Panda3D keeps them.
    reference(i): the exact picture of step i, computed from the clear colours (colours are multiples of
    1/255, so GL's float -> unorm8 conversion is exact)."""

    _engine = None  # one Panda3D graphics engine and pipe per process

    def __init__(self, n, w, h, torch, to_cuda, restore):
        from panda3d import core as p3
        self.p3, self.n, self.w, self.h, self.torch, self.to_cuda, self.restore = p3, n, w, h, torch, to_cuda, restore
        if Panda3DCameras._engine is None:
            p3.loadPrcFileData("gltensor-bench", "window-type offscreen\naudio-library-name null\n"
                                                 "load-display p3headlessgl\nsync-video false\n"
                                                 "notify-level-egldisplay error\n")  # see gltensor.panda3d.PRC
            pipe = p3.GraphicsPipeSelection.get_global_ptr().make_module_pipe("p3headlessgl")
            if pipe is None:
                pipe = p3.GraphicsPipeSelection.get_global_ptr().make_default_pipe()
            if pipe is None:
                raise Skip("panda3d: no graphics pipe (p3headlessgl) could be made")
            # One small buffer hosts the cameras' buffers for the whole process, as a ShowBase window hosts
            # makeTextureBuffer's: the cameras' buffers are FBOs of its GL context, made and removed per cell
            # while the context stays. (Standalone buffers, each with its own context, made after earlier ones
            # were removed, set off GL errors in Panda3D on NVIDIA.)
            engine = p3.GraphicsEngine.get_global_ptr()
            hfbp = p3.FrameBufferProperties()
            hfbp.set_rgba_bits(8, 8, 8, 8)
            host = engine.make_output(pipe, "gltensor-bench-host", -100, hfbp, p3.WindowProperties.size(16, 16),
                                      p3.GraphicsPipe.BF_refuse_window)
            if host is None:
                raise Skip("panda3d: could not make an offscreen host buffer")
            engine.open_windows()
            Panda3DCameras._engine = (engine, pipe, host)
        self.engine, self.pipe, self.host = Panda3DCameras._engine
        import warnings  # the RAM image is read-only; torch only reads it (then copies it with .cuda())
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        self.buffers, self.textures, self.regions, self.panda_gl = [], [], [], None
        fbp = p3.FrameBufferProperties()
        fbp.set_rgba_bits(8, 8, 8, 8)
        fbp.set_depth_bits(0)
        props = p3.WindowProperties.size(w, h)
        flags = p3.GraphicsPipe.BF_refuse_window | p3.GraphicsPipe.BF_refuse_parasite
        self.render_np = p3.NodePath("gltensor-bench-empty")
        try:
            for k in range(n):
                buf = self.engine.make_output(self.pipe, "gltensor-bench-%d" % k, 0, fbp, props, flags,
                                              self.host.get_gsg(), self.host)
                if buf is None:
                    raise Skip("panda3d: could not make an offscreen buffer of %dx%d" % (w, h))
                tex = p3.Texture("cam%d" % k)
                buf.add_render_texture(tex, p3.GraphicsOutput.RTM_copy_ram)
                buf.set_clear_color_active(True)
                full = buf.get_display_region(0) if buf.get_num_display_regions() else buf.make_display_region()
                corner = buf.make_display_region(0, 0.5, 0, 0.25)
                for dr in (full, corner):
                    cam = p3.Camera("cam%d" % k)
                    dr.set_camera(self.render_np.attach_new_node(cam))
                    dr.set_clear_color_active(True)
                self.buffers.append(buf)
                self.textures.append(tex)
                self.regions.append((full, corner))
            self.engine.open_windows()
            # Panda3D's context is current after a frame (each buffer's begin_frame makes it current). It is
            # made current again before each later frame: Panda issues some GL calls outside begin_frame (frame
            # start), which would otherwise land in the suite's context (NVIDIA then reports GL errors).
            self.engine.render_frame()
            from gltensor.panda3d import _GLState
            self.panda_gl = _GLState.current()
            self.restore()
            mine = _GLState.current()
            if self.panda_gl is not None and mine is not None and self.panda_gl.handles[3] == mine.handles[3]:
                self.panda_gl = None  # Panda3D drew in the suite's context: nothing to switch to
        except Exception:
            self.close()
            raise
        self.corner_px = None

    def _colours(self, i, k):
        r = (i + k) % 256
        return (r, 64, (37 * k) % 256, 255), (255 - r, 204, 26, 255)

    def draw(self, i):
        p3 = self.p3
        for k, (full, corner) in enumerate(self.regions):
            c1, c2 = self._colours(i, k)
            self.buffers[k].set_clear_color(p3.LColor(*(c / 255.0 for c in c1)))
            full.set_clear_color(p3.LColor(*(c / 255.0 for c in c1)))
            corner.set_clear_color(p3.LColor(*(c / 255.0 for c in c2)))
        if self.panda_gl is not None:
            self.panda_gl.make_current()
        self.engine.render_frame()
        self.restore()

    def transfer(self):
        torch = self.torch
        frames = []
        for tex in self.textures:
            img = tex.get_ram_image()
            c = tex.get_num_components()
            x = torch.from_numpy(np.frombuffer(memoryview(img), np.uint8).reshape(self.h, self.w, c))
            frames.append(x.cuda() if self.to_cuda else x)
        x = torch.stack(frames) if len(frames) > 1 else frames[0].unsqueeze(0)
        return x[..., [2, 1, 0, 3]] if x.shape[-1] == 4 else x[..., [2, 1, 0]]

    def reference(self, i):
        """(N, H, W, 4) RGBA, bottom-up rows, of step i."""
        out = np.empty((self.n, self.h, self.w, 4), np.uint8)
        for k, (full, corner) in enumerate(self.regions):
            c1, c2 = self._colours(i, k)
            out[k] = c1
            # The corner region's left and bottom are 0; rows here are bottom-up like Panda3D's RAM image.
            cw, ch = corner.get_pixel_width(), corner.get_pixel_height()
            out[k, :ch, :cw] = c2
        return out

    def close(self):
        for buf in self.buffers:
            buf.clear_render_textures()
            self.engine.remove_window(buf)
        self.buffers, self.textures, self.regions = [], [], []
        try:
            if self.panda_gl is not None:
                self.panda_gl.make_current()
            self.engine.render_frame()  # lets Panda3D release the buffers' GL objects
        except Exception:
            pass
        self.restore()


def ram_rgb(base, tex, to_cuda, torch):
    """The usual CPU path, and the reference: RGB uint8, top row first, padding cropped."""
    from gltensor.panda3d import image_size
    base.graphicsEngine.extractTextureData(tex, base.win.getGsg())
    w, h = image_size(tex)
    a = np.frombuffer(tex.getRamImage(), np.uint8).reshape(tex.getYSize(), tex.getXSize(), -1)
    x = torch.from_numpy(np.ascontiguousarray(a[:h, :w][::-1, :, [2, 1, 0]]))
    return x.cuda() if to_cuda else x


def metadrive_recipe(textures, gsg, torch):
    """MetaDrive's BaseCamera image_on_cuda code path, per camera. Returns (transfer, close); raises Skip."""
    try:
        import cupy as cp
        from cuda.bindings import runtime as cudart
    except ImportError as e:
        raise Skip("needs cuda-python (cuda.bindings) and CuPy: %s" % e)
    from gltensor import panda3d as gp

    def check(result, call):
        err = result[0] if isinstance(result, tuple) else result
        if err != cudart.cudaError_t.cudaSuccess:
            raise Skip("%s failed: %s" % (call, err))
        if not isinstance(result, tuple) or len(result) == 1:
            return None
        return result[1] if len(result) == 2 else result[1:]

    flags = cudart.cudaGraphicsRegisterFlags.cudaGraphicsRegisterFlagsReadOnly
    cams = []
    for tex in textures:
        res = check(cudart.cudaGraphicsGLRegisterImage(gp.native_id(tex, gsg), 0x0DE1, flags),
                    "cudaGraphicsGLRegisterImage")
        X, Y = tex.getXSize(), tex.getYSize()
        ptr = check(cudart.cudaMalloc(X * Y * 4), "cudaMalloc")
        arr = cp.ndarray((Y, X, 4), cp.uint8, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr, X * Y * 4, None), 0))
        cams.append((res, ptr, arr, gp.image_size(tex)))
    d2d = cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice

    def one(res, ptr, arr, size):
        check(cudart.cudaGraphicsMapResources(1, res, 0), "cudaGraphicsMapResources")
        array = check(cudart.cudaGraphicsSubResourceGetMappedArray(res, 0, 0), "cudaGraphicsSubResourceGetMappedArray")
        _, extent, _ = check(cudart.cudaArrayGetInfo(array), "cudaArrayGetInfo")
        check(cudart.cudaMemcpy2DFromArray(ptr, extent.width * 4, array, 0, 0, extent.width * 4, extent.height, d2d),
              "cudaMemcpy2DFromArray")
        check(cudart.cudaGraphicsUnmapResources(1, res, 0), "cudaGraphicsUnmapResources")
        w, h = size
        return arr[:h, :w][..., :3][..., ::-1][::-1].astype(cp.uint8, copy=False, order="C")

    def transfer():
        imgs = [one(*c) for c in cams]
        return torch.from_dlpack(imgs[0] if len(imgs) == 1 else cp.stack(imgs))

    def close():
        cp.cuda.Device().synchronize()
        for res, ptr, _, _ in cams:
            cudart.cudaGraphicsUnregisterResource(res)
            cudart.cudaFree(ptr)

    return transfer, close
