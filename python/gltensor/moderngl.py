"""gltensor for moderngl: capture moderngl textures, renderbuffers and framebuffers.

    import gltensor.moderngl as gm, torch

    gl_ctx, ctx = gm.headless_context()             # moderngl context on the CUDA device's EGL context
    color = ctx.texture((W, H), 4)
    depth = ctx.depth_renderbuffer((W, H))
    fbo = ctx.framebuffer([color], depth)
    cap = gm.capture(fbo)                           # colour attachment 0 (GL_TEXTURE_2D, color.glo)
    for step in range(n):
        fbo.use(); fbo.clear(); vao.render()
        obs = torch.from_dlpack(cap.read())         # (H, W, 4) uint8, top row first

moderngl is imported only inside these functions, so `import gltensor.moderngl` works without it;
using a function without moderngl installed raises ImportError naming `pip install moderngl`
(or `pip install gltensor[moderngl]`).

What moderngl object maps to which GL image:

    moderngl.Texture                  -> Texture.glo, GL_TEXTURE_2D
                                         (GL_TEXTURE_2D_MULTISAMPLE when samples > 0; depth textures too)
    moderngl.Renderbuffer             -> Renderbuffer.glo, GL_RENDERBUFFER (colour or depth, any samples)
    moderngl.Framebuffer              -> one of its attachments: attachment=i (default 0) is
                                         color_attachments[i]; attachment="depth" (or -1, as in
                                         Framebuffer.read) is depth_attachment

The captures live in the GL context current in the calling thread, which must be the one the moderngl
objects belong to (moderngl's own context when it owns one: call ``ctx`` methods / ``fbo.use()`` in this
thread, or make the gltensor context current when moderngl was attached to it).

Rows: gltensor's ``read()`` gives the top row first (``flip=False`` for GL's bottom-up order), whereas
``Framebuffer.read()`` / ``Texture.read()`` return GL's bottom-up rows, each padded to ``alignment``
(default 1) bytes.
"""

__all__ = ["capture", "batch", "headless_context", "attach", "resolve"]

_INSTALL_HINT = "pip install moderngl (or pip install 'gltensor[moderngl]')"


def _moderngl():
    try:
        import moderngl
    except ImportError as exc:  # pragma: no cover - exercised only without moderngl
        raise ImportError(
            f"gltensor.moderngl needs the moderngl package, which cannot be imported ({exc}); "
            f"install it with: {_INSTALL_HINT}"
        ) from exc
    return moderngl


def _gltensor():
    import gltensor

    return gltensor


def resolve(obj, attachment=None):
    """(gl_name, gl_target) of a moderngl Texture, Renderbuffer or Framebuffer attachment.

    attachment: for a Framebuffer, the index of a colour attachment (default 0), or "depth" / -1 for its
    depth attachment; must be None for textures and renderbuffers. Raises TypeError for objects that
    cannot be captured (TextureArray, TextureCube, Texture3D, ...) and ValueError for a missing
    attachment or a released object.
    """
    mgl = _moderngl()
    gt = _gltensor()
    if isinstance(obj, mgl.Framebuffer):
        if type(getattr(obj, "mglo", None)).__name__ == "InvalidObject":
            raise ValueError("the moderngl Framebuffer was released")
        if attachment is None:
            attachment = 0
        if attachment == "depth" or (isinstance(attachment, int) and attachment == -1):
            image = obj.depth_attachment
            if image is None:
                raise ValueError("this moderngl Framebuffer has no depth attachment")
        elif isinstance(attachment, int) and not isinstance(attachment, bool) and attachment >= 0:
            colors = tuple(obj.color_attachments or ())
            if attachment >= len(colors):
                if not colors:
                    raise ValueError(
                        "this moderngl Framebuffer has no colour attachments (the default framebuffer, "
                        "ctx.screen / ctx.detect_framebuffer(), cannot be captured): render into a "
                        "framebuffer made with ctx.framebuffer([texture or renderbuffer], ...)")
                raise ValueError(f"attachment={attachment}: this Framebuffer has {len(colors)} colour attachment(s)")
            image = colors[attachment]
        else:
            raise ValueError(f"attachment must be a colour attachment index >= 0, 'depth' or -1, got {attachment!r}")
        return resolve(image)
    if attachment is not None:
        raise TypeError("attachment= is only for moderngl.Framebuffer objects")
    if isinstance(obj, mgl.Texture):
        target = gt.GL_TEXTURE_2D_MULTISAMPLE if getattr(obj, "samples", 0) else gt.GL_TEXTURE_2D
    elif isinstance(obj, mgl.Renderbuffer):
        target = gt.GL_RENDERBUFFER
    else:
        raise TypeError(
            f"cannot capture a {type(obj).__module__}.{type(obj).__qualname__}: gltensor.moderngl takes "
            "moderngl.Texture (2D, single- or multisampled), moderngl.Renderbuffer or moderngl.Framebuffer; "
            "for array, cube or 3D textures render into a 2D texture")
    name = int(getattr(obj, "glo", 0) or 0)
    if name <= 0 or type(getattr(obj, "mglo", None)).__name__ == "InvalidObject":  # released: glo is stale
        raise ValueError(f"the moderngl {type(obj).__name__} has no GL object (glo={name}): was it released?")
    return name, target


def capture(obj, attachment=None, **kwargs):
    """gltensor.Capture of a moderngl Texture, Renderbuffer or Framebuffer attachment.

    obj: moderngl.Texture (GL_TEXTURE_2D, or GL_TEXTURE_2D_MULTISAMPLE when it has samples; colour or
         depth), moderngl.Renderbuffer (GL_RENDERBUFFER), or moderngl.Framebuffer (then `attachment`
         picks the image: colour index, default 0, or "depth" / -1).
    kwargs: passed to gltensor.Capture (backend=, cuda_device=, resizable=, region=). region=(x, y, w, h)
         reads only that rectangle (lower-left origin, e.g. one viewport). Pass resizable=True when the
         program may re-create the texture's storage under the same GL name (NVIDIA refuses to
         reallocate a texture registered with CUDA); a new moderngl object has a new name and needs a
         new capture.
    Needs the GL context that owns obj to be current in this thread. Depth images read as float32
    (H, W, 1); multisampled images are resolved in GL at each read.
    """
    name, target = resolve(obj, attachment)
    return _gltensor().Capture(name, target, **kwargs)


def batch(objs, attachment=None, **kwargs):
    """gltensor.Batch of several moderngl images (e.g. one framebuffer per camera): one handoff per read.

    objs: moderngl Textures, Renderbuffers, Framebuffers (`attachment` applies to each Framebuffer) or
          existing gltensor.Capture objects, all in the current GL context.
    kwargs: passed to gltensor.Batch (backend=, cuda_device=, resizable=, region= or regions=). batch.read()
          needs equal (region) sizes and formats ((N, H, W, C)); batch.read_list() takes any mix.
    When the images have different GL targets (e.g. textures and renderbuffers), their captures are
    made here (with the same backend/cuda_device) and closed when the batch is closed or collected.
    """
    gt = _gltensor()
    objs = list(objs)
    if not objs:
        # let gltensor.Batch report it with its own error
        return gt.Batch([], **kwargs)
    sources, targets = [], set()
    for o in objs:
        if isinstance(o, gt.Capture):
            sources.append(o)
            continue
        name, target = resolve(o, attachment if _is_framebuffer(o) else None)
        sources.append((name, target))
        targets.add(target)
    plain = [s for s in sources if isinstance(s, tuple)]
    if len(targets) <= 1 and len(plain) == len(sources):
        target = targets.pop() if targets else gt.GL_TEXTURE_2D
        return gt.Batch([n for n, _ in plain], target, **kwargs)
    # The captures made here take the options gltensor.Batch would give the images it makes itself: the
    # batch's region (or each source's entry of regions), while Capture objects keep their own.
    cap_kwargs = {k: v for k, v in kwargs.items() if k in ("backend", "cuda_device", "resizable")}
    region, regions = kwargs.get("region"), kwargs.get("regions")
    per_source = [region] * len(sources)
    if regions is not None and region is None and len(regions) == len(sources):
        per_source = list(regions)
        # gltensor.Batch refuses a region for a Capture given by the caller; the ones made here took theirs
        kwargs = dict(kwargs, regions=[r if isinstance(s, gt.Capture) else None for s, r in zip(sources, per_source)])
    made = []
    try:
        for s, r in zip(sources, per_source):
            made.append(s if isinstance(s, gt.Capture) else gt.Capture(s[0], s[1], region=r, **cap_kwargs))
        return gt.Batch(made, **kwargs)
    except BaseException:
        for c, s in zip(made, sources):
            if c is not s:
                c.close()
        raise


def _is_framebuffer(obj):
    return isinstance(obj, _moderngl().Framebuffer)


def headless_context(cuda_device=0, software=None):
    """(gl_ctx, mgl_ctx): a gltensor headless EGL context and a moderngl context attached to it.

    gl_ctx = gltensor.Context.headless(cuda_device, software=software): OpenGL 4.5 core on the EGL
    device that is CUDA device `cuda_device` (Mesa's software renderer when there is no NVIDIA GPU,
    unless software=False), made current in this thread. mgl_ctx = attach() renders into that same
    context, so what moderngl draws is on the
    CUDA device that gltensor copies to and captures need no cross-device copy (see attach()).

    Close in reverse order: mgl_ctx.release() (releases moderngl's objects only, not the GL context),
    then gl_ctx.close(). Keep gl_ctx current in the thread that uses mgl_ctx (gl_ctx.make_current()).
    """
    mgl = _moderngl()
    gl_ctx = _gltensor().Context.headless(cuda_device, software=software)
    try:
        mgl_ctx = attach(mgl)
    except BaseException:
        gl_ctx.close()
        raise
    return gl_ctx, mgl_ctx


def attach(mgl=None):
    """A new moderngl context for the GL context current in this thread (e.g. a gltensor.Context).

    moderngl.init_context() (moderngl >= 5.9) loads GL through eglGetProcAddress when an EGL context
    is current and makes a fresh moderngl.Context each call. moderngl.create_context(standalone=False)
    instead returns moderngl's cached default context once one exists, which may belong to another GL
    context; it is used only on older moderngl.
    """
    mgl = mgl or _moderngl()
    if hasattr(mgl, "init_context") and hasattr(mgl, "get_context"):
        mgl.init_context()  # returns None; it installs the new context as moderngl's default
        return mgl.get_context()
    return mgl.create_context(standalone=False)
