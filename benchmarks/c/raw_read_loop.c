/*
 * raw_read_loop: CPU cost of one capture call, from C, without Python in the way.
 *
 *   raw_read_loop [WIDTH [HEIGHT [ITERATIONS]]]      (defaults 1024 1024 2000)
 *
 * On a headless context it makes one WxH RGBA8 texture, then times, with no rendering in between:
 *   (i)  the raw CUDA calls a hand-written capture makes per frame: map, get mapped array,
 *        cudaMemcpy2DFromArrayAsync, unmap;
 *   (ii) glt_capture_read_into with flip 0 and flip 1 into a cudaMalloc'd buffer.
 * Each loop is timed with clock_gettime over all iterations and synchronised once, at the end, so
 * the figure is the CPU time per call (plus the amortised tail of the queue). The program prints
 * one JSON object, on one line. Without a usable CUDA device (no driver, no GPU, a software GL context) it
 * prints {"error": ...} and exits 2; any other failure exits 1.
 *
 * Needs no GL headers (the GPU machine has none): the few GL types, constants and entry points
 * used are declared here and resolved at run time. cuda_gl_interop.h is not included for the same
 * reason (it includes GL/gl.h); its one function is declared below.
 */
#define _POSIX_C_SOURCE 199309L

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "gltensor.h"

/* ---- the GL subset this program needs ---- */
typedef unsigned int GLenum;
typedef unsigned int GLuint;
typedef unsigned int GLbitfield;
typedef int GLint;
typedef int GLsizei;
typedef float GLfloat;
typedef unsigned char GLubyte;

#define GL_TEXTURE_2D 0x0DE1
#define GL_TEXTURE_MIN_FILTER 0x2801
#define GL_TEXTURE_MAG_FILTER 0x2800
#define GL_NEAREST 0x2600
#define GL_RGBA8 0x8058
#define GL_RGBA 0x1908
#define GL_UNSIGNED_BYTE 0x1401
#define GL_FRAMEBUFFER 0x8D40
#define GL_COLOR_ATTACHMENT0 0x8CE0
#define GL_FRAMEBUFFER_COMPLETE 0x8CD5
#define GL_COLOR_BUFFER_BIT 0x00004000
#define GL_SCISSOR_TEST 0x0C11
#define GL_RENDERER 0x1F01
#define GL_NO_ERROR 0

extern cudaError_t cudaGraphicsGLRegisterImage(struct cudaGraphicsResource **resource, unsigned int image,
                                               unsigned int target, unsigned int flags);

static struct {
    void (*GenTextures)(GLsizei, GLuint *);
    void (*DeleteTextures)(GLsizei, const GLuint *);
    void (*BindTexture)(GLenum, GLuint);
    void (*TexParameteri)(GLenum, GLenum, GLint);
    void (*TexImage2D)(GLenum, GLint, GLint, GLsizei, GLsizei, GLint, GLenum, GLenum, const void *);
    void (*GenFramebuffers)(GLsizei, GLuint *);
    void (*DeleteFramebuffers)(GLsizei, const GLuint *);
    void (*BindFramebuffer)(GLenum, GLuint);
    void (*FramebufferTexture2D)(GLenum, GLenum, GLenum, GLuint, GLint);
    GLenum (*CheckFramebufferStatus)(GLenum);
    void (*Viewport)(GLint, GLint, GLsizei, GLsizei);
    void (*Scissor)(GLint, GLint, GLsizei, GLsizei);
    void (*Enable)(GLenum);
    void (*Disable)(GLenum);
    void (*ClearColor)(GLfloat, GLfloat, GLfloat, GLfloat);
    void (*Clear)(GLbitfield);
    void (*Finish)(void);
    GLenum (*GetError)(void);
    const GLubyte *(*GetString)(GLenum);
} gl;

/* ---- output: one JSON object on stdout, success or not ---- */
static void json_string(const char *s) {
    putchar('"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

/* Prints {"program", "error"} and exits: 2 when CUDA cannot be used here, 1 for any other failure. */
static void die(int code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("{\"program\": \"raw_read_loop\", \"exit\": %d, \"error\": ", code);
    json_string(msg);
    printf("}\n");
    exit(code);
}

#define CUDA_CHECK(call)                                                                     \
    do {                                                                                     \
        cudaError_t err_ = (call);                                                           \
        if (err_ != cudaSuccess)                                                             \
            die(1, "%s failed (%s): %s", #call, cudaGetErrorName(err_), cudaGetErrorString(err_)); \
    } while (0)

#define GLT_CHECK(call)                                                                      \
    do {                                                                                     \
        glt_status st_ = (call);                                                             \
        if (st_ != GLT_OK)                                                                   \
            die(1, "%s failed (%s): %s", #call, glt_status_name(st_), glt_last_error());     \
    } while (0)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* libOpenGL exports the core entry points; eglGetProcAddress covers a libOpenGL that lacks one. */
static void load_gl(void) {
    void *libgl = dlopen("libOpenGL.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (!libgl)
        libgl = dlopen("libGL.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *libegl = dlopen("libEGL.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *(*get_proc)(const char *) = libegl ? (void *(*)(const char *))dlsym(libegl, "eglGetProcAddress") : NULL;
    if (!libgl && !get_proc)
        die(1, "cannot load libOpenGL.so.0 / libGL.so.1 or libEGL.so.1: %s", dlerror());
#define LOAD(field, name)                                                     \
    do {                                                                      \
        void *p_ = libgl ? dlsym(libgl, name) : NULL;                         \
        if (!p_ && get_proc)                                                  \
            p_ = get_proc(name);                                              \
        if (!p_)                                                              \
            die(1, "GL entry point %s not found", name);                      \
        *(void **)(&gl.field) = p_;                                           \
    } while (0)
    LOAD(GenTextures, "glGenTextures");
    LOAD(DeleteTextures, "glDeleteTextures");
    LOAD(BindTexture, "glBindTexture");
    LOAD(TexParameteri, "glTexParameteri");
    LOAD(TexImage2D, "glTexImage2D");
    LOAD(GenFramebuffers, "glGenFramebuffers");
    LOAD(DeleteFramebuffers, "glDeleteFramebuffers");
    LOAD(BindFramebuffer, "glBindFramebuffer");
    LOAD(FramebufferTexture2D, "glFramebufferTexture2D");
    LOAD(CheckFramebufferStatus, "glCheckFramebufferStatus");
    LOAD(Viewport, "glViewport");
    LOAD(Scissor, "glScissor");
    LOAD(Enable, "glEnable");
    LOAD(Disable, "glDisable");
    LOAD(ClearColor, "glClearColor");
    LOAD(Clear, "glClear");
    LOAD(Finish, "glFinish");
    LOAD(GetError, "glGetError");
    LOAD(GetString, "glGetString");
#undef LOAD
}

/* Bottom quarter (GL's first rows) in colour B, the rest in colour A: a flip is visible. Both
 * colours are k/255 so that they convert to exact bytes. */
static const unsigned char COLOR_A[4] = {51, 102, 153, 255}, COLOR_B[4] = {255, 0, 204, 255};

static void draw(int w, int h) {
    gl.Viewport(0, 0, w, h);
    gl.ClearColor(COLOR_A[0] / 255.0f, COLOR_A[1] / 255.0f, COLOR_A[2] / 255.0f, 1.0f);
    gl.Clear(GL_COLOR_BUFFER_BIT);
    gl.Enable(GL_SCISSOR_TEST);
    gl.Scissor(0, 0, w, h / 4 > 0 ? h / 4 : 1);
    gl.ClearColor(COLOR_B[0] / 255.0f, COLOR_B[1] / 255.0f, COLOR_B[2] / 255.0f, 1.0f);
    gl.Clear(GL_COLOR_BUFFER_BIT);
    gl.Disable(GL_SCISSOR_TEST);
    gl.Finish();
}

/* Row r of the bottom-up image must be colour B for r < h/4 (at least one row), else A. */
static int check_rows(const unsigned char *img, int w, int h, int flipped) {
    int b_rows = h / 4 > 0 ? h / 4 : 1;
    for (int r = 0; r < h; r++) {
        int gl_row = flipped ? h - 1 - r : r;
        const unsigned char *want = gl_row < b_rows ? COLOR_B : COLOR_A;
        const unsigned char *row = img + (size_t)r * w * 4;
        for (int x = 0; x < w; x++)
            if (memcmp(row + 4 * x, want, 4) != 0)
                return 0;
    }
    return 1;
}

static void fetch_and_check(const void *dev, unsigned char *host, int w, int h, int flipped, const char *what) {
    CUDA_CHECK(cudaMemcpy(host, dev, (size_t)w * h * 4, cudaMemcpyDeviceToHost));
    if (!check_rows(host, w, h, flipped))
        die(1, "%s: copied pixels differ from what was drawn (flip=%d)", what, flipped);
}

int main(int argc, char **argv) {
    int w = argc > 1 ? atoi(argv[1]) : 1024;
    int h = argc > 2 ? atoi(argv[2]) : w;
    int n = argc > 3 ? atoi(argv[3]) : 2000;
    const int warmup = 20;
    if (w <= 0 || h <= 0 || n <= 0)
        die(1, "usage: raw_read_loop [WIDTH [HEIGHT [ITERATIONS]]], all positive");

    glt_context_desc cdesc;
    glt_context_desc_init(&cdesc);
    glt_context *ctx = NULL;
    GLT_CHECK(glt_context_create_headless(&cdesc, &ctx));
    glt_context_info info = {0}; /* size 0: this release's layout (gltensor.h, "Struct sizes") */
    GLT_CHECK(glt_context_get_info(ctx, &info));
    load_gl();

    /* Exit 2 when CUDA cannot be used here, so that callers can tell "skipped" from "broken". */
    int ndev = 0;
    glt_status st = glt_cuda_probe(&ndev);
    if (st != GLT_OK)
        die(2, "CUDA unavailable (%s): %s", glt_status_name(st), glt_last_error());
    cudaError_t cerr = cudaGetDeviceCount(&ndev);
    if (cerr != cudaSuccess || ndev == 0)
        die(2, "CUDA unavailable: cudaGetDeviceCount: %s", cerr != cudaSuccess ? cudaGetErrorName(cerr) : "0 devices");
    if (info.cuda_device < 0)
        die(2, "the GL context (%s) runs on no CUDA device: CUDA-GL interop impossible", info.renderer);
    CUDA_CHECK(cudaSetDevice(info.cuda_device));
    CUDA_CHECK(cudaFree(0)); /* create the CUDA context outside the timed loops */

    GLuint tex = 0, fbo = 0;
    gl.GenTextures(1, &tex);
    gl.BindTexture(GL_TEXTURE_2D, tex);
    gl.TexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    gl.TexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    gl.TexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, NULL);
    gl.GenFramebuffers(1, &fbo);
    gl.BindFramebuffer(GL_FRAMEBUFFER, fbo);
    gl.FramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, tex, 0);
    if (gl.CheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
        die(1, "framebuffer incomplete");
    draw(w, h);
    GLenum glerr = gl.GetError();
    if (glerr != GL_NO_ERROR)
        die(1, "GL error 0x%04x while making the texture", glerr);

    size_t bytes = (size_t)w * h * 4, pitch = (size_t)w * 4;
    unsigned char *raw_buf = NULL, *glt_buf = NULL;
    unsigned char *host = malloc(bytes);
    if (!host)
        die(1, "out of host memory");
    CUDA_CHECK(cudaMalloc((void **)&raw_buf, bytes));
    CUDA_CHECK(cudaMalloc((void **)&glt_buf, bytes));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    /* (i) the raw CUDA calls */
    struct cudaGraphicsResource *res = NULL;
    CUDA_CHECK(cudaGraphicsGLRegisterImage(&res, tex, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsReadOnly));
    cudaArray_t array;
    double raw_calls = 0, raw_total = 0;
    for (int phase = 0; phase < 2; phase++) { /* phase 0 warms up, phase 1 is timed */
        int iters = phase ? n : warmup;
        CUDA_CHECK(cudaStreamSynchronize(stream));
        double t0 = now_s();
        for (int i = 0; i < iters; i++) {
            CUDA_CHECK(cudaGraphicsMapResources(1, &res, stream));
            CUDA_CHECK(cudaGraphicsSubResourceGetMappedArray(&array, res, 0, 0));
            CUDA_CHECK(cudaMemcpy2DFromArrayAsync(raw_buf, pitch, array, 0, 0, pitch, h, cudaMemcpyDeviceToDevice, stream));
            CUDA_CHECK(cudaGraphicsUnmapResources(1, &res, stream));
        }
        double t1 = now_s();
        CUDA_CHECK(cudaStreamSynchronize(stream));
        raw_calls = (t1 - t0) / iters * 1e6;
        raw_total = (now_s() - t0) / iters * 1e6;
    }
    fetch_and_check(raw_buf, host, w, h, 0, "raw CUDA copy");

    /* (ii) glt_capture_read_into, flip 0 and 1, on the same stream */
    glt_capture_desc desc;
    glt_capture_desc_init(&desc);
    desc.gl_name = tex;
    desc.gl_target = GLT_TEXTURE_2D;
    desc.backend = GLT_BACKEND_CUDA;
    desc.cuda_device = GLT_CUDA_DEVICE_ANY;
    glt_capture *cap = NULL;
    GLT_CHECK(glt_capture_create(&desc, &cap));
    glt_buffer_view dst;
    memset(&dst, 0, sizeof dst);
    dst.data = glt_buf;
    dst.memory = GLT_MEMORY_CUDA;
    dst.cuda_device = info.cuda_device;
    dst.dtype = GLT_DTYPE_UINT8;
    dst.ndim = 3;
    dst.shape[0] = h, dst.shape[1] = w, dst.shape[2] = 4;
    dst.strides_bytes[0] = (int64_t)pitch, dst.strides_bytes[1] = 4, dst.strides_bytes[2] = 1;
    dst.read_only = 0;
    double glt_calls[2] = {0, 0}, glt_total[2] = {0, 0};
    for (int flip = 0; flip < 2; flip++) {
        glt_read_options opts;
        glt_read_options_init(&opts);
        opts.flip = flip;
        opts.cuda_stream = stream;
        for (int phase = 0; phase < 2; phase++) {
            int iters = phase ? n : warmup;
            CUDA_CHECK(cudaStreamSynchronize(stream));
            double t0 = now_s();
            for (int i = 0; i < iters; i++)
                GLT_CHECK(glt_capture_read_into(cap, &opts, &dst));
            double t1 = now_s();
            CUDA_CHECK(cudaStreamSynchronize(stream));
            glt_calls[flip] = (t1 - t0) / iters * 1e6;
            glt_total[flip] = (now_s() - t0) / iters * 1e6;
        }
        fetch_and_check(glt_buf, host, w, h, flip, "glt_capture_read_into");
    }

    printf("{\"program\": \"raw_read_loop\", \"gltensor\": ");
    json_string(glt_version_string());
    printf(", \"width\": %d, \"height\": %d, \"iterations\": %d, \"warmup\": %d, \"gl_renderer\": ", w, h, n, warmup);
    json_string(info.renderer);
    printf(", \"cuda_device\": %d, \"check\": \"ok\", ", info.cuda_device);
    printf("\"raw_cuda_us\": %.3f, \"raw_cuda_calls_us\": %.3f, ", raw_total, raw_calls);
    printf("\"read_into_flip0_us\": %.3f, \"read_into_flip0_calls_us\": %.3f, ", glt_total[0], glt_calls[0]);
    printf("\"read_into_flip1_us\": %.3f, \"read_into_flip1_calls_us\": %.3f, ", glt_total[1], glt_calls[1]);
    printf("\"note\": \"*_us: CPU time per iteration incl. one sync at the end; *_calls_us: before that sync\"}\n");

    glt_capture_destroy(cap);
    CUDA_CHECK(cudaGraphicsUnregisterResource(res));
    cudaStreamDestroy(stream);
    cudaFree(raw_buf);
    cudaFree(glt_buf);
    free(host);
    gl.DeleteFramebuffers(1, &fbo);
    gl.DeleteTextures(1, &tex);
    glt_context_destroy(ctx);
    return 0;
}
