/* GL itself, for every folder above gl/ (gl/README.md): the loaded entry points, the identity of a context and
 * entering one, EGL devices, the internal formats gltensor knows and GL object helpers. Calls core/ only. */
#ifndef GLT_GL_H
#define GLT_GL_H

#include "core/core.h"
#include "gl/gl_api.h"

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
/* Names a glGetError code ("GL_INVALID_OPERATION"), for messages. */
const char *glt_gl_error_name(GLenum err);

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
/* "GL_DEPTH_COMPONENT24" for any enum we know, else "0x1234" in a static thread-local buffer. */
const char *glt_format_name(GLenum internal_format);
/* Why an uncapturable format is refused and what to do, for error messages. */
const char *glt_format_refusal_hint(GLenum internal_format);
const char *glt_target_name(GLenum target);

/* ---- gl_objects.c: GL object helpers, each restoring the bindings and state it touches ---- */
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

#endif
