/*
 * Bad input on every entry of the C API (include/gltensor.h), from a C program without Python: NULL handles and
 * pointers, wrong targets, names that are no GL object, deleted names, a renderbuffer passed as a texture,
 * unsupported formats, no current context, the wrong context, destinations of every wrong kind, read options out
 * of range, bad grids and tiles. Each case must return the expected status with a message in glt_last_error();
 * destroy(NULL) must be a no-op. Built by tests/reliability/test_c_api.py (with ASan/UBSan when the compiler has
 * them). Prints one line per failed case and "c-api cases: N, failed: F".
 */
#include "gltensor.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned GLenum_;
typedef void (*gen_fn)(int, unsigned *);
typedef void (*bind_fn)(GLenum_, unsigned);
typedef void (*image_fn)(GLenum_, int, int, int, int, int, GLenum_, GLenum_, const void *);
typedef void (*storage_fn)(GLenum_, GLenum_, int, int);
typedef void (*delete_fn)(int, const unsigned *);
typedef void *(*proc_fn)(const char *);
typedef void (*buffer_data_fn)(GLenum_, intptr_t, const void *, GLenum_);

static int cases, failed;

static void expect(int line, const char *what, glt_status got, glt_status want) {
    ++cases;
    const char *msg = glt_last_error();
    int ok = want == GLT_OK ? got == GLT_OK : (got == want && msg && strlen(msg) >= 10);
    if (!ok) {
        ++failed;
        printf("FAIL line %d: %s -> %s (want %s), message: \"%s\"\n", line, what, glt_status_name(got),
               glt_status_name(want), msg ? msg : "(null)");
    }
}
#define EXPECT(call, want) expect(__LINE__, #call, (call), (want))
#define NOOP(call)                                                                                                   \
    do {                                                                                                             \
        ++cases;                                                                                                     \
        call;                                                                                                        \
    } while (0)

static glt_buffer_view host_view(void *data, int h, int w, int c) {
    glt_buffer_view v;
    memset(&v, 0, sizeof v);
    v.data = data;
    v.memory = GLT_MEMORY_HOST;
    v.cuda_device = -1;
    v.dtype = GLT_DTYPE_UINT8;
    v.ndim = 3;
    v.shape[0] = h, v.shape[1] = w, v.shape[2] = c;
    v.strides_bytes[0] = (int64_t)w * c, v.strides_bytes[1] = c, v.strides_bytes[2] = 1;
    return v;
}

int main(void) {
    void *egl = dlopen("libEGL.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!egl) {
        printf("SKIP: libEGL.so.1: %s\n", dlerror());
        return 77;
    }
    proc_fn get = (proc_fn)dlsym(egl, "eglGetProcAddress");
    glt_context *ctx = NULL, *other = NULL;
    glt_context_desc cd;
    glt_context_desc_init(&cd);

    /* ---- no context yet */
    glt_capture_desc d;
    glt_capture_desc_init(&d);
    d.gl_name = 1;
    glt_capture *cap = NULL;
    EXPECT(glt_capture_create(&d, &cap), GLT_NO_CONTEXT);

    /* ---- contexts */
    EXPECT(glt_context_create_headless(NULL, &ctx), GLT_OK); /* NULL desc: the defaults */
    glt_context_destroy(ctx);
    ctx = NULL;
    EXPECT(glt_context_create_headless(&cd, NULL), GLT_INVALID_ARGUMENT);
    EXPECT(glt_context_make_current(NULL), GLT_INVALID_ARGUMENT);
    glt_context_info ci;
    EXPECT(glt_context_get_info(NULL, &ci), GLT_INVALID_ARGUMENT);
    glt_context_desc bad = cd;
    bad.cuda_device = 99; /* an explicit device no machine here has: refused, never a software context */
    glt_context *c99 = NULL;
    glt_status s99 = glt_context_create_headless(&bad, &c99);
    ++cases;
    if (s99 == GLT_OK || c99) {
        ++failed;
        printf("FAIL: cuda_device=99 gave a context\n");
        glt_context_destroy(c99);
    }
    bad = cd;
    bad.gl_major = 99;
    glt_context *c9 = NULL;
    glt_status s9 = glt_context_create_headless(&bad, &c9);
    ++cases;
    if (s9 == GLT_OK) glt_context_destroy(c9); /* GL 99 may fall back or fail: either is fine, but no crash */
    int idx;
    EXPECT(glt_egl_device_index(-5, &idx), glt_cuda_compiled() ? GLT_INVALID_ARGUMENT : GLT_CUDA_UNAVAILABLE);
    EXPECT(glt_default_cuda_device(NULL), GLT_INVALID_ARGUMENT);

    cd.cuda_device = -2;
    if (glt_context_create_headless(&cd, &ctx) != GLT_OK) {
        printf("SKIP: no headless context: %s\n", glt_last_error());
        return 77;
    }
    EXPECT(glt_context_get_info(ctx, NULL), GLT_INVALID_ARGUMENT);
    gen_fn gen_tex = (gen_fn)get("glGenTextures"), gen_rb = (gen_fn)get("glGenRenderbuffers");
    bind_fn bind_tex = (bind_fn)get("glBindTexture"), bind_rb = (bind_fn)get("glBindRenderbuffer");
    image_fn image = (image_fn)get("glTexImage2D");
    storage_fn rb_storage = (storage_fn)get("glRenderbufferStorage");
    delete_fn del_tex = (delete_fn)get("glDeleteTextures");
    unsigned tex, tex2, gone, odd, rb;
    gen_tex(1, &tex), gen_tex(1, &tex2), gen_tex(1, &gone), gen_tex(1, &odd), gen_rb(1, &rb);
    bind_tex(0x0DE1, tex);
    image(0x0DE1, 0, 0x8058 /* RGBA8 */, 64, 32, 0, 0x1908, 0x1401, NULL);
    bind_tex(0x0DE1, tex2);
    image(0x0DE1, 0, 0x8058, 32, 32, 0, 0x1908, 0x1401, NULL);
    bind_tex(0x0DE1, gone);
    image(0x0DE1, 0, 0x8058, 4, 4, 0, 0x1908, 0x1401, NULL);
    del_tex(1, &gone);
    bind_tex(0x0DE1, odd);
    image(0x0DE1, 0, 0x8059 /* RGB10_A2 */, 4, 4, 0, 0x1908, 0x8368, NULL);
    bind_tex(0x0DE1, 0);
    bind_rb(0x8D41, rb);
    rb_storage(0x8D41, 0x8058, 8, 8);

    /* ---- glt_capture_create */
    EXPECT(glt_capture_create(NULL, &cap), GLT_INVALID_ARGUMENT);
    d.gl_name = tex;
    EXPECT(glt_capture_create(&d, NULL), GLT_INVALID_ARGUMENT);
    d.gl_target = 0x1234;
    EXPECT(glt_capture_create(&d, &cap), GLT_INVALID_ARGUMENT);
    d.gl_target = 0x8513; /* cube map */
    EXPECT(glt_capture_create(&d, &cap), GLT_INVALID_ARGUMENT);
    d.gl_target = GLT_TEXTURE_2D;
    d.backend = (glt_backend)77;
    EXPECT(glt_capture_create(&d, &cap), GLT_INVALID_ARGUMENT);
    d.backend = GLT_BACKEND_CPU;
    d.gl_name = 0;
    EXPECT(glt_capture_create(&d, &cap), GLT_INVALID_OBJECT);
    d.gl_name = 123456;
    EXPECT(glt_capture_create(&d, &cap), GLT_INVALID_OBJECT);
    d.gl_name = gone;
    EXPECT(glt_capture_create(&d, &cap), GLT_INVALID_OBJECT);
    d.gl_name = odd;
    EXPECT(glt_capture_create(&d, &cap), GLT_UNSUPPORTED_FORMAT);
    d.gl_name = tex;
    d.gl_target = GLT_RENDERBUFFER; /* a texture passed as a renderbuffer */
    if (tex != rb) EXPECT(glt_capture_create(&d, &cap), GLT_INVALID_OBJECT);
    d.gl_name = rb;
    d.gl_target = GLT_TEXTURE_2D; /* a renderbuffer passed as a texture */
    if (rb != tex && rb != tex2 && rb != odd) EXPECT(glt_capture_create(&d, &cap), GLT_INVALID_OBJECT);
    d.gl_name = tex;
    d.gl_target = GLT_TEXTURE_RECTANGLE; /* a 2D texture under another target */
    EXPECT(glt_capture_create(&d, &cap), GLT_INVALID_OBJECT);
    d.gl_target = GLT_TEXTURE_2D;
    if (!glt_cuda_compiled()) {
        d.backend = GLT_BACKEND_CUDA;
        EXPECT(glt_capture_create(&d, &cap), GLT_CUDA_UNAVAILABLE);
        d.backend = GLT_BACKEND_CPU;
    }
    EXPECT(glt_capture_create(&d, &cap), GLT_OK);

    /* ---- capture info, refresh, reads */
    glt_capture_info info;
    EXPECT(glt_capture_get_info(NULL, &info), GLT_INVALID_ARGUMENT);
    EXPECT(glt_capture_get_info(cap, NULL), GLT_INVALID_ARGUMENT);
    EXPECT(glt_capture_refresh(NULL, NULL), GLT_CLOSED);
    glt_frame *f = NULL;
    EXPECT(glt_capture_read(NULL, NULL, &f), GLT_CLOSED);
    EXPECT(glt_capture_read(cap, NULL, NULL), GLT_INVALID_ARGUMENT);
    glt_read_options o;
    glt_read_options_init(&o);
    o.n_channels = 5;
    EXPECT(glt_capture_read(cap, &o, &f), GLT_INVALID_ARGUMENT);
    o.n_channels = 2, o.channels[0] = 0, o.channels[1] = 7;
    EXPECT(glt_capture_read(cap, &o, &f), GLT_INVALID_ARGUMENT);
    o.channels[1] = -1;
    EXPECT(glt_capture_read(cap, &o, &f), GLT_INVALID_ARGUMENT);
    glt_read_options_init(&o);
    o.convert_dtype = 1, o.dtype = (glt_dtype)99;
    EXPECT(glt_capture_read(cap, &o, &f), GLT_INVALID_ARGUMENT);
    o.dtype = GLT_DTYPE_UINT32; /* not an output type */
    EXPECT(glt_capture_read(cap, &o, &f), GLT_INVALID_ARGUMENT);
    glt_read_options_init(&o);
    o.order = (glt_order)7;
    EXPECT(glt_capture_read(cap, &o, &f), GLT_INVALID_ARGUMENT);
    glt_read_options_init(&o);
    o.cuda_stream = (void *)(uintptr_t)0x1000;
    EXPECT(glt_capture_read(cap, &o, &f), GLT_INVALID_ARGUMENT);
    glt_read_options_init(&o);
    o.depth = (glt_depth_mode)1;
    EXPECT(glt_capture_read(cap, &o, &f), GLT_INVALID_ARGUMENT);
    o.depth = (glt_depth_mode)99;
    EXPECT(glt_capture_read(cap, &o, &f), GLT_INVALID_ARGUMENT);

    /* ---- read_into: destinations of every wrong kind */
    static unsigned char buf[64 * 32 * 4 * 2 + 64];
    glt_buffer_view v = host_view(buf, 32, 64, 4);
    EXPECT(glt_capture_read_into(cap, NULL, NULL), GLT_INVALID_ARGUMENT);
    EXPECT(glt_capture_read_into(NULL, NULL, &v), GLT_CLOSED);
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_OK);
    v.data = NULL;
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 3);
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 64, 32, 4);
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 4);
    v.ndim = 5;
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v.ndim = 2;
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v.ndim = -1;
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 4);
    v.dtype = GLT_DTYPE_FLOAT32;
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v.dtype = (glt_dtype)42;
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 4);
    v.strides_bytes[2] = 2; /* channels not contiguous */
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 4);
    v.strides_bytes[0] = 16; /* rows overlapping */
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 4);
    v.strides_bytes[0] = -256; /* negative row stride */
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 4);
    v.strides_bytes[0] = INT64_MAX / 2; /* rows beyond any address space */
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 4);
    v.shape[0] = -32;
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 4);
    v.shape[1] = (int64_t)1 << 40;
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 4);
    v.read_only = 1;
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 4);
    v.memory = GLT_MEMORY_CUDA;
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);
    v.memory = (glt_memory)9;
    EXPECT(glt_capture_read_into(cap, NULL, &v), GLT_INVALID_ARGUMENT);

    /* ---- frames */
    EXPECT(glt_capture_read(cap, NULL, &f), GLT_OK);
    glt_frame *g = NULL;
    EXPECT(glt_frame_clone(NULL, &g), GLT_INVALID_ARGUMENT);
    EXPECT(glt_frame_clone(f, NULL), GLT_INVALID_ARGUMENT);
    EXPECT(glt_frame_sync_stream(NULL, NULL), GLT_INVALID_ARGUMENT);
    EXPECT(glt_frame_synchronize(NULL), GLT_INVALID_ARGUMENT);
    EXPECT(glt_frame_sync_stream(f, (void *)(uintptr_t)1), GLT_OK); /* a host frame: nothing to wait for */

    /* ---- wrong context: the capture belongs to ctx */
    glt_context_desc_init(&cd);
    cd.force_software = 1;
    if (glt_context_create_headless(&cd, &other) == GLT_OK) {
        EXPECT(glt_capture_read(cap, NULL, &g), GLT_WRONG_CONTEXT);
        EXPECT(glt_capture_refresh(cap, NULL), GLT_WRONG_CONTEXT);
        EXPECT(glt_context_release_current(other), GLT_OK);
        EXPECT(glt_capture_read(cap, NULL, &g), GLT_NO_CONTEXT);
        EXPECT(glt_context_make_current(ctx), GLT_OK);
        glt_context_destroy(other);
    }

    /* ---- batches */
    glt_batch *b = NULL;
    glt_capture *two[2] = {cap, NULL};
    EXPECT(glt_batch_create(NULL, 1, &b), GLT_INVALID_ARGUMENT);
    EXPECT(glt_batch_create(two, 0, &b), GLT_INVALID_ARGUMENT);
    EXPECT(glt_batch_create(two, -1, &b), GLT_INVALID_ARGUMENT);
    EXPECT(glt_batch_create(two, 1, NULL), GLT_INVALID_ARGUMENT);
    EXPECT(glt_batch_create(two, 2, &b), GLT_INVALID_ARGUMENT); /* a NULL capture */
    two[1] = cap;
    EXPECT(glt_batch_create(two, 2, &b), GLT_INVALID_ARGUMENT); /* the same image twice */
    glt_capture *cap2 = NULL;
    d.gl_name = tex2;
    EXPECT(glt_capture_create(&d, &cap2), GLT_OK);
    two[1] = cap2;
    EXPECT(glt_batch_create(two, 2, &b), GLT_OK);
    EXPECT(glt_batch_read(NULL, NULL, &g), GLT_INVALID_ARGUMENT);
    EXPECT(glt_batch_read(b, NULL, NULL), GLT_INVALID_ARGUMENT);
    EXPECT(glt_batch_read(b, NULL, &g), GLT_INVALID_ARGUMENT); /* 64x32 and 32x32: read_each only */
    EXPECT(glt_batch_read_each(b, NULL, NULL), GLT_INVALID_ARGUMENT);
    EXPECT(glt_batch_read_each(NULL, NULL, NULL), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 32, 64, 4);
    EXPECT(glt_batch_read_into(b, NULL, &v), GLT_INVALID_ARGUMENT);
    EXPECT(glt_batch_read_into(b, NULL, NULL), GLT_INVALID_ARGUMENT);
    glt_frame *each[2] = {NULL, NULL};
    EXPECT(glt_batch_read_each(b, NULL, each), GLT_OK);
    glt_frame_destroy(each[0]);
    glt_frame_destroy(each[1]);
    ++cases;
    if (glt_batch_count(NULL) != 0) ++failed, printf("FAIL: glt_batch_count(NULL) != 0\n");
    glt_batch_destroy(b);

    /* ---- atlases */
    glt_atlas *a = NULL;
    glt_atlas_desc ad;
    glt_atlas_desc_init(&ad);
    ad.source = d;
    ad.source.gl_name = tex;
    EXPECT(glt_atlas_create(NULL, &a), GLT_INVALID_ARGUMENT);
    ad.rows = 2, ad.cols = 2;
    EXPECT(glt_atlas_create(&ad, NULL), GLT_INVALID_ARGUMENT);
    ad.rows = -1;
    EXPECT(glt_atlas_create(&ad, &a), GLT_INVALID_ARGUMENT);
    ad.rows = 64, ad.cols = 64; /* more rows than pixels */
    EXPECT(glt_atlas_create(&ad, &a), GLT_INVALID_ARGUMENT);
    ad.rows = 2, ad.cols = 2, ad.count = 5;
    EXPECT(glt_atlas_create(&ad, &a), GLT_INVALID_ARGUMENT);
    ad.count = -3;
    EXPECT(glt_atlas_create(&ad, &a), GLT_INVALID_ARGUMENT);
    ad.count = 0, ad.tile_height = 33, ad.tile_width = 8;
    EXPECT(glt_atlas_create(&ad, &a), GLT_INVALID_ARGUMENT);
    ad.rows = 0, ad.cols = 0, ad.tile_height = 0, ad.tile_width = 0;
    EXPECT(glt_atlas_create(&ad, &a), GLT_INVALID_ARGUMENT); /* neither a grid nor a tile size */
    ad.source.gl_name = gone, ad.rows = 1, ad.cols = 1;
    EXPECT(glt_atlas_create(&ad, &a), GLT_INVALID_OBJECT);
    ad.source.gl_name = tex, ad.rows = 2, ad.cols = 2;
    EXPECT(glt_atlas_create(&ad, &a), GLT_OK);
    int vp[4];
    EXPECT(glt_atlas_viewport(a, -1, vp), GLT_INVALID_ARGUMENT);
    EXPECT(glt_atlas_viewport(a, 4, vp), GLT_INVALID_ARGUMENT);
    EXPECT(glt_atlas_viewport(a, 0, NULL), GLT_INVALID_ARGUMENT);
    EXPECT(glt_atlas_viewport(NULL, 0, vp), GLT_INVALID_ARGUMENT);
    EXPECT(glt_atlas_read(NULL, NULL, &g), GLT_INVALID_ARGUMENT);
    EXPECT(glt_atlas_read(a, NULL, NULL), GLT_INVALID_ARGUMENT);
    v = host_view(buf, 16, 32, 4);
    EXPECT(glt_atlas_read_into(a, NULL, &v), GLT_INVALID_ARGUMENT); /* (4, 16, 32, 4) expected */
    EXPECT(glt_atlas_read_into(a, NULL, NULL), GLT_INVALID_ARGUMENT);
    ++cases;
    if (glt_atlas_capture(NULL) != NULL) ++failed, printf("FAIL: glt_atlas_capture(NULL)\n");
    glt_atlas_destroy(a);

    /* ---- names of out-of-range enums, and destroy(NULL) */
    ++cases;
    if (!glt_status_name((glt_status)999) || !glt_dtype_name((glt_dtype)99) || !glt_backend_name((glt_backend)99) ||
        !glt_status_description((glt_status)-5))
        ++failed, printf("FAIL: a name function returned NULL for an unknown value\n");
    NOOP(glt_context_destroy(NULL));
    NOOP(glt_capture_destroy(NULL));
    NOOP(glt_frame_destroy(NULL));
    NOOP(glt_batch_destroy(NULL));
    NOOP(glt_atlas_destroy(NULL));

    /* ---- #22: the environment checked at creation; a buffer mapping never forgotten while it exists */
    setenv("GLTENSOR_DEPTH_PATH", "readpixel", 1);
    d.gl_name = tex;
    glt_capture *env_cap = NULL;
    EXPECT(glt_capture_create(&d, &env_cap), GLT_INVALID_ARGUMENT);
    unsetenv("GLTENSOR_DEPTH_PATH");
    EXPECT(glt_buffer_check_mapping(NULL), GLT_CLOSED);
    gen_fn gen_buf = (gen_fn)get("glGenBuffers");
    bind_fn bind_buf = (bind_fn)get("glBindBuffer");
    buffer_data_fn buffer_data = (buffer_data_fn)get("glBufferData");
    unsigned vbo = 0;
    gen_buf(1, &vbo);
    bind_buf(0x8892 /* GL_ARRAY_BUFFER */, vbo);
    buffer_data(0x8892, 64, NULL, 0x88E8 /* GL_DYNAMIC_DRAW */);
    bind_buf(0x8892, 0);
    glt_buffer_desc bd;
    glt_buffer_desc_init(&bd);
    bd.gl_name = vbo;
    bd.backend = GLT_BACKEND_CPU;
    glt_buffer *gbuf = NULL;
    glt_buffer_mapping bm;
    EXPECT(glt_buffer_create(&bd, &gbuf), GLT_OK);
    EXPECT(glt_buffer_check_mapping(gbuf), GLT_INVALID_ARGUMENT); /* not mapped */
    EXPECT(glt_buffer_map(gbuf, GLT_MAP_READ_WRITE, 0, 0, NULL, &bm), GLT_OK);
    glt_context_desc_init(&cd);
    cd.force_software = 1;
    glt_context *third = NULL;
    if (glt_context_create_headless(&cd, &third) == GLT_OK) {
        EXPECT(glt_buffer_unmap(gbuf), GLT_WRONG_CONTEXT); /* refused: stays mapped */
        EXPECT(glt_buffer_check_mapping(gbuf), GLT_OK);
        EXPECT(glt_context_release_current(third), GLT_OK);
        EXPECT(glt_buffer_unmap(gbuf), GLT_NO_CONTEXT);
        EXPECT(glt_buffer_check_mapping(gbuf), GLT_OK);
        glt_context_destroy(third);
    }
    EXPECT(glt_context_make_current(ctx), GLT_OK);
    EXPECT(glt_buffer_unmap(gbuf), GLT_OK);
    EXPECT(glt_buffer_unmap(gbuf), GLT_INVALID_ARGUMENT);
    EXPECT(glt_buffer_map(gbuf, GLT_MAP_WRITE, 0, 0, NULL, &bm), GLT_OK); /* left mapped for the destroy below */

    /* ---- the context closed under live captures and frames: frames stay readable, captures refuse with
     * GLT_CLOSED (the context is gone; no context to make current), #22 */
    glt_frame_info fi;
    glt_frame_get_info(f, &fi);
    glt_context_destroy(ctx);
    ++cases;
    volatile unsigned char first = ((unsigned char *)fi.data)[0]; /* the frame's memory is still ours */
    (void)first;
    EXPECT(glt_capture_read(cap, NULL, &g), GLT_CLOSED);
    EXPECT(glt_buffer_check_mapping(gbuf), GLT_CLOSED); /* the mapping went with the context */
    EXPECT(glt_buffer_unmap(gbuf), GLT_INVALID_ARGUMENT);
    glt_buffer_destroy(gbuf);
    glt_frame_destroy(f);
    glt_capture_destroy(cap);
    glt_capture_destroy(cap2);

    printf("c-api cases: %d, failed: %d\n", cases, failed);
    return failed ? 1 : 0;
}
