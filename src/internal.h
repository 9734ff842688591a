/* Declarations shared by the core's source files; not part of the public API. */
#ifndef GLT_INTERNAL_H
#define GLT_INTERNAL_H

#include "gltensor.h"
#include "gl_api.h"
#include "kernels.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

/* ---- library.c: the one place a caller's struct is read (the size rule is in gltensor.h, "Struct sizes") ---- */
/* Checks in's size field (NULL passes) and copies `known` bytes of it, in this release's layout, to out (NULL: check
 * only), or `defaults` when in is NULL. GLT_INVALID_ARGUMENT naming `type` and `call` when the size is refused. */
glt_status glt_struct_in(const void *in, void *out, size_t known, const void *defaults, const char *type,
                         const char *call);
/* *in, or the defaults when in is NULL (every read / write entry point accepts NULL). */
glt_status glt_read_options_in(const glt_read_options *in, glt_read_options *out, const char *call);
glt_status glt_write_options_in(const glt_write_options *in, glt_write_options *out, const char *call);
/* One line at each entry point: returns the failure from the calling function. `desc` may be NULL. */
#define GLT_CHECK_STRUCT_SIZE(desc, type)                                                                 \
    do {                                                                                                  \
        glt_status glt_size_st_ = glt_struct_in((desc), NULL, sizeof(type), NULL, #type, __func__);       \
        if (glt_size_st_ != GLT_OK) return glt_size_st_;                                                  \
    } while (0)
/* glt_read_options_in / glt_write_options_in (kind read / write) into *out, or return the failure. */
#define GLT_OPTIONS_IN(kind, in, out, call)                                                               \
    do {                                                                                                  \
        glt_status glt_size_st_ = glt_##kind##_options_in((in), (out), (call));                           \
        if (glt_size_st_ != GLT_OK) return glt_size_st_;                                                  \
    } while (0)

/* ---- errors.c ---- */
/* Records a formatted message for glt_last_error() and returns status. */
glt_status glt_fail(glt_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void glt_clear_error(void);
const char *glt_gl_error_name(GLenum err);

/* ---- gl_loader.c ---- */
typedef enum glt_window_api { GLT_API_NONE, GLT_API_EGL, GLT_API_GLX } glt_window_api;

/* Which context is current in this thread: the identity every GPU object keeps. The generation tells this
 * context from a later one that got the same pointer (context_tag.c); 0 when none is current. */
typedef struct glt_gl_context_id {
    glt_window_api api;
    void *display; /* EGLDisplay or Display* */
    void *context; /* EGLContext or GLXContext */
    uint64_t generation;
} glt_gl_context_id;

const glt_egl *glt_egl_load(void); /* NULL when libEGL is missing (message set) */
const glt_gl *glt_gl_load(void);   /* NULL when a GL entry point is missing (message set) */
/* The GLX entry points that record and restore a GLX context (context_switch.c); NULL without libGLX. */
typedef struct glt_glx {
    void *(*GetCurrentContext)(void);
    void *(*GetCurrentDisplay)(void);
    unsigned long (*GetCurrentDrawable)(void);
    unsigned long (*GetCurrentReadDrawable)(void);
    int (*MakeContextCurrent)(void *display, unsigned long draw, unsigned long read, void *context);
} glt_glx;
const glt_glx *glt_glx_load(void);
/* The current context's API, display and context pointers, generation 0 (context_tag.c's
 * glt_current_gl_context adds the generation: the loader itself keeps no registry). */
glt_gl_context_id glt_current_gl_handles(void);
/* Any GL or EGL entry point by name (NULL when absent), for the optional ones outside the tables. */
void *glt_gl_proc(const char *name);
/* Discards GL errors left by earlier calls so that ours are attributed correctly. */
void glt_gl_drain_errors(const glt_gl *gl);

/* ---- egl_devices.c: EGL devices in eglQueryDevicesEXT's order (what engines' "EGL device index" counts) ---- */
#define GLT_EGL_MAX_DEVICES 32
/* 1 when the space-separated list holds ext as a whole word. */
int glt_has_extension(const char *list, const char *ext);
/* Fills devices (GLT_EGL_MAX_DEVICES) and returns how many; 0 when this EGL cannot enumerate devices. */
int glt_egl_query_devices(const glt_egl *egl, EGLDeviceEXT *devices);
int glt_egl_device_is_nvidia(const glt_egl *egl, EGLDeviceEXT device);
/* What EGL says the device's CUDA ordinal is (-1 if it does not say); only a hint (egl_context.c says why). */
int glt_egl_device_cuda_number(const glt_egl *egl, EGLDeviceEXT device);

/* ---- context_tag.c: a context identity that a later context with the same pointer cannot take ---- */
/* The generation of the context current in this thread (registered when first seen); 0 when GL is missing. */
uint64_t glt_gl_context_tag(glt_window_api api, void *display, void *context);
/* The context current in this thread with its generation; api GLT_API_NONE when none is. */
glt_gl_context_id glt_current_gl_context(void);
/* A glt_context was created (any earlier context at that pointer is gone) / is about to be destroyed. */
void glt_gl_context_own(void *display, void *context);
void glt_gl_context_forget_owned(void *display, void *context);
/* 0 once the context `id` was made in is known destroyed (its generation ended); 1 otherwise. */
int glt_gl_context_alive(glt_gl_context_id id);
/* Same pointer and same generation: the same context. */
int glt_same_gl_context(glt_gl_context_id a, glt_gl_context_id b);
/* GLT_CLOSED when `expected`'s context was destroyed, GLT_NO_CONTEXT / GLT_WRONG_CONTEXT when it is not the one
 * current, each with a message naming `what`; GLT_OK when `expected` is current. Every object checks this on
 * every entry, so objects added later get the same protection by keeping a glt_gl_context_id. */
glt_status glt_check_gl_context(glt_gl_context_id expected, const char *what);

/* ---- env.c: the environment, read in one place ---- */
typedef enum glt_env_var {
    GLT_ENV_DEPTH_PATH,           /* auto | readpixels | compute */
    GLT_ENV_TEXTURE_REGION_READ,  /* auto | framebuffer */
    GLT_ENV_UPLOAD_PATH,          /* auto | copy */
    GLT_ENV_SLOTS_WRITE,          /* auto | shader | copy | direct (a diagnostic: wrong on NVIDIA's driver 580) */
    GLT_ENV_SLOTS_COMPRESSION,    /* generic | none (a diagnostic: shows GL's compressed writes read raw) */
    GLT_ENV_SLOTS_ALIGN,          /* 4k | 64k | 2m: where each slot starts (a diagnostic) */
    GLT_ENV_SLOTS_PACK_INPUT,     /* auto | blit: the shader write reads the caller's texture itself, or a copy (a diagnostic) */
    GLT_ENV_COUNT
} glt_env_var;
/* The index of the variable's value among its values (0: auto, also when unset). */
int glt_env_choice(glt_env_var var);
/* GLT_INVALID_ARGUMENT naming the variable and its valid values when a GLTENSOR_* value is unknown; every
 * object's creation calls it, so a typo is refused instead of ignored. */
glt_status glt_env_check(void);
/* Newline-separated problems with the environment (bad GLTENSOR_* values, EGL/Mesa variables that break
 * context creation, CUDA_VISIBLE_DEVICES hiding every GPU); the length written ("" when none). */
size_t glt_env_problems(char *buf, size_t size);

/* ---- gl_formats.c ---- */
typedef struct glt_format {
    GLenum internal_format;
    const char *name;
    glt_dtype dtype;
    int channels;
    GLenum read_format, read_type; /* glGetTexImage / glReadPixels */
    int depth;                     /* 1: a depth (or depth-stencil) format, read as float32 window depth */
} glt_format;

/* The capturable format, or NULL. */
const glt_format *glt_format_find(GLenum internal_format);
/* GLT_KIND_UNORM, GLT_KIND_UINT or GLT_KIND_FLOAT (kernels.h): how conversions read its values. */
int glt_format_kind(const glt_format *fmt);

/* ---- convert.c: what one output image looks like after the read options' conversions ---- */
typedef struct glt_out_spec {
    glt_dtype dtype;   /* output element type */
    int channels;      /* output channels */
    int map[4];        /* output channel i <- source channel map[i] */
    glt_layout order;   /* HWC or CHW */
    int raw;           /* 1: exactly as stored (first channels, same dtype, HWC): plain copies suffice */
    int out_type;      /* GLT_OUT_* for the kernel */
    int kind;          /* GLT_KIND_* of the source */
    int depth_mode;    /* glt_depth_mode, depth sources */
    double near_plane, far_plane;
} glt_out_spec;

/* Window depth d in [0, 1] as the requested mode gives it (computed in double: the perspective
 * formula cancels badly in float near the far plane). */
float glt_depth_value(float d, int mode, double near_plane, double far_plane);

/* Resolves opts' conversions against a source format; `what` names the source in errors. */
glt_status glt_out_spec_make(const glt_format *fmt, const glt_read_options *opts, const char *what,
                             glt_out_spec *out);
size_t glt_out_row_bytes(const glt_out_spec *s, int width);   /* one row (of one plane when CHW) */
size_t glt_out_image_bytes(const glt_out_spec *s, int width, int height);
/* CPU backend: converts height rows of width source pixels into dst. The first output row comes from
 * `src`, each next one from src_stride bytes further (negative to flip). */
void glt_convert_host(const glt_format *fmt, const glt_out_spec *s, const void *src, ptrdiff_t src_stride,
                      int width, int height, void *dst, size_t dst_pitch, size_t dst_plane);
/* "GL_DEPTH_COMPONENT24" for any enum we know, else "0x1234" in a static thread-local buffer. */
const char *glt_format_name(GLenum internal_format);
/* Why an uncapturable format is refused and what to do, for error messages. */
const char *glt_format_refusal_hint(GLenum internal_format);
const char *glt_target_name(GLenum target);

/* ---- pool.c: buffers handed out as frames, reused only after their consumers finish ---- */
typedef struct glt_pool glt_pool;
typedef struct glt_block glt_block;

#define GLT_BLOCK_MAX_STREAMS 4

/* A CUDA pool also owns the stream its frames are copied on by default, so that stream outlives
 * every frame that names it. NULL on failure (message set). */
glt_pool *glt_pool_create(glt_memory memory, int cuda_device);
void *glt_pool_stream(const glt_pool *pool);
void glt_pool_retain(glt_pool *pool);
void glt_pool_release(glt_pool *pool); /* frees the pool and its idle blocks at zero */
/* A block of exactly `bytes`, whose earlier users' work `stream` is made to wait for. */
glt_status glt_pool_acquire(glt_pool *pool, size_t bytes, void *stream, glt_block **out);
void *glt_block_data(const glt_block *block);
/* CUDA pools: the block's "copy done" event (created on first use; NULL for host pools). Recorded
 * right after the copy and before the unmap, so a consumer's wait never includes the hand-back to GL:
 * waiting past an unmap ties the consumer's stream to GL's work and costs a GPU context time slice. */
void *glt_block_ready_event(glt_block *block);
glt_pool *glt_block_pool(const glt_block *block);
size_t glt_block_size(const glt_block *block);
/* Remembers a stream whose queued work must finish before the block is reused. */
glt_status glt_block_add_stream(glt_block *block, void *stream);
void glt_pool_give_back(glt_block *block);
/* A block over memory the pool does not own (a zero-copy view of shared slots), handed out as any block: its
 * frame's consumer streams are tracked the same way. When its frame dies, an event is recorded on every stream
 * that used it (the pool's own too) and `release(ctx, block)` is called, from whatever thread dropped the frame;
 * the owner then holds the block until it calls glt_block_retire. It has no ready event: the memory is complete
 * when it is handed out. */
glt_status glt_block_wrap(glt_pool *pool, void *data, size_t bytes, void (*release)(void *ctx, glt_block *b),
                          void *ctx, glt_block **out);
int glt_block_wrapped(const glt_block *block);
/* A released wrapped block: 1 when the work its consumers queued is done (queried, not waited for). */
int glt_block_idle(glt_block *block);
/* Waits for that work and makes the block ready to be handed out again over the same memory, keeping its events
 * (creating and destroying them per view cost more than the copy a view saves). */
void glt_block_settle(glt_block *block);
/* Waits for that work, and frees the descriptor (never the memory). */
void glt_block_retire(glt_block *block);
/* Drops idle blocks (e.g. after a resize made their size useless). */
void glt_pool_trim(glt_pool *pool);

/* ---- cuda_*.c (cuda_none.c when built without CUDA): everything that calls CUDA ---- */
#include "cuda_api.h"

typedef struct glt_cpu_reader glt_cpu_reader;
typedef struct glt_gl_stage glt_gl_stage;

/* ---- object_base.c: the prelude of every object over one GL object (capture, upload, buffer) ---- */
typedef enum glt_object_kind {
    GLT_OBJECT_CAPTURE, /* a texture or renderbuffer read (capture.c): the capturable formats */
    GLT_OBJECT_UPLOAD,  /* a texture written (upload.c): the writable formats */
    GLT_OBJECT_BUFFER,  /* a buffer object (buffer.c): no format */
} glt_object_kind;

/* What GL says of the object now. */
typedef struct glt_object_state {
    int width, height, samples; /* images */
    GLenum internal_format;
    const glt_format *fmt;      /* images: the format the object's kind accepts */
    size_t size;                /* buffers */
    int gl_mapped;              /* buffers: mapped by GL itself */
} glt_object_state;

/* The first member of glt_capture, glt_upload and glt_buffer. */
typedef struct glt_object_base {
    glt_gl_context_id gl_context; /* the context current at creation: every entry checks it */
    glt_object_kind kind;
    GLuint name;
    GLenum target; /* images */
    glt_backend backend;
    char backend_reason[320];
    int cuda_device;
    GLenum internal_format; /* images, as last queried (adopted) */
    const glt_format *fmt;
    int width, height, samples;
} glt_object_base;

/* Creation: GLTENSOR_* checked, the current context recorded (refused when there is none), the object queried
 * from GL and its format refused as its kind refuses it; *now and o hold what GL said. */
glt_status glt_object_open(glt_object_base *o, glt_object_kind kind, GLuint name, GLenum target,
                           glt_object_state *now);
/* Every later use: the object's context is current, and what GL says of the object now (its format looked up
 * again only when the internal format changed). Changes nothing in o. */
glt_status glt_object_query(const glt_object_base *o, glt_object_state *now);
void glt_object_adopt(glt_object_base *o, const glt_object_state *now);
int glt_object_same(const glt_object_base *o, const glt_object_state *now); /* same size, format and samples */
/* The backend (backend_choice.c) into o's backend, cuda_device and backend_reason. */
glt_status glt_object_choose_backend(glt_object_base *o, glt_backend requested, int requested_device);
const char *glt_object_kind_name(const glt_object_base *o); /* "texture", "renderbuffer" or "buffer" */

/* An image's size, format (refused as a capture refuses it) and sample count; its bindings restored. */
glt_status glt_gl_image_query(const glt_gl *gl, GLuint name, GLenum target, int *width, int *height,
                              const glt_format **fmt, int *samples);
/* GLT_OK when r is all zero (the whole image) or a rectangle inside a width x height image. */
glt_status glt_gl_region_check(const glt_rect *r, GLenum target, GLuint name, int width, int height);
/* How `r` fails to lie inside a width x height image (written into why), or NULL when it fits. */
const char *glt_region_misfit(const glt_rect *r, int width, int height, char *why, size_t n);

/* ---- capture.c: what batches and atlases use of a capture (struct glt_capture is private to capture.c) ---- */
const glt_object_base *glt_capture_base(const glt_capture *cap);
const glt_rect *glt_capture_region(const glt_capture *cap); /* the part read now */
glt_pool *glt_capture_pool(const glt_capture *cap);
/* CUDA backend: the registered image a copy maps (the resolve when multisampled); valid after a prepare. */
glt_cuda_image *glt_capture_cuda_image(const glt_capture *cap);
/* The stream a read was issued on, when a batch copies on its own: synchronised before re-registering. */
void glt_capture_use_stream(glt_capture *cap, void *stream);
/* CPU backend: the capture's region, as stored and bottom-up, in a scratch buffer the capture keeps (*rows). */
glt_status glt_capture_read_scratch(glt_capture *cap, const unsigned char **rows);
/* End of a read: a resizable capture drops its CUDA registration until the next one. */
void glt_capture_finish(glt_capture *cap);
/* Copies the capture's region into dst per spec (CPU or CUDA backend). */
glt_status glt_capture_copy(glt_capture *cap, const glt_out_spec *spec, int flip, void *dst, size_t pitch,
                            size_t plane, void *stream, void *ready_event);
/* Checks the context, brings size and format up to date, validates opts->cuda_stream and resolves
 * the stream to copy on (the pool's when none is given). */
glt_status glt_capture_prepare(glt_capture *cap, const glt_read_options *opts, void **stream);
size_t glt_capture_row_bytes(const glt_capture *cap); /* one row of the region, as stored */

/* ---- frame.c, view.c: shared by captures, batches, atlases and shared slots ---- */
struct glt_frame {
    glt_block *block;
    glt_memory memory;
    int cuda_device;
    glt_dtype dtype;
    int count, height, width, channels;
    glt_layout order;
    int flipped;
    void *stream;
    /* 0: compact (rows width * pixel bytes apart, images height rows apart). A zero-copy view of shared slots
     * keeps the slots' padded layout instead. */
    size_t row_pitch, image_stride;
};

/* A frame of `count` (0: single) images of spec's layout, its buffer from `pool`. */
glt_status glt_frame_create(glt_pool *pool, void *stream, glt_memory memory, int cuda_device, const glt_out_spec *spec,
                            int count, int height, int width, int flipped, glt_frame **out);
void *glt_frame_data(const glt_frame *f);
size_t glt_frame_image_bytes(const glt_frame *f);
/* A frame over `block` (glt_block_wrap) holding `count` images of the format's own pixels (no conversion: HWC, the
 * format's channels and dtype, top row first), rows `row_pitch` and images `image_stride` bytes apart. */
glt_status glt_frame_wrap(glt_block *block, void *stream, glt_memory memory, int cuda_device, const glt_format *fmt,
                          int count, int height, int width, size_t row_pitch, size_t image_stride, glt_frame **out);

/* What a destination must be: count 0 means one image, N a batch of N; axes per spec->order. */
typedef struct glt_dest_shape {
    glt_memory memory;
    int cuda_device;
    const glt_out_spec *spec;
    int count, height, width;
} glt_dest_shape;

/* Where a validated destination puts rows, channel planes and images (bytes). */
typedef struct glt_dest_strides {
    size_t pitch, plane, image;
} glt_dest_strides;

/* Validates a caller's destination against `want`. */
glt_status glt_view_check(const glt_buffer_view *v, const glt_dest_shape *want, const char *what,
                          glt_dest_strides *out);

/* ---- read_path.c: the one read path (captures, batches, atlases, shared slots) ---- */
typedef struct glt_read_dest {
    glt_out_spec spec;
    glt_frame *frame;         /* the new frame of a read, or NULL when writing into the caller's view */
    void *data, *ready_event; /* ready_event: the frame block's, recorded after the copy; NULL for a view */
    glt_dest_strides strides;
} glt_read_dest;

/* The output layout from opts, then a new frame of `shape` from `pool` (view NULL) or the caller's view,
 * checked against `shape` (its spec member is ignored: the layout from opts is used). */
glt_status glt_read_dest_open(const glt_format *fmt, const glt_read_options *opts, const char *what, glt_pool *pool,
                              void *stream, const glt_dest_shape *shape, const glt_buffer_view *view,
                              glt_read_dest *d);
/* Ends a read whose copy returned `copied`: hands the frame to *out (when out is given) on success,
 * destroys it on failure. Returns `copied`. */
glt_status glt_read_dest_close(glt_read_dest *d, glt_status copied, glt_frame **out);

/* One read: begun by an entry point (read: a new frame to *out; read_into: the caller's view), prepared by
 * the object (which fills the second half), finished by glt_read_finish with the object's copy. */
typedef struct glt_read_call {
    glt_read_options opts;       /* the caller's, or the defaults */
    const glt_buffer_view *view; /* read_into's destination; NULL for a new frame */
    glt_frame **out;             /* read's frame; NULL for read_into */
    /* set by the object's prepare step */
    const glt_format *fmt;       /* the source's format, for the output layout */
    glt_pool *pool;              /* where a new frame comes from */
    void *stream;                /* the stream the copy runs on (NULL: CPU backend) */
    glt_dest_shape shape;        /* what the destination must be (its spec member is ignored) */
    char what[96];               /* the source, in error messages */
    uint64_t note;               /* the object's own, from its prepare step to its copy */
} glt_read_call;
/* Copies the prepared source into d (d->spec: the conversions; c->opts.flip; c->stream). */
typedef glt_status (*glt_read_copy_fn)(void *obj, const glt_read_call *c, const glt_read_dest *d);
/* fn names the entry point in errors: "out is NULL" / "dst is NULL" refusals. */
glt_status glt_read_begin_frame(glt_read_call *c, const char *fn, const glt_read_options *opts, glt_frame **out);
glt_status glt_read_begin_into(glt_read_call *c, const char *fn, const glt_read_options *opts,
                               const glt_buffer_view *dst);
/* Returns `prepared` when the prepare step failed; else opens the destination, calls copy, closes it. */
glt_status glt_read_finish(glt_read_call *c, glt_status prepared, glt_read_copy_fn copy, void *obj);

/* ---- depth_probe.c: is the compute-shader depth path bit-equal to glReadPixels on this driver? ---- */
int glt_depth_compute_exact(const glt_gl *gl); /* once per GL renderer per process; needs a context current */
/* The depth path a stage of fmt should take (1: the compute shader): GLTENSOR_DEPTH_PATH when set, else the
 * shader for the CUDA backend where the probe found it exact. Asked by the stage's creator, so that gl_stage.c
 * takes the verdict instead of calling the probe (which itself builds stages). */
int glt_depth_use_compute(const glt_format *fmt, int for_cuda);

/* ---- gl_stage.c: GL-side work before reading (MSAA resolve, depth into a pixel-pack buffer) ---- */
int glt_stage_needed(const glt_format *fmt, GLenum target, int samples);
/* 1 where fmt's depth can go through the compute shader (fixed-point depth, GL 4.3 and compute entry points). */
int glt_stage_compute_possible(const glt_gl *gl, const glt_format *fmt);
/* width x height: the whole image; region: the part each run resolves and packs (NULL: the whole image).
 * A resolve writes the region at its own coordinates of a full-size renderbuffer; depth is packed as
 * region.height rows of region.width floats. use_compute: the depth path (glt_depth_use_compute's verdict;
 * ignored where the compute path cannot run). */
glt_status glt_stage_create(GLuint name, GLenum target, const glt_format *fmt, int width, int height, int samples,
                            const glt_rect *region, int use_compute, glt_gl_stage **out);
void glt_stage_destroy(glt_gl_stage *s); /* needs the context current */
glt_status glt_stage_run(glt_gl_stage *s);
GLuint glt_stage_resolved(const glt_gl_stage *s);    /* single-sample renderbuffer, or 0 */
GLuint glt_stage_depth_buffer(const glt_gl_stage *s); /* pixel-pack buffer of the region's float depth, or 0 */
/* CPU backend: the depth buffer's rows (flipped when asked), converted per mode, into dst. */
glt_status glt_stage_read_depth_host(glt_gl_stage *s, int flip, int mode, double near_plane, double far_plane,
                                     void *dst, size_t pitch);

/* ---- cpu_backend.c ---- */
/* The caller's pixel-pack state (buffer binding, alignment, row length, skips, byte swap): saved and
 * reset to tight, unswapped rows around our readbacks, then restored. */
typedef struct glt_pack_state {
    GLint pbo, alignment, row_length, skip_rows, skip_pixels, swap_bytes;
} glt_pack_state;
void glt_pack_push(const glt_gl *gl, glt_pack_state *s);
void glt_pack_pop(const glt_gl *gl, const glt_pack_state *s);
/* gl_objects.c: the bindings a compute dispatch of ours changes, saved and put back (program, unit 0's 2D texture and
 * sampler, shader-storage binding 0). */
typedef struct glt_compute_state {
    GLint program, active, texture, sampler, ssbo, ssbo0;
    GLint64 ssbo0_start, ssbo0_size;
} glt_compute_state;
void glt_compute_push(const glt_gl *gl, glt_compute_state *s);
void glt_compute_pop(const glt_gl *gl, const glt_compute_state *s);
/* gl_objects.c: compiles and links a compute program (`what` names it in errors, `hint` says what to do instead). */
glt_status glt_gl_compute_program(const glt_gl *gl, const char *source, const char *what, const char *hint,
                                  GLuint *program);
glt_status glt_cpu_reader_create(GLuint name, GLenum target, glt_cpu_reader **out);
void glt_cpu_reader_destroy(glt_cpu_reader *r); /* needs the context current to free GL objects */
/* Reads `rect` of a width x height image (only those pixels) into dst, top row first when flip. */
glt_status glt_cpu_reader_read(glt_cpu_reader *r, const glt_format *fmt, int width, int height, const glt_rect *rect,
                               void *dst, size_t dst_pitch, int flip);


/* ---- upload.c / buffer.c: the GL-side helpers (gl_objects.c) and the CUDA side (cuda_upload.c, cuda_buffer_map.c) ---- */
/* Size and internal format of level 0 of a texture, restoring the binding it touches. */
glt_status glt_gl_texture_query(const glt_gl *gl, GLuint name, GLenum target, int *width, int *height,
                                GLenum *internal_format);
/* glTexSubImage2D of tightly packed rows (bottom row first) with the caller's unpack state and
 * bindings saved, reset and restored. */
glt_status glt_gl_texture_write(const glt_gl *gl, GLuint name, GLenum target, int x, int y, int width, int height,
                                GLenum format, GLenum type, const void *pixels);
/* Buffer objects, bound to GL_COPY_WRITE_BUFFER for each call and the binding restored. */
glt_status glt_gl_buffer_size(const glt_gl *gl, GLuint name, size_t *size, int *gl_mapped);
/* A new buffer of `bytes` holding `data` (GL_STATIC_DRAW). */
glt_status glt_gl_buffer_create(const glt_gl *gl, size_t bytes, const void *data, GLuint *out);
glt_status glt_gl_buffer_map(const glt_gl *gl, GLuint name, size_t offset, size_t bytes, GLbitfield access,
                             void **out);
glt_status glt_gl_buffer_unmap(const glt_gl *gl, GLuint name);
glt_status glt_gl_buffer_get(const glt_gl *gl, GLuint name, size_t offset, size_t bytes, void *dst);
/* Whether glMapBufferRange with `access` is allowed: immutable storage (glBufferStorage) must carry the map bits. */
glt_status glt_gl_buffer_mappable(const glt_gl *gl, GLuint name, GLbitfield access, int *mappable);
/* Writes src into [offset, offset + bytes) of any buffer, immutable storage without GL_DYNAMIC_STORAGE_BIT too. */
glt_status glt_gl_buffer_put(const glt_gl *gl, GLuint name, size_t offset, size_t bytes, const void *src);

/* backend_choice.c: the backend an object of `what` uses: CUDA when the current GL context runs on a CUDA
 * device, unless 'cpu' was asked; 'cuda' fails when it cannot. frames: its reasons speak of frames (captures). */
glt_status glt_choose_backend(glt_backend requested, int requested_device, const char *what, int frames,
                              glt_backend *backend, int *cuda_device, char *reason, size_t reason_size);
/* The backend of shared slots (slots.c): CUDA on the requested device (GLT_CUDA_DEVICE_AUTO: the default one)
 * where CUDA runs, shared host memory otherwise, unless 'cuda' was asked; *cuda_device is set for CUDA only. */
glt_status glt_choose_slots_backend(glt_backend requested, int requested_device, glt_backend *backend,
                                    int *cuda_device, char *reason, size_t reason_size);

/* context_switch.c: makes `ctx` current in this thread (surfaceless; EGL contexts only) to release an object
 * in its own context. 1 when ctx is current on return (already, or now); 0 when it cannot be made current
 * here. glt_gl_context_leave puts the caller's context (or none) back. */
typedef struct glt_gl_context_saved {
    glt_gl_context_id prev, entered;
    void *draw, *read;
    int switched;
} glt_gl_context_saved;
int glt_gl_context_enter(glt_gl_context_id ctx, glt_gl_context_saved *saved);
/* glt_context_restore without a message on failure: for restores after a failed call, whose message must stay. */
void glt_context_restore_quietly(const glt_saved_context *saved);
glt_status glt_context_restore_or_release(const glt_saved_context *saved);
void glt_gl_context_leave(glt_gl_context_saved *saved);

/* object_base.c: how a texture's format is written (GLT_DST_*, kernels.h), or -1 when it cannot be. */
int glt_write_dst_type(const glt_format *fmt);


/* ---- egl_context.c ---- */
/* GLT_UNSUPPORTED (saying what to do) in the child of a process that made an NVIDIA EGL context through gltensor:
 * NVIDIA's EGL does not survive fork. */
glt_status glt_egl_fork_check(void);

/* ---- slot_writer.c ---- */
/* GLT_OK where the current GL context can write CUDA shared slots (GL_EXT_memory_object_fd). */
glt_status glt_slot_writer_gl_supported(void);

/* slot_writer.c, for tests only (_gltensor._slots_fail_next_write_for_testing): the next GL write into a shared slot
 * in this process fails as a GL error in its copy would, after the slot was marked being written. */
void glt_slot_writer_fail_next_write_for_testing(void);

/* slots.c, for tests only (_gltensor._closed_slots_alive_for_testing): the trainer's slots objects of this process
 * destroyed but not yet freed (a zero-copy view still holds them). */
int glt_slots_closed_alive_for_testing(void);
/* slots.c, for tests only (_gltensor._slots_weak_control_for_testing): slots made while on leave their control page
 * unsealed against other processes' writes, as on a kernel before Linux 5.1 (the trainer's recovery is tested so). */
void glt_slots_weak_control_for_testing(int on);

#endif
