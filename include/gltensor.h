/*
 * gltensor.h: hand what OpenGL rendered to CUDA (or host memory) without a
 * trip through the CPU, as linear buffers that tensor libraries can wrap.
 *
 * Usable from C and C++; needs no OpenGL, EGL or CUDA headers. GL and EGL are
 * loaded at run time, and the calls below work with whatever GL context is
 * current in the calling thread (EGL or GLX).
 *
 * Conventions:
 *   - every object is opaque and has a create/destroy pair; destroy(NULL) is a no-op;
 *   - every fallible call returns a glt_status; glt_last_error() then gives a
 *     sentence for the calling thread that names the failed call, the object and
 *     what to do;
 *   - CUDA streams and pointers travel as void* so that this header needs no CUDA.
 *
 * Struct sizes (binary compatibility): every *_desc, *_options and *_info struct starts with `size_t size`, so
 * that a later release can add fields at the end without breaking programs built against this header.
 *   - Structs the caller fills (*_desc, *_options): size 0 means the layout of this release (0.2) and stays so in
 *     every later release, so `= {0}`, memset and the *_init functions keep working; otherwise size must be
 *     sizeof the struct of a release the library knows: sizeof as in this header is always accepted; a larger size
 *     (a program built against a newer gltensor.h) is accepted when every byte past this library's struct is zero
 *     (fields a later release adds default to zero and mean "as before"), and refused when one is set (the
 *     program asks for something this library cannot do). Any other size (smaller than a known layout, not a
 *     layout's size, or more than 64 KiB) is refused with GLT_INVALID_ARGUMENT naming the struct and the call.
 *   - Structs the library fills (*_info): set size to 0 or sizeof before the call (`glt_capture_info i = {0};`);
 *     a later library that knows a larger layout fills only the layout that size names. The library sets size to
 *     the sizeof of the layout it filled. (This release knows one layout and does not read the size, so callers
 *     written before the size field, which leave it unset, keep working; later releases rely on it.)
 *   - Initialisers: GLT_<STRUCT>_INIT (e.g. GLT_CAPTURE_DESC_INIT) gives the defaults with size = sizeof as
 *     compiled into the program, in C and C++; the glt_*_init functions fill the same defaults.
 *
 * CUDA streams (void *): a non-NULL stream is a cudaStream_t the call issues its CUDA work on. NULL means:
 *   - in calls that return a frame (glt_read_options.cuda_stream, glt_buffer_read): the object's own stream,
 *     which the frame records (glt_frame_info.stream); consumers order against it with glt_frame_sync_stream.
 *     In this release that stream is CUDA's legacy default stream (handle 1) for every object: the stream
 *     PyTorch and CuPy use unless told otherwise, so a frame handed to them needs no cross-stream wait;
 *   - in calls that hand memory to the caller's own CUDA work or take memory from it (glt_write_options.cuda_stream,
 *     glt_buffer_map): CUDA's legacy default stream, which orders against the caller's work on any blocking stream.
 *   The meanings differ on purpose: a read's result says which stream it is on, so gltensor can use a stream of
 *   its own without making anyone wait; a write or a mapping has no result to carry that, and gltensor cannot know
 *   on which stream the caller produced the source or will use the mapping, so NULL must be the one stream that
 *   orders against all blocking streams.
 *
 * CUDA devices (int cuda_device): N >= 0 is a CUDA ordinal (honouring CUDA_VISIBLE_DEVICES); GLT_CUDA_DEVICE_ANY
 * (-1) names no device: an object in a GL context uses the device that context runs on, and a new headless
 * context may run on any device; GLT_CUDA_DEVICE_AUTO (-2), where a struct takes it, is the process's device
 * (glt_default_cuda_device). The same values mean the same thing in every struct.
 */
#ifndef GLTENSOR_H
#define GLTENSOR_H

#include <stddef.h>
#include <stdint.h>

#define GLT_VERSION_MAJOR 0
#define GLT_VERSION_MINOR 2
#define GLT_VERSION_PATCH 0
#define GLT_VERSION_NUMBER (GLT_VERSION_MAJOR * 10000 + GLT_VERSION_MINOR * 100 + GLT_VERSION_PATCH)
#define GLT_STRINGIFY_(x) #x
#define GLT_STRINGIFY(x) GLT_STRINGIFY_(x)
#define GLT_VERSION_STRING \
    GLT_STRINGIFY(GLT_VERSION_MAJOR) "." GLT_STRINGIFY(GLT_VERSION_MINOR) "." GLT_STRINGIFY(GLT_VERSION_PATCH)

#if defined(__GNUC__) && (__GNUC__ >= 4)
#define GLT_API __attribute__((visibility("default")))
#else
#define GLT_API
#endif

/* Anonymous unions (a field's deprecated second name) are C11 and C++; GCC and Clang take them in C99 too. */
#if defined(__GNUC__)
#define GLT_ANONYMOUS_ __extension__
#else
#define GLT_ANONYMOUS_
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes: one list, expanded into the enum and into glt_status_name ---- */
#define GLT_STATUS_MAP(X)                                                                   \
    X(OK, "success")                                                                        \
    X(NO_CONTEXT, "no OpenGL context is current in the calling thread")                     \
    X(WRONG_CONTEXT, "the object belongs to another OpenGL context than the current one")   \
    X(INVALID_OBJECT, "the GL name is not a live texture or renderbuffer of that target")  \
    X(UNSUPPORTED_FORMAT, "the image's format cannot be captured")                          \
    X(WRONG_DEVICE, "the GL context runs on another GPU than the CUDA device")              \
    X(CUDA_UNAVAILABLE, "CUDA is not usable here (not compiled in, no driver or no GPU)")   \
    X(CLOSED, "the object was closed")                                                      \
    X(INVALID_ARGUMENT, "an argument is out of range or does not match")                    \
    X(CUDA_ERROR, "a CUDA call failed")                                                     \
    X(GL_ERROR, "an OpenGL call failed")                                                    \
    X(EGL_ERROR, "an EGL call failed")                                                      \
    X(OUT_OF_MEMORY, "out of memory")                                                       \
    X(UNSUPPORTED, "the driver or device lacks a feature the call needs")                   \
    X(STALE_SLOT, "a shared slot was not written since the last read")                     \
    X(SLOTS_BUSY, "shared slots are held elsewhere: a set by a zero-copy view, or a slot by another writer")

typedef enum glt_status {
#define GLT_STATUS_ENUM_(name, text) GLT_##name,
    GLT_STATUS_MAP(GLT_STATUS_ENUM_)
#undef GLT_STATUS_ENUM_
    GLT_STATUS_COUNT_
} glt_status;

/* "GLT_NO_CONTEXT" etc.; "GLT_UNKNOWN_STATUS" for values outside the enum. */
GLT_API const char *glt_status_name(glt_status status);
/* One-line description of the status code itself. */
GLT_API const char *glt_status_description(glt_status status);
/* The detailed message of the last failure in the calling thread ("" if none). */
GLT_API const char *glt_last_error(void);

GLT_API unsigned glt_version_number(void);
GLT_API const char *glt_version_string(void);

/* 1 when this build contains the CUDA backend. */
GLT_API int glt_cuda_compiled(void);
/* GLT_OK and the number of CUDA devices when CUDA can be used in this process. */
GLT_API glt_status glt_cuda_probe(int *device_count);

/* GL enums the API takes, as numbers, so that callers need no GL headers. */
#define GLT_TEXTURE_2D 0x0DE1u
#define GLT_TEXTURE_RECTANGLE 0x84F5u
#define GLT_RENDERBUFFER 0x8D41u
#define GLT_TEXTURE_2D_MULTISAMPLE 0x9100u

typedef enum glt_dtype {
    GLT_DTYPE_UINT8,
    GLT_DTYPE_UINT16,
    GLT_DTYPE_UINT32,
    GLT_DTYPE_FLOAT16,
    GLT_DTYPE_FLOAT32,
    GLT_DTYPE_BFLOAT16
} glt_dtype;

/* "uint8", "float16", ... */
GLT_API const char *glt_dtype_name(glt_dtype dtype);
GLT_API size_t glt_dtype_size(glt_dtype dtype);

typedef enum glt_backend {
    GLT_BACKEND_AUTO, /* CUDA when the GL context runs on a CUDA device, else CPU */
    GLT_BACKEND_CUDA,
    GLT_BACKEND_CPU
} glt_backend;

GLT_API const char *glt_backend_name(glt_backend backend);

/* Where a buffer lives. */
typedef enum glt_memory { GLT_MEMORY_HOST, GLT_MEMORY_CUDA } glt_memory;

/* cuda_device values (see "CUDA devices" at the top): no device named / the process's device. */
#define GLT_CUDA_DEVICE_ANY (-1)
#define GLT_CUDA_DEVICE_AUTO (-2)

/* ---- headless OpenGL context (EGL, no window) ---- */
typedef struct glt_context glt_context;

typedef struct glt_context_desc {
    size_t size;        /* 0 or sizeof(glt_context_desc): see "Struct sizes" at the top */
    int cuda_device;    /* CUDA ordinal (honours CUDA_VISIBLE_DEVICES); GLT_CUDA_DEVICE_ANY: any device (the first
                           NVIDIA EGL device, else software when allowed); GLT_CUDA_DEVICE_AUTO (the default):
                           glt_default_cuda_device() */
    int allow_software; /* 1: fall back to Mesa's software device when no EGL device matches */
    int force_software; /* 1: use the software device even when an NVIDIA one exists */
    int gl_major, gl_minor; /* 0, 0: 4.5 core, then 3.3 core */
    /* Non-NULL: the GPU by its 16-byte UUID (as CUDA and GL_EXT_memory_object report it), matched through GL
     * alone, so that a process that must not touch CUDA (a shared-slot worker) gets a context on the
     * trainer's GPU; cuda_device and the software fallback are then ignored. */
    const unsigned char *device_uuid;
} glt_context_desc;
#define GLT_CONTEXT_DESC_INIT {sizeof(glt_context_desc), GLT_CUDA_DEVICE_AUTO, 1, 0, 0, 0, NULL}

typedef struct glt_context_info {
    size_t size; /* 0 or sizeof(glt_context_info) before the call; the library sets it (see "Struct sizes") */
    const char *vendor, *renderer, *version; /* GL strings, owned by the context */
    int cuda_device;                        /* -1 when the context runs on no CUDA device */
    int is_software;                        /* 1 for Mesa llvmpipe / softpipe */
    int gl_major, gl_minor;
} glt_context_info;

/* Fills desc with the defaults (cuda_device GLT_CUDA_DEVICE_AUTO, software fallback allowed, GL 4.5). */
GLT_API void glt_context_desc_init(glt_context_desc *desc);
/* The CUDA device a process works on when it names none: LOCAL_RANK (set by torchrun and most
 * launchers) when it names a visible device, 0 when LOCAL_RANK is unset or when exactly one device is
 * visible (a launcher that gives each rank its own GPU through CUDA_VISIBLE_DEVICES). -1 when CUDA
 * is unusable here. GLT_INVALID_ARGUMENT when LOCAL_RANK is not a number or names no visible device. */
GLT_API glt_status glt_default_cuda_device(int *cuda_device);
/* The index, in eglQueryDevicesEXT's order, of the EGL device that runs on CUDA device cuda_device
 * (honouring CUDA_VISIBLE_DEVICES): what engines that open their own EGL display take (Panda3D's
 * egl-device-index, MuJoCo's MUJOCO_EGL_DEVICE_ID, moderngl's device_index). Each NVIDIA EGL device
 * is confirmed through CUDA with a short-lived context; the caller's current context is restored.
 * GLT_WRONG_DEVICE when no EGL device runs on it, GLT_CUDA_UNAVAILABLE without CUDA. */
GLT_API glt_status glt_egl_device_index(int cuda_device, int *egl_index);
/* Creates the context and makes it current in the calling thread. An explicit cuda_device (>= 0) that
 * cannot be honoured fails (GLT_CUDA_UNAVAILABLE, GLT_WRONG_DEVICE) even when software is allowed:
 * the software fallback serves only requests that name no device. */
GLT_API glt_status glt_context_create_headless(const glt_context_desc *desc, glt_context **out);
GLT_API glt_status glt_context_make_current(glt_context *ctx);
/* Leaves the calling thread with no current context (only if ctx is current). */
GLT_API glt_status glt_context_release_current(glt_context *ctx);
GLT_API glt_status glt_context_get_info(const glt_context *ctx, glt_context_info *info);
/* 0 when a child forked from this process could not make GL contexts: this process made an NVIDIA EGL context
 * through gltensor (NVIDIA's EGL does not survive fork; such children get GLT_UNSUPPORTED saying so). Start
 * worker processes with spawn or forkserver then. */
GLT_API int glt_fork_safe(void);
GLT_API void glt_context_destroy(glt_context *ctx);

/* ---- the calling thread's current GL context (any program's, EGL or GLX): recorded, made current again ----
 * For programs that hand gltensor an engine's context and must get it back after something else was made current
 * (a glt_context, another engine), and for probes that must leave the caller's context as they found it. */
typedef enum glt_window_system {
    GLT_WINDOW_SYSTEM_NONE, /* no context was current */
    GLT_WINDOW_SYSTEM_EGL,
    GLT_WINDOW_SYSTEM_GLX
} glt_window_system;

typedef struct glt_saved_context {
    size_t size;                /* 0 or sizeof(glt_saved_context): see "Struct sizes" at the top */
    glt_window_system system;
    void *display;              /* EGLDisplay or Display * */
    uintptr_t draw, read;       /* EGLSurface or GLXDrawable */
    void *context;              /* EGLContext or GLXContext */
    unsigned egl_api;           /* eglQueryAPI() when recorded (0 without EGL): bound again by glt_context_restore */
} glt_saved_context;

/* Records the context current in this thread (system NONE when there is none; not an error). */
GLT_API glt_status glt_context_save_current(glt_saved_context *saved);
/* 1 when the recorded context is the one current in this thread now. */
GLT_API int glt_saved_context_is_current(const glt_saved_context *saved);
/* Makes the recorded context current again with its surfaces (nothing to do when it is current already or
 * when none was recorded). GLT_EGL_ERROR / GLT_GL_ERROR (GLX) when it cannot be made current: destroyed, or
 * current in another thread. */
GLT_API glt_status glt_context_restore(const glt_saved_context *saved);

/* ---- EGL devices, in eglQueryDevicesEXT's order (the order engines' "EGL device index" counts in) ---- */
typedef struct glt_egl_device_info {
    size_t size;        /* 0 or sizeof(glt_egl_device_info) before the call; the library sets it */
    int index;
    int cuda_device;    /* what EGL_NV_device_cuda says (-1: nothing); a hint only: glt_egl_device_index confirms */
    const char *extensions;                  /* the device's EGL extensions, space-separated ("" when none) */
    const char *drm_node, *render_node;      /* EGL_EXT_device_drm(_render_node); NULL when not reported */
    const char *renderer, *vendor;           /* EGL_EXT_device_query_name; NULL when not reported */
} glt_egl_device_info;  /* the strings belong to EGL and live as long as the process */

/* The number of EGL devices (0 when this EGL cannot enumerate devices); GLT_EGL_ERROR without libEGL. */
GLT_API glt_status glt_egl_device_count(int *count);
GLT_API glt_status glt_egl_device_get_info(int index, glt_egl_device_info *info);
/* EGL's client extensions (eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS)), "" when EGL gives none; NULL
 * without libEGL. */
GLT_API const char *glt_egl_client_extensions(void);

/* ---- capture of one GL image ---- */
typedef struct glt_capture glt_capture;

/* A rectangle of an image in GL window coordinates: x, y of its lower-left pixel (row 0 is the image's
 * bottom row, as glReadPixels and glViewport count), width x height pixels. */
typedef struct glt_rect {
    int x, y, width, height;
} glt_rect;

typedef struct glt_capture_desc {
    size_t size;        /* 0 or sizeof(glt_capture_desc): see "Struct sizes" at the top */
    unsigned gl_name;   /* texture or renderbuffer name in the current context */
    unsigned gl_target; /* GLT_TEXTURE_2D, GLT_TEXTURE_RECTANGLE, GLT_TEXTURE_2D_MULTISAMPLE or GLT_RENDERBUFFER */
    glt_backend backend;
    int cuda_device; /* GLT_CUDA_DEVICE_ANY (-1, the default): the device the current GL context runs on; N: must be it */
    /* NVIDIA's GL refuses to reallocate a texture (glTexImage2D: GL_INVALID_OPERATION) while it is
     * registered with CUDA. 1: hold the registration only during each read, so the program may
     * reallocate the texture between reads (each read then registers again: slower). 0: register once. */
    int resizable;
    /* The part of the image to read, e.g. the image inside an engine's power-of-two padding or a renderer's
     * corner of a larger offscreen buffer: only these pixels are copied (top row of the region first when
     * flipping) and every shape is the region's. All zero (the default): the whole image, following
     * its size when it changes. A region must lie inside the image (x, y >= 0, width, height > 0,
     * x + width <= image width, y + height <= image height): checked at creation and again whenever the
     * image's size changes (GLT_INVALID_ARGUMENT when it no longer fits). */
    glt_rect region;
} glt_capture_desc;
#define GLT_CAPTURE_DESC_INIT {sizeof(glt_capture_desc), 0, GLT_TEXTURE_2D, GLT_BACKEND_AUTO, GLT_CUDA_DEVICE_ANY, 0, {0, 0, 0, 0}}

typedef struct glt_capture_info {
    size_t size; /* 0 or sizeof(glt_capture_info) before the call; the library sets it (see "Struct sizes") */
    int width, height, channels; /* output shape is (height, width, channels): the region's size */
    glt_dtype dtype;
    unsigned gl_internal_format;
    const char *format_name; /* "GL_RGBA8" */
    const char *target_name; /* "GL_TEXTURE_2D" */
    glt_backend backend;     /* never AUTO: the backend in use */
    const char *backend_reason;
    int cuda_device; /* -1 on the CPU backend */
    glt_rect region;               /* the part read: (0, 0, image_width, image_height) without a region */
    int image_width, image_height; /* size of the whole GL image */
} glt_capture_info;

/* Target GL_TEXTURE_2D, backend AUTO, the context's device, not resizable, the whole image. */
GLT_API void glt_capture_desc_init(glt_capture_desc *desc);
/* Needs the GL context that owns the name to be current. */
GLT_API glt_status glt_capture_create(const glt_capture_desc *desc, glt_capture **out);
/* Releases the CUDA registration; frames already read stay valid. Call with the
 * capture's GL context current where possible. */
GLT_API void glt_capture_destroy(glt_capture *cap);
/* Info as of the last read (or creation); glt_capture_refresh brings it up to date. */
GLT_API glt_status glt_capture_get_info(const glt_capture *cap, glt_capture_info *info);
/* Re-reads size and format from GL; re-registers if they changed (*changed = 1). */
GLT_API glt_status glt_capture_refresh(glt_capture *cap, int *changed);
/* Reads `region` from now on (NULL or all zero: the whole image), e.g. after the program resized its buffer
 * and the engine's padding changed. Checked against the image's current size (GLT_INVALID_ARGUMENT, and the
 * capture keeps its region, when it does not fit). Needs the capture's GL context current; frames already
 * read are unaffected. */
GLT_API glt_status glt_capture_set_region(glt_capture *cap, const glt_rect *region);

/* Axis order of each image (Python's layout="hwc" / "chw"). */
typedef enum glt_layout { GLT_LAYOUT_HWC, GLT_LAYOUT_CHW } glt_layout;
/* Deprecated spellings (gltensor 0.2; removed in the next release): glt_order, GLT_ORDER_*, and the field name
 * `order` (a second name of `layout` in glt_read_options, glt_write_options and glt_frame_info). */
typedef glt_layout glt_order;
#define GLT_ORDER_HWC GLT_LAYOUT_HWC
#define GLT_ORDER_CHW GLT_LAYOUT_CHW

/* What depth images give (they are read as float32, one channel). */
typedef enum glt_depth_mode {
    GLT_DEPTH_WINDOW,             /* window-space depth in [0, 1], as glReadPixels(GL_DEPTH_COMPONENT) */
    GLT_DEPTH_LINEAR_PERSPECTIVE, /* eye-space distance for a perspective projection with near/far planes */
    GLT_DEPTH_LINEAR_ORTHOGRAPHIC /* eye-space distance for an orthographic projection with near/far planes */
} glt_depth_mode;

/* How to read. The conversions happen inside the one copy pass, never as a second pass:
 *   channels: output channel i is source channel channels[i] (0 = R, 1 = G, 2 = B, 3 = A), for
 *             i < n_channels; n_channels = 0 keeps every channel as stored.
 *   dtype:    with convert_dtype = 1, the output element type. Unsigned-normalised sources (RGBA8, R16,
 *             ...) become [0, 1] in float types; float sources become uint8 as round(clamp(x, 0, 1) * 255);
 *             integer sources (R32UI, ...) keep their values in float types and saturate to uint8.
 *   layout:   GLT_LAYOUT_CHW gives (C, H, W) per image, (N, C, H, W) for batches.
 *   near_plane, far_plane: Python's near=, far= (the C names avoid `near` and `far`, which <windows.h> and some
 *             other platform headers define as macros). */
typedef struct glt_read_options {
    size_t size;       /* 0 or sizeof(glt_read_options): see "Struct sizes" at the top */
    int flip;          /* 1: top row first, as seen on screen; 0: GL's bottom-up rows */
    void *cuda_stream; /* stream the copy is issued on; NULL: the object's own stream (see "CUDA streams") */
    int n_channels;
    int channels[4];
    int convert_dtype;
    glt_dtype dtype; /* GLT_DTYPE_UINT8, FLOAT16, BFLOAT16 or FLOAT32 when convert_dtype */
    GLT_ANONYMOUS_ union {
        glt_layout layout;
        glt_layout order; /* deprecated name of layout */
    };
    glt_depth_mode depth; /* depth images only; assumes glDepthRange(0, 1) */
    double near_plane, far_plane;
} glt_read_options;
#define GLT_READ_OPTIONS_INIT                                                                                 \
    {sizeof(glt_read_options), 1, NULL, 0, {0, 1, 2, 3}, 0, GLT_DTYPE_UINT8, {GLT_LAYOUT_HWC}, GLT_DEPTH_WINDOW, 0.0, 1.0}

/* flip = 1, own stream, no conversion (channels, dtype and HWC order as stored). */
GLT_API void glt_read_options_init(glt_read_options *opts);

/* A destination the caller owns: (height, width, channels), or (count, height, width, channels) for
 * batches and atlases, with byte strides; (channels, height, width) axes when reading in CHW order.
 * Elements within a row must be contiguous; rows (and images) may be padded. */
typedef struct glt_buffer_view {
    void *data;
    glt_memory memory;
    int cuda_device; /* for GLT_MEMORY_CUDA; GLT_CUDA_DEVICE_ANY (-1): the pointer's device */
    glt_dtype dtype;
    int ndim;                 /* 3 or 4 */
    int64_t shape[4];         /* [count,] height, width, channels */
    int64_t strides_bytes[4]; /* [image,] row, pixel, channel */
    int read_only;
} glt_buffer_view;

/* Copies the current image into dst, after validating shape, dtype, device and strides. */
GLT_API glt_status glt_capture_read_into(glt_capture *cap, const glt_read_options *opts, const glt_buffer_view *dst);

/* ---- frames: buffers from the capture's pool, never overwritten by a later read ---- */
typedef struct glt_frame glt_frame;

typedef struct glt_frame_info {
    size_t size; /* 0 or sizeof(glt_frame_info) before the call; the library sets it (see "Struct sizes") */
    void *data;
    glt_memory memory;
    int cuda_device;
    glt_dtype dtype;
    int count;              /* 0: one image (height, width, channels); N: a batch (N, height, width, channels) */
    int height, width, channels;
    GLT_ANONYMOUS_ union {
        glt_layout layout; /* CHW: each image is (channels, height, width) */
        glt_layout order;  /* deprecated name of layout */
    };
    size_t row_pitch_bytes; /* bytes between rows: compact (HWC: width * channels * size; CHW: width * size), except
                               in a zero-copy view of shared slots (glt_slots_read_view), whose rows are padded */
    size_t nbytes;
    int flipped;
    void *stream; /* stream the copy was issued on (NULL on the CPU backend) */
} glt_frame_info;

GLT_API glt_status glt_capture_read(glt_capture *cap, const glt_read_options *opts, glt_frame **out);
GLT_API void glt_frame_get_info(const glt_frame *frame, glt_frame_info *info);
/* Makes consumer_stream wait for the frame's copy (no wait when it is the copy's stream) and
 * remembers it, so that the frame's buffer is reused only after work queued there is done. */
GLT_API glt_status glt_frame_sync_stream(glt_frame *frame, void *consumer_stream);
/* A new frame from the same pool holding a copy of frame's pixels (copied on the frame's stream). */
GLT_API glt_status glt_frame_clone(const glt_frame *frame, glt_frame **out);
/* Bytes between the images of a batch: compact (height rows) for every read, except a zero-copy view of shared
 * slots (glt_slots_read_view), whose images are the slots, each padded to a page. */
GLT_API size_t glt_frame_image_stride(const glt_frame *frame);
/* Blocks the calling thread until the frame's copy is complete. */
GLT_API glt_status glt_frame_synchronize(glt_frame *frame);
/* Returns the buffer to the pool; it is handed out again only once every remembered stream
 * has finished the work queued on it so far. Safe after the capture was destroyed. */
GLT_API void glt_frame_destroy(glt_frame *frame);

/* OpenCV (C++): a frame is OpenCV's pixel order when read with channels B, G, R(, A), top row first (flip = 1),
 * uint8, HWC. On the CUDA backend a cv::cuda::GpuMat wraps the frame's memory without a copy (the frame must
 * outlive the GpuMat; cv::cuda's default stream is CUDA's legacy default stream, the frame's own stream in this
 * release, so work on it is ordered after the copy; on any other cv::cuda::Stream call glt_frame_sync_stream
 * with its cudaStream_t first):
 *
 *     glt_read_options o = GLT_READ_OPTIONS_INIT;
 *     o.n_channels = 4; o.channels[0] = 2; o.channels[1] = 1; o.channels[2] = 0; o.channels[3] = 3;  // BGRA
 *     glt_frame *f; glt_capture_read(cap, &o, &f);
 *     glt_frame_info i = {0};
 *     glt_frame_get_info(f, &i);
 *     cv::cuda::GpuMat gpu(i.height, i.width, CV_8UC4, i.data, i.row_pitch_bytes);   // CUDA backend
 *     cv::Mat host(i.height, i.width, CV_8UC4, i.data, i.row_pitch_bytes);            // CPU backend
 *     ...                                     // use gpu / host, then let them go before the frame
 *     glt_frame_destroy(f);
 *
 * Three channels (B, G, R: n_channels = 3) give CV_8UC3. */

/* ---- batches: many captures, one GL->CUDA handoff per read ---- */
typedef struct glt_batch glt_batch;

/* The captures are borrowed: they must outlive the batch. All must live in one GL context and, for
 * the CUDA backend, on one device. Each capture reads its own region. Sizes (of the regions) and formats
 * may differ (then only glt_batch_read_each works). */
GLT_API glt_status glt_batch_create(glt_capture *const *captures, int count, glt_batch **out);
GLT_API void glt_batch_destroy(glt_batch *batch);
GLT_API int glt_batch_count(const glt_batch *batch);
/* One (count, height, width, channels) frame; GLT_INVALID_ARGUMENT when region sizes or formats differ. */
GLT_API glt_status glt_batch_read(glt_batch *batch, const glt_read_options *opts, glt_frame **out);
/* Into a 4-D destination. */
GLT_API glt_status glt_batch_read_into(glt_batch *batch, const glt_read_options *opts, const glt_buffer_view *dst);
/* One frame per capture (frames[i] from capture i), still with a single map and unmap. */
GLT_API glt_status glt_batch_read_each(glt_batch *batch, const glt_read_options *opts, glt_frame **frames);

/* ---- atlases: one texture holding a grid of equal tiles, read as (count, tile_h, tile_w, channels) ---- */
typedef struct glt_atlas glt_atlas;

typedef struct glt_atlas_desc {
    size_t size;             /* 0 or sizeof(glt_atlas_desc): see "Struct sizes" at the top */
    glt_capture_desc source; /* source.region: the grid is laid inside that rectangle (the whole image by default) */
    int rows, cols;         /* grid; 0, 0: derived from the tile size */
    int tile_height, tile_width; /* 0, 0: image size / grid */
    int count;              /* tiles in use, row-major from the top-left as seen on screen; 0: rows * cols */
} glt_atlas_desc;
#define GLT_ATLAS_DESC_INIT {sizeof(glt_atlas_desc), GLT_CAPTURE_DESC_INIT, 0, 0, 0, 0, 0}

GLT_API void glt_atlas_desc_init(glt_atlas_desc *desc);
GLT_API glt_status glt_atlas_create(const glt_atlas_desc *desc, glt_atlas **out);
GLT_API void glt_atlas_destroy(glt_atlas *atlas);
/* The atlas's capture (owned by the atlas), for its info. */
GLT_API glt_capture *glt_atlas_capture(glt_atlas *atlas);
GLT_API void glt_atlas_grid(const glt_atlas *atlas, int *rows, int *cols, int *tile_height, int *tile_width,
                            int *count);
/* The GL viewport (x, y, width, height; y from the bottom, in coordinates of the whole texture, also when
 * the grid lies in a region) that draws tile k where read() expects it. */
GLT_API glt_status glt_atlas_viewport(const glt_atlas *atlas, int k, int viewport[4]);
GLT_API glt_status glt_atlas_read(glt_atlas *atlas, const glt_read_options *opts, glt_frame **out);
GLT_API glt_status glt_atlas_read_into(glt_atlas *atlas, const glt_read_options *opts, const glt_buffer_view *dst);

/* ---- upload: tensors written into GL textures (the reverse of capture) ---- */
typedef struct glt_upload glt_upload;

typedef struct glt_upload_desc {
    size_t size;        /* 0 or sizeof(glt_upload_desc): see "Struct sizes" at the top */
    unsigned gl_name;   /* texture name in the current context */
    unsigned gl_target; /* GLT_TEXTURE_2D or GLT_TEXTURE_RECTANGLE */
    glt_backend backend;
    int cuda_device; /* GLT_CUDA_DEVICE_ANY (-1, the default): the device the current GL context runs on */
} glt_upload_desc;
#define GLT_UPLOAD_DESC_INIT {sizeof(glt_upload_desc), 0, GLT_TEXTURE_2D, GLT_BACKEND_AUTO, GLT_CUDA_DEVICE_ANY}

/* Which source element types a write into this texture takes, as a sentence for messages. */
GLT_API const char *glt_upload_accepted_dtypes(const glt_upload *up);

typedef struct glt_upload_info {
    size_t size; /* 0 or sizeof(glt_upload_info) before the call; the library sets it (see "Struct sizes") */
    int width, height, channels; /* the texture's size and stored channels */
    glt_dtype dtype;             /* stored element type (uint8 for RGBA8, float16 for RGBA16F, ...) */
    unsigned gl_internal_format;
    const char *format_name;
    glt_backend backend;
    const char *backend_reason;
    int cuda_device; /* -1 on the CPU backend */
} glt_upload_info;

/* How a source tensor is written. The conversions happen inside the one write pass:
 *   flip:     1: source row 0 is the top row of the region as displayed (images as tensors hold them);
 *             0: source row 0 is GL's bottom row.
 *   layout:   source axes, GLT_LAYOUT_HWC (height, width, channels) or GLT_LAYOUT_CHW.
 *   channels: source channel i is written to texture channel channels[i] (0 = R .. 3 = A) for
 *             i < n_channels; n_channels = 0: source channel i goes to texture channel i. Texture
 *             channels no source channel names are filled: alpha with 1 (255 for RGBA8), others with 0.
 *   dtype:    the source dtype (uint8, uint16, uint32, float16, float32) converts to the stored type as
 *             the mirror of capture's conversions: uint8 sources into float or 16-bit unorm textures as
 *             v / 255; float sources into unorm textures as round(clamp(x, 0, 1) * max) (half to even);
 *             float32 into float16 textures rounded to nearest even. Integer textures (R8UI ...) take
 *             unsigned integer sources only (saturated to the stored width).
 *   region:   the written rectangle, (x, y) its lower-left corner in GL's convention (as a capture's
 *             region); width = height = 0 writes the whole image. */
typedef struct glt_write_options {
    size_t size; /* 0 or sizeof(glt_write_options): see "Struct sizes" at the top */
    int flip;
    void *cuda_stream; /* stream the write is issued on; NULL: CUDA's legacy default stream (see "CUDA streams") */
    GLT_ANONYMOUS_ union {
        glt_layout layout;
        glt_layout order; /* deprecated name of layout */
    };
    int n_channels;
    int channels[4];
    glt_rect region;
} glt_write_options;
#define GLT_WRITE_OPTIONS_INIT {sizeof(glt_write_options), 1, NULL, {GLT_LAYOUT_HWC}, 0, {0, 0, 0, 0}, {0, 0, 0, 0}}

/* flip = 1, default stream, HWC, channels as stored, the whole image. */
GLT_API void glt_write_options_init(glt_write_options *opts);
GLT_API void glt_upload_desc_init(glt_upload_desc *desc);
/* Registers the texture for writing (CUDA: once, with surface load/store). Needs its context current. */
GLT_API glt_status glt_upload_create(const glt_upload_desc *desc, glt_upload **out);
GLT_API void glt_upload_destroy(glt_upload *up);
GLT_API glt_status glt_upload_get_info(const glt_upload *up, glt_upload_info *info);
/* Writes src (a 3-D view, (h, w, c) or (c, h, w) per opts->order; any strides) into the texture. The
 * CUDA backend maps the texture (write-discard when the whole image is written), runs one kernel on
 * the stream, and unmaps: GL work issued afterwards sees the new content. src must be CUDA memory of
 * the texture's device on the CUDA backend, host memory on the CPU backend (glTexSubImage2D). */
GLT_API glt_status glt_upload_write(glt_upload *up, const glt_write_options *opts, const glt_buffer_view *src);

/* ---- GL buffer objects as linear memory (vertex, index, storage, pixel buffers) ---- */
typedef struct glt_buffer glt_buffer;

typedef struct glt_buffer_desc {
    size_t size;      /* 0 or sizeof(glt_buffer_desc): see "Struct sizes" at the top */
    unsigned gl_name; /* buffer object name in the current context */
    glt_backend backend;
    int cuda_device; /* GLT_CUDA_DEVICE_ANY (-1, the default): the device the current GL context runs on */
} glt_buffer_desc;
#define GLT_BUFFER_DESC_INIT {sizeof(glt_buffer_desc), 0, GLT_BACKEND_AUTO, GLT_CUDA_DEVICE_ANY}

typedef struct glt_buffer_info {
    size_t size;      /* 0 or sizeof(glt_buffer_info) before the call; the library sets it (see "Struct sizes") */
    size_t bytes; /* the buffer's size in bytes, as of creation or the last map/read */
    glt_backend backend;
    const char *backend_reason;
    int cuda_device;
    int mapped;
} glt_buffer_info;

typedef enum glt_map_mode {
    GLT_MAP_READ = 1,      /* read only: writes through the pointer are undefined */
    GLT_MAP_WRITE = 2,     /* write only: the mapped range's previous contents are discarded */
    GLT_MAP_READ_WRITE = 3 /* read and modify in place */
} glt_map_mode;

/* A live mapping: valid until glt_buffer_unmap (or destroy). */
typedef struct glt_buffer_mapping {
    void *data;
    size_t bytes;
    glt_memory memory; /* CUDA device memory on the CUDA backend, host memory on the CPU backend */
    int cuda_device;
    void *stream; /* the map was issued on it (NULL on the CPU backend) */
    int read_only;
} glt_buffer_mapping;

GLT_API void glt_buffer_desc_init(glt_buffer_desc *desc);
/* Registers the buffer with CUDA once (CUDA backend). Needs its context current. */
GLT_API glt_status glt_buffer_create(const glt_buffer_desc *desc, glt_buffer **out);
/* Unmaps first when still mapped. */
GLT_API void glt_buffer_destroy(glt_buffer *buf);
GLT_API glt_status glt_buffer_get_info(const glt_buffer *buf, glt_buffer_info *info);
/* Re-reads the buffer's size from GL (registering it again if it was reallocated); needs its context. */
GLT_API glt_status glt_buffer_query_size(glt_buffer *buf, size_t *size);
/* Maps bytes [offset, offset + bytes) (bytes 0: to the end) for mode, on stream (CUDA; NULL: the legacy
 * default stream, see "CUDA streams"). GLT_INVALID_ARGUMENT when already mapped or the range exceeds the buffer;
 * GLT_INVALID_OBJECT when the buffer was deleted. GL must not use the buffer until it is unmapped.
 * CPU backend: glMapBufferRange; immutable storage (glBufferStorage) without the GL_MAP_*_BIT the mode needs
 * is lent as a host copy instead, written back at unmap (write modes), so any buffer maps on both backends. */
GLT_API glt_status glt_buffer_map(glt_buffer *buf, glt_map_mode mode, size_t offset, size_t bytes, void *stream,
                                  glt_buffer_mapping *out);
/* CUDA: makes consumer wait for the map, and the unmap wait for work queued on consumer until then. */
GLT_API glt_status glt_buffer_sync_stream(glt_buffer *buf, void *consumer);
/* Hands the buffer back to GL: GL work issued afterwards sees what was written through the mapping.
 * GLT_INVALID_OBJECT (after unmapping what is left) when the buffer was deleted while mapped; GLT_CLOSED when its
 * context was destroyed while mapped (the mapping went with it). Refused without unmapping (GLT_NO_CONTEXT,
 * GLT_WRONG_CONTEXT) when the buffer's context is not current: the buffer stays mapped, call it again there. */
GLT_API glt_status glt_buffer_unmap(glt_buffer *buf);
/* GLT_OK while a mapping is live and usable; GLT_INVALID_ARGUMENT when the buffer is not mapped; GLT_CLOSED when
 * its context was destroyed while mapped (the mapping is then ended). Makes no GL call: any thread may ask. */
GLT_API glt_status glt_buffer_check_mapping(glt_buffer *buf);
/* A copy of bytes [offset, offset + bytes) (0: to the end) as a frame of (1, bytes, 1) uint8, from the
 * buffer's pool, on stream (NULL: the buffer's own stream, see "CUDA streams"): like a capture's frame, never
 * overwritten later. */
GLT_API glt_status glt_buffer_read(glt_buffer *buf, size_t offset, size_t bytes, void *stream, glt_frame **out);

/* ---- shared slots: engine processes write frames straight into the trainer's memory ----
 *
 * One process (the trainer) creates N slots of one image size and format; each engine process (a worker)
 * attaches to one slot and writes its rendered image there with GL alone: no CUDA in the workers. The
 * trainer reads all N slots as one (N, H, W, C) frame with the usual read options.
 *
 * CUDA backend: the slots are device memory of the trainer's GPU, allocated with CUDA's virtual memory API
 * and exported as a POSIX file descriptor; a worker imports it into GL (GL_EXT_memory_object_fd) and packs
 * its image into its slot with glReadPixels into that memory (a copy on the GPU), then waits on a GL
 * fence. CPU backend: the slots are shared host memory (memfd); workers read back into it.
 *
 * What a worker gets is its own slot's memory only (glt_slots_export_slot: a memfd per slot holding its record
 * and, on the CPU backend, its images), the trainer's control page and the sealed geometry. Every memfd is sealed
 * against shrinking and growing before a descriptor of it leaves the trainer, and both sides refuse one that is
 * not. A slot has one writer at a time: a second process that attaches to a slot whose writer still runs is
 * refused with GLT_SLOTS_BUSY naming it (a forked child that inherited the writer included).
 *
 * The protocol every vector environment already follows: workers write, reply, and the trainer reads once
 * all have replied. A read refuses slots not written since the previous read (GLT_STALE_SLOT, naming them
 * and why: a write under way, a worker that died), so a stale or half-written image is never returned.
 * With buffers = 3 (the default) the slots are triple-buffered: workers write one set while the trainer's
 * copies or zero-copy views of the others may still be in use, so neither side waits for the other's GPU work.
 * A frame read is a copy (fused with the conversions) and is never overwritten later; a zero-copy view
 * (glt_slots_read_view) is the set itself, kept from the workers until it is destroyed. Slots store rows top
 * row first. */
/* The layout of the memory the trainer and its workers share: a trainer and a worker of different versions refuse
 * each other at attach, naming both. 4: one memfd per slot, every memfd sealed against resizing, one writer per
 * slot (glt_slots_export_slot, glt_slot_writer_desc.slot_fd). */
#define GLT_SLOTS_VERSION 4

typedef struct glt_slots glt_slots;             /* the trainer's side: owns the memory */
typedef struct glt_slot_writer glt_slot_writer; /* a worker's side: GL only */

typedef struct glt_slots_desc {
    size_t size;                 /* 0 or sizeof(glt_slots_desc): see "Struct sizes" at the top */
    int count;                   /* number of slots (one per worker) */
    int width, height;           /* every slot's image size */
    unsigned gl_internal_format; /* what a slot stores: GL_RGBA8 (0x8058, the default), GL_R8, GL_RG8, GL_RGBA16F,
                                    GL_R32F, GL_RG32F, GL_RGBA32F, GL_R16, GL_RGBA16, and the integer formats with 1, 2
                                    or 4 channels; a worker's source is converted to it by glReadPixels */
    glt_backend backend;         /* AUTO: CUDA when a CUDA device can export memory, else CPU */
    int cuda_device;             /* GLT_CUDA_DEVICE_AUTO (the default): glt_default_cuda_device(); N: that device.
                                    GLT_CUDA_DEVICE_ANY names none, and slots have no GL context to take one from:
                                    with it the AUTO backend uses host memory and the CUDA backend fails */
    int buffers;                 /* 3 (the default): workers write one set while the two read last may still be
                                    in use (a copy queued, or a zero-copy view alive); 2: one of them; 1: each
                                    read waits for its copy, and zero-copy views are refused */
} glt_slots_desc;
#define GLT_SLOTS_DESC_INIT {sizeof(glt_slots_desc), 0, 0, 0, 0x8058u, GLT_BACKEND_AUTO, GLT_CUDA_DEVICE_AUTO, 3}

typedef struct glt_slots_info {
    size_t size; /* 0 or sizeof(glt_slots_info) before the call; the library sets it (see "Struct sizes") */
    int count, width, height, channels;
    glt_dtype dtype;
    unsigned gl_internal_format;
    const char *format_name;
    glt_backend backend;
    const char *backend_reason;
    int cuda_device; /* -1 on the CPU backend */
    int buffers;
    size_t slot_bytes;   /* one slot, rows padded to row_pitch */
    size_t row_pitch;    /* bytes between a slot's rows */
    size_t memory_bytes; /* the whole shared allocation */
    uint64_t reads;      /* reads done so far */
    unsigned char device_uuid[16]; /* the trainer's GPU (glt_context_desc.device_uuid, for the workers' contexts);
                                      zeros where CUDA is not usable */
    uint64_t read_waits; /* CUDA: reads that had to wait for the copy that last read the set the workers write next
                            (queued buffers - 1 reads earlier), or for the work queued on a dead view of it; each
                            such wait blocks the trainer for the GPU */
    double read_wait_us; /* the time those reads waited, in all */
} glt_slots_info;

typedef enum glt_slot_state {
    GLT_SLOT_FRESH,       /* written since the last read */
    GLT_SLOT_STALE,       /* not written since the last read, its writer (if any) alive */
    GLT_SLOT_WRITING,     /* a write is under way */
    GLT_SLOT_WRITER_GONE  /* its last writer's process has exited (mid-write, or before writing this step) */
} glt_slot_state;

GLT_API void glt_slots_desc_init(glt_slots_desc *desc);
GLT_API glt_status glt_slots_create(const glt_slots_desc *desc, glt_slots **out);
/* Frees the trainer's side. Writers attached already keep their mapping (nothing is freed under them); their
 * next write fails with GLT_CLOSED. */
GLT_API void glt_slots_destroy(glt_slots *slots);
GLT_API glt_status glt_slots_get_info(const glt_slots *slots, glt_slots_info *info);
/* New file descriptors for a writer (the caller owns and closes them): the shared pixel memory (CUDA backend; -1 on
 * the CPU backend, whose pixels live in each slot's memfd) and the trainer's control page (a memfd of one page,
 * sealed against resizing and, on Linux 5.1 or newer, against every write but the trainer's own). Send them to the
 * worker (SCM_RIGHTS, or inheritance across fork). */
GLT_API glt_status glt_slots_export(glt_slots *slots, int *memory_fd, int *control_fd);
/* A new file descriptor (the caller owns and closes it) of slot `slot`'s own memory: a memfd holding its record
 * and, on the CPU backend, its image of each set, sealed against resizing. A writer of that slot needs it
 * (glt_slot_writer_desc.slot_fd); it gives no access to any other slot, so hand each worker its own. */
GLT_API glt_status glt_slots_export_slot(glt_slots *slots, int slot, int *slot_fd);
/* A new file descriptor (the caller owns and closes it) of the slots' geometry: a memfd sealed against writing,
 * so that no worker can change what the others attach by. A writer needs it besides glt_slots_export's two
 * (glt_slot_writer_desc.geometry_fd) and refuses one that is not sealed. */
GLT_API glt_status glt_slots_export_geometry(glt_slots *slots, int *geometry_fd);
/* State of one slot now, and the pid of its last writer (0: none yet). */
GLT_API glt_status glt_slots_state(const glt_slots *slots, int slot, glt_slot_state *state, int *writer_pid);
/* All slots as one (count, height, width, channels) frame (CHW: (count, channels, height, width)), top row
 * first when opts->flip. GLT_STALE_SLOT when a slot was not written since the last read. */
GLT_API glt_status glt_slots_read(glt_slots *slots, const glt_read_options *opts, glt_frame **out);
GLT_API glt_status glt_slots_read_into(glt_slots *slots, const glt_read_options *opts, const glt_buffer_view *dst);
/* Zero-copy: the set of slots the workers just wrote, as one (count, height, width, channels) frame of the slots'
 * own format, top row first, rows glt_frame_info.row_pitch_bytes and images glt_frame_image_stride() bytes apart
 * (the slots' padded layout). opts may ask for nothing a copy would do: the slots' channels and dtype, HWC, flip
 * (the default); anything else is refused with GLT_INVALID_ARGUMENT (use glt_slots_read). The view is never
 * written while it lives: the workers write the other sets meanwhile, and a set comes back to them only after
 * its view was destroyed and the work its consumers' streams had queued by then is complete (an event per stream,
 * waited for by a later read when needed). So up to buffers - 1 views may be alive: a read that would let the
 * workers into a set whose view is still alive fails with GLT_SLOTS_BUSY, changing nothing. With buffers = 3 (the
 * default), a loop that keeps the previous step's view while reading the next one never meets it. A view keeps
 * the slots' memory alive after glt_slots_destroy. */
GLT_API glt_status glt_slots_read_view(glt_slots *slots, const glt_read_options *opts, glt_frame **out);

typedef struct glt_slot_writer_desc {
    size_t size;    /* 0 or sizeof(glt_slot_writer_desc): see "Struct sizes" at the top */
    int memory_fd;  /* from glt_slots_export (-1 on the CPU backend); duplicated: the caller keeps its own */
    int control_fd; /* from glt_slots_export; duplicated */
    int slot;       /* which slot this process writes, 0 <= slot < count */
    int geometry_fd; /* from glt_slots_export_geometry (required); read once at attach, not kept */
    int slot_fd;     /* from glt_slots_export_slot of the same slot (required); mapped at attach, not kept */
} glt_slot_writer_desc;
#define GLT_SLOT_WRITER_DESC_INIT {sizeof(glt_slot_writer_desc), -1, -1, 0, -1, -1}

typedef struct glt_slot_writer_info {
    size_t size; /* 0 or sizeof(glt_slot_writer_info) before the call; the library sets it (see "Struct sizes") */
    int slot, count, width, height, channels;
    glt_dtype dtype;
    const char *format_name;
    glt_backend backend;
    uint64_t writes;
    /* How GL writes move the pixels: "shader" (a compute shader packs the image into the slot), "copy"
     * (glReadPixels into a buffer of the writer's own, then a buffer copy), "readpixels" (glReadPixels straight
     * into the slot: CPU slots, or the GLTENSOR_SLOTS_WRITE=direct diagnostic). */
    const char *write_path;
    /* "shader" writes that read the caller's texture itself (a single-sample GL_TEXTURE_2D of the slot's format,
     * base level 0, identity swizzle); the others blit it into a texture of the writer's first. */
    uint64_t direct_writes;
} glt_slot_writer_info;

/* Attaches to a slot in the GL context current in this thread (CUDA backend: imports the memory into GL, and
 * refuses a context on another GPU with GLT_WRONG_DEVICE; GLT_UNSUPPORTED when the driver lacks
 * GL_EXT_memory_object_fd). Creates no CUDA context. On the CPU backend a writer may attach with no context
 * current: it then writes host pixels only (glt_slot_writer_write refuses with GLT_WRONG_CONTEXT).
 * One writer per slot: GLT_SLOTS_BUSY, naming the holder, while another writer of the slot is attached in a
 * process that still runs (this one included); a writer whose process exited is taken over. A writer inherited
 * across fork writes in the child only once the slot is free, and then as the child (its own pid). The writer is
 * used by one thread at a time. */
GLT_API glt_status glt_slot_writer_create(const glt_slot_writer_desc *desc, glt_slot_writer **out);
/* Releases the writer's GL objects (call with its context current where possible). */
GLT_API void glt_slot_writer_destroy(glt_slot_writer *writer);
GLT_API glt_status glt_slot_writer_get_info(const glt_slot_writer *writer, glt_slot_writer_info *info);
/* Copies `region` (NULL or all zero: the whole image) of a texture or renderbuffer (multisampled ones are
 * resolved) into the slot, on the GPU, and returns once the copy is complete. The region's size must be the
 * slot's; colour sources convert to the slot's format as glReadPixels converts, integer formats only to
 * integer slots. */
GLT_API glt_status glt_slot_writer_write(glt_slot_writer *writer, unsigned gl_name, unsigned gl_target,
                                         const glt_rect *region);
/* Writes host pixels (height rows of width pixels in the slot's format, row_stride bytes apart, top row first)
 * into the slot: for observations that are arrays already. */
GLT_API glt_status glt_slot_writer_write_host(glt_slot_writer *writer, const void *pixels, size_t row_stride);

#ifdef __cplusplus
}
#endif
#endif /* GLTENSOR_H */
