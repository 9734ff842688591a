"""What the suite (mode grid) runs and judges: its paths in table order, its default cells, its headline targets."""

# key, short label (table, plot), what one step does after rendering
PATHS = [
    ("render", "render only",
     "the N cameras drawn, nothing handed over: the floor under every other path"),
    ("cpu", "CPU round trip, lean (Python)",
     "glReadPixels (PyOpenGL) per camera into one new numpy batch -> torch.from_numpy(...).cuda(); GL's rows "
     "(no flip): the strongest Python CPU baseline"),
    ("cpu_usual", "CPU round trip as usually written",
     "glReadPixels (PyOpenGL) returning a new buffer per camera -> np.flipud -> np.ascontiguousarray -> "
     "torch.from_numpy(np.stack(...)).cuda() (no np.stack for one camera); upright, the image gltensor gives"),
    ("cpu_pinned", "CPU round trip, pinned PBO",
     "glReadPixels per camera into one GL_PIXEL_PACK_BUFFER -> glMapBufferRange -> memcpy into a pinned torch "
     "tensor (two alternating, event-guarded) -> .cuda(non_blocking=True); GL's rows"),
    ("cuda_python", "cuda-python recipe",
     "each texture registered once; per camera per step cudaGraphicsMapResources, SubResourceGetMappedArray, "
     "cudaMemcpy2DFromArrayAsync into slice k of a torch batch, Unmap, on torch's stream; GL's rows"),
    ("panda3d", "Panda3D getRamImage()",
     "Panda3D offscreen buffers (RTMCopyRam) -> tex.getRamImage() per camera -> numpy -> torch.cuda(), BGRA->RGBA "
     "on the device; Panda3D's own GL context"),
    ("single", "gltensor single",
     "1 camera: torch.from_dlpack(cap.read()); N cameras: cap.read(out=batch[k], stream=torch's) per camera; "
     "flipped in the copy"),
    ("batch", "gltensor Batch",
     "torch.from_dlpack(Batch.read()): one map of all N textures, one kernel; flipped in the copy (N >= 2)"),
    ("atlas", "gltensor Atlas",
     "cameras drawn into the tiles of one texture, torch.from_dlpack(Atlas.read()): one map, one kernel (N >= 2)"),
    ("fused", "gltensor fused conversion",
     "read(channels='rgb', dtype='float32', layout='chw') of the Capture (1 camera) or the Batch (N): flip, "
     "RGB, /255, CHW in the one copy pass"),
]
PATH_KEYS = [k for k, _, _ in PATHS]
LABEL = {k: label for k, label, _ in PATHS}
DESCRIPTION = {k: d for k, _, d in PATHS}
MULTI_ONLY = {"batch", "atlas"}

FULL_SIZES = "84,128,256,512,1024,1920x1080,3840x2160"
FULL_CAMERAS = "1,16,64,256"
QUICK_CELLS = [(1, 84, 84), (1, 256, 256), (1, 1024, 1024), (16, 128, 128), (64, 128, 128), (256, 84, 84)]

# The single-camera target is judged against the Python CPU round trip as simulator code writes it (same
# upright image as gltensor's); the same ratio against the lean trip (no flip, GL's rows) is listed beside it.
HEADLINES = [
    {"name": "1024² single vs Python CPU round trip (as usually written)", "cameras": 1, "size": (1024, 1024),
     "path": "single", "baseline": "cpu_usual", "target": 8.0},
    {"name": "1024² single vs lean Python CPU round trip (no flip)", "cameras": 1, "size": (1024, 1024),
     "path": "single", "baseline": "cpu", "target": 8.0},
    {"name": "64×128² batch vs cuda-python recipe", "cameras": 64, "size": (128, 128), "path": "batch",
     "baseline": "cuda_python", "target": 10.0},
    {"name": "256×84² atlas vs cuda-python recipe", "cameras": 256, "size": (84, 84), "path": "atlas",
     "baseline": "cuda_python", "target": 25.0},
]


def size_label(w, h):
    return "%d²" % w if w == h else "%dx%d" % (w, h)


def cell_label(n, w, h):
    return "%d × %s" % (n, size_label(w, h))


