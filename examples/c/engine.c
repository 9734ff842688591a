/*
 * engine.c: a tiny C "engine" that renders with OpenGL and hands each frame to gltensor.
 *
 *   make -C examples/c run            (or: examples/c/build/engine [WIDTH HEIGHT [FRAMES]])
 *
 * 1. glt_context_create_headless: an OpenGL 4.5 core context on the EGL device of CUDA device 0, or on
 *    Mesa's software renderer when there is no NVIDIA GPU (then the CPU backend runs).
 * 2. An RGBA8 colour texture + DEPTH24 renderbuffer in a framebuffer; a GLSL program draws two
 *    overlapping triangles at different depths (depth test on), rotating a little each frame.
 * 3. Per frame: glt_capture_read -> glt_frame_get_info (prints the CUDA device pointer or the host
 *    pointer, and the shape) -> compares the frame with glReadPixels of the same framebuffer (rows
 *    flipped: the frame is top row first, GL bottom-up) -> glt_frame_destroy.
 * 4. A second capture of the same texture with a region (desc.region: x, y from the bottom-left,
 *    width, height), as an engine whose image fills only part of its texture uses: its frames hold
 *    just that rectangle, compared with the same rectangle of glReadPixels.
 *
 * Needs no GL headers: the few GL types, constants and entry points are declared here and loaded with
 * dlsym from libOpenGL.so.0 (eglGetProcAddress as a fallback), like benchmarks/c/raw_read_loop.c.
 * Needs no CUDA headers either: when the library has the CUDA backend (ENGINE_WITH_CUDA, set by the
 * Makefile) the one CUDA call used to fetch a CUDA frame for the check, cudaMemcpy, is declared below.
 * Exit status 0 when every frame matched, 1 otherwise.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gltensor.h"

#ifdef ENGINE_WITH_CUDA
/* From cuda_runtime_api.h: cudaError_t cudaMemcpy(void *, const void *, size_t, enum cudaMemcpyKind). */
extern int cudaMemcpy(void *dst, const void *src, size_t count, int kind);
#define ENGINE_CUDA_MEMCPY_DEVICE_TO_HOST 2
#endif

/* ---- the GL subset this program needs ---- */
typedef unsigned int GLenum;
typedef unsigned int GLuint;
typedef unsigned int GLbitfield;
typedef int GLint;
typedef int GLsizei;
typedef float GLfloat;
typedef char GLchar;
typedef unsigned char GLubyte;
typedef unsigned char GLboolean;
typedef ptrdiff_t GLsizeiptr;

#define GL_NO_ERROR 0
#define GL_FALSE 0
#define GL_TRIANGLES 0x0004
#define GL_DEPTH_TEST 0x0B71
#define GL_LESS 0x0201
#define GL_UNPACK_ALIGNMENT 0x0CF5
#define GL_PACK_ALIGNMENT 0x0D05
#define GL_TEXTURE_2D 0x0DE1
#define GL_UNSIGNED_BYTE 0x1401
#define GL_FLOAT 0x1406
#define GL_RGBA 0x1908
#define GL_RENDERER 0x1F01
#define GL_NEAREST 0x2600
#define GL_TEXTURE_MAG_FILTER 0x2800
#define GL_TEXTURE_MIN_FILTER 0x2801
#define GL_RGBA8 0x8058
#define GL_ARRAY_BUFFER 0x8892
#define GL_STATIC_DRAW 0x88E4
#define GL_PIXEL_PACK_BUFFER 0x88EB
#define GL_FRAGMENT_SHADER 0x8B30
#define GL_VERTEX_SHADER 0x8B31
#define GL_COMPILE_STATUS 0x8B81
#define GL_LINK_STATUS 0x8B82
#define GL_FRAMEBUFFER_COMPLETE 0x8CD5
#define GL_COLOR_ATTACHMENT0 0x8CE0
#define GL_DEPTH_ATTACHMENT 0x8D00
#define GL_FRAMEBUFFER 0x8D40
#define GL_RENDERBUFFER 0x8D41
#define GL_DEPTH_COMPONENT24 0x81A6
#define GL_COLOR_BUFFER_BIT 0x00004000
#define GL_DEPTH_BUFFER_BIT 0x00000100

static struct {
    void (*GenTextures)(GLsizei, GLuint *);
    void (*DeleteTextures)(GLsizei, const GLuint *);
    void (*BindTexture)(GLenum, GLuint);
    void (*TexParameteri)(GLenum, GLenum, GLint);
    void (*TexImage2D)(GLenum, GLint, GLint, GLsizei, GLsizei, GLint, GLenum, GLenum, const void *);
    void (*GenRenderbuffers)(GLsizei, GLuint *);
    void (*DeleteRenderbuffers)(GLsizei, const GLuint *);
    void (*BindRenderbuffer)(GLenum, GLuint);
    void (*RenderbufferStorage)(GLenum, GLenum, GLsizei, GLsizei);
    void (*GenFramebuffers)(GLsizei, GLuint *);
    void (*DeleteFramebuffers)(GLsizei, const GLuint *);
    void (*BindFramebuffer)(GLenum, GLuint);
    void (*FramebufferTexture2D)(GLenum, GLenum, GLenum, GLuint, GLint);
    void (*FramebufferRenderbuffer)(GLenum, GLenum, GLenum, GLuint);
    GLenum (*CheckFramebufferStatus)(GLenum);
    GLuint (*CreateShader)(GLenum);
    void (*ShaderSource)(GLuint, GLsizei, const GLchar *const *, const GLint *);
    void (*CompileShader)(GLuint);
    void (*GetShaderiv)(GLuint, GLenum, GLint *);
    void (*GetShaderInfoLog)(GLuint, GLsizei, GLsizei *, GLchar *);
    void (*DeleteShader)(GLuint);
    GLuint (*CreateProgram)(void);
    void (*AttachShader)(GLuint, GLuint);
    void (*LinkProgram)(GLuint);
    void (*GetProgramiv)(GLuint, GLenum, GLint *);
    void (*GetProgramInfoLog)(GLuint, GLsizei, GLsizei *, GLchar *);
    void (*UseProgram)(GLuint);
    void (*DeleteProgram)(GLuint);
    GLint (*GetUniformLocation)(GLuint, const GLchar *);
    void (*Uniform1f)(GLint, GLfloat);
    void (*GenVertexArrays)(GLsizei, GLuint *);
    void (*DeleteVertexArrays)(GLsizei, const GLuint *);
    void (*BindVertexArray)(GLuint);
    void (*GenBuffers)(GLsizei, GLuint *);
    void (*DeleteBuffers)(GLsizei, const GLuint *);
    void (*BindBuffer)(GLenum, GLuint);
    void (*BufferData)(GLenum, GLsizeiptr, const void *, GLenum);
    void (*VertexAttribPointer)(GLuint, GLint, GLenum, GLboolean, GLsizei, const void *);
    void (*EnableVertexAttribArray)(GLuint);
    void (*DrawArrays)(GLenum, GLint, GLsizei);
    void (*Viewport)(GLint, GLint, GLsizei, GLsizei);
    void (*Enable)(GLenum);
    void (*DepthFunc)(GLenum);
    void (*ClearColor)(GLfloat, GLfloat, GLfloat, GLfloat);
    void (*ClearDepth)(double);
    void (*Clear)(GLbitfield);
    void (*PixelStorei)(GLenum, GLint);
    void (*ReadPixels)(GLint, GLint, GLsizei, GLsizei, GLenum, GLenum, void *);
    GLenum (*GetError)(void);
    const GLubyte *(*GetString)(GLenum);
} gl;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "engine: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

#define GLT_CHECK(call)                                                                       \
    do {                                                                                      \
        glt_status st_ = (call);                                                              \
        if (st_ != GLT_OK)                                                                    \
            die("%s failed (%s): %s", #call, glt_status_name(st_), glt_last_error());        \
    } while (0)

static void check_gl(const char *where) {
    GLenum e = gl.GetError();
    if (e != GL_NO_ERROR)
        die("GL error 0x%04x %s", e, where);
}

/* Called after glt_context_create_headless, so that eglGetProcAddress has a current context. */
static void load_gl(void) {
    void *libgl = dlopen("libOpenGL.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (!libgl)
        libgl = dlopen("libGL.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *libegl = dlopen("libEGL.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *(*get_proc)(const char *) = NULL;
    if (libegl)
        *(void **)(&get_proc) = dlsym(libegl, "eglGetProcAddress");
    if (!libgl && !get_proc)
        die("cannot load libOpenGL.so.0 / libGL.so.1 or libEGL.so.1: %s", dlerror());
#define LOAD(field)                                                   \
    do {                                                              \
        void *p_ = libgl ? dlsym(libgl, "gl" #field) : NULL;          \
        if (!p_ && get_proc)                                          \
            p_ = get_proc("gl" #field);                               \
        if (!p_)                                                      \
            die("GL entry point gl%s not found", #field);             \
        *(void **)(&gl.field) = p_;                                   \
    } while (0)
    LOAD(GenTextures); LOAD(DeleteTextures); LOAD(BindTexture); LOAD(TexParameteri); LOAD(TexImage2D);
    LOAD(GenRenderbuffers); LOAD(DeleteRenderbuffers); LOAD(BindRenderbuffer); LOAD(RenderbufferStorage);
    LOAD(GenFramebuffers); LOAD(DeleteFramebuffers); LOAD(BindFramebuffer); LOAD(FramebufferTexture2D);
    LOAD(FramebufferRenderbuffer); LOAD(CheckFramebufferStatus);
    LOAD(CreateShader); LOAD(ShaderSource); LOAD(CompileShader); LOAD(GetShaderiv); LOAD(GetShaderInfoLog);
    LOAD(DeleteShader); LOAD(CreateProgram); LOAD(AttachShader); LOAD(LinkProgram); LOAD(GetProgramiv);
    LOAD(GetProgramInfoLog); LOAD(UseProgram); LOAD(DeleteProgram); LOAD(GetUniformLocation); LOAD(Uniform1f);
    LOAD(GenVertexArrays); LOAD(DeleteVertexArrays); LOAD(BindVertexArray); LOAD(GenBuffers);
    LOAD(DeleteBuffers); LOAD(BindBuffer); LOAD(BufferData); LOAD(VertexAttribPointer);
    LOAD(EnableVertexAttribArray); LOAD(DrawArrays); LOAD(Viewport); LOAD(Enable); LOAD(DepthFunc);
    LOAD(ClearColor); LOAD(ClearDepth); LOAD(Clear); LOAD(PixelStorei); LOAD(ReadPixels); LOAD(GetError);
    LOAD(GetString);
#undef LOAD
}

static const char *VS =
    "#version 330 core\n"
    "uniform float angle;\n"
    "layout(location = 0) in vec3 pos;\n"
    "layout(location = 1) in vec3 color;\n"
    "out vec3 v_color;\n"
    "void main() {\n"
    "    float c = cos(angle), s = sin(angle);\n"
    "    v_color = color;\n"
    "    gl_Position = vec4(c * pos.x - s * pos.y, s * pos.x + c * pos.y, pos.z, 1.0);\n"
    "}\n";
static const char *FS =
    "#version 330 core\n"
    "in vec3 v_color;\n"
    "out vec4 frag;\n"
    "void main() { frag = vec4(v_color, 1.0); }\n";

static GLuint compile(GLenum type, const char *src) {
    GLuint s = gl.CreateShader(type);
    gl.ShaderSource(s, 1, &src, NULL);
    gl.CompileShader(s);
    GLint ok = 0;
    gl.GetShaderiv(s, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char log[2048];
        gl.GetShaderInfoLog(s, sizeof log, NULL, log);
        die("shader compile failed: %s", log);
    }
    return s;
}

static GLuint make_program(void) {
    GLuint vs = compile(GL_VERTEX_SHADER, VS), fs = compile(GL_FRAGMENT_SHADER, FS);
    GLuint p = gl.CreateProgram();
    gl.AttachShader(p, vs);
    gl.AttachShader(p, fs);
    gl.LinkProgram(p);
    GLint ok = 0;
    gl.GetProgramiv(p, GL_LINK_STATUS, &ok);
    if (!ok) {
        char log[2048];
        gl.GetProgramInfoLog(p, sizeof log, NULL, log);
        die("program link failed: %s", log);
    }
    gl.DeleteShader(vs);
    gl.DeleteShader(fs);
    return p;
}

/* Two triangles (pos xyz, colour rgb); the second is drawn first but is nearer, so the depth test matters. */
static const float VERTICES[] = {
    -0.8f, -0.7f, 0.5f,  1.0f, 0.2f, 0.1f,   0.6f, -0.6f, 0.5f,  0.1f, 1.0f, 0.2f,   -0.1f, 0.8f, 0.5f,  0.2f, 0.3f, 1.0f,
    -0.3f, -0.9f, -0.2f, 0.9f, 0.9f, 0.1f,   0.9f,  0.1f, -0.2f, 0.1f, 0.9f, 0.9f,   -0.6f, 0.5f, -0.2f, 0.9f, 0.1f, 0.9f,
};

int main(int argc, char **argv) {
    int w = argc > 2 ? atoi(argv[1]) : 97;
    int h = argc > 2 ? atoi(argv[2]) : 61;
    int frames = argc > 3 ? atoi(argv[3]) : 5;
    if (w <= 0 || h <= 0 || frames <= 0)
        die("usage: engine [WIDTH HEIGHT [FRAMES]], all positive");

    glt_context_desc cdesc;
    glt_context_desc_init(&cdesc); /* CUDA device 0's EGL device, else Mesa's software device */
    glt_context *ctx = NULL;
    GLT_CHECK(glt_context_create_headless(&cdesc, &ctx));
    glt_context_info cinfo = {0}; /* size 0: this release's layout (gltensor.h, "Struct sizes") */
    GLT_CHECK(glt_context_get_info(ctx, &cinfo));
    load_gl();
    printf("gltensor %s, GL %s on %s (cuda_device %d)\n", glt_version_string(), cinfo.version, cinfo.renderer,
           cinfo.cuda_device);

    /* render target: RGBA8 texture + 24-bit depth renderbuffer */
    GLuint tex = 0, depth = 0, fbo = 0, vao = 0, vbo = 0;
    gl.GenTextures(1, &tex);
    gl.BindTexture(GL_TEXTURE_2D, tex);
    gl.TexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    gl.TexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    gl.TexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, NULL);
    gl.BindTexture(GL_TEXTURE_2D, 0);
    gl.GenRenderbuffers(1, &depth);
    gl.BindRenderbuffer(GL_RENDERBUFFER, depth);
    gl.RenderbufferStorage(GL_RENDERBUFFER, GL_DEPTH_COMPONENT24, w, h);
    gl.GenFramebuffers(1, &fbo);
    gl.BindFramebuffer(GL_FRAMEBUFFER, fbo);
    gl.FramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, tex, 0);
    gl.FramebufferRenderbuffer(GL_FRAMEBUFFER, GL_DEPTH_ATTACHMENT, GL_RENDERBUFFER, depth);
    if (gl.CheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
        die("framebuffer incomplete");

    GLuint prog = make_program();
    GLint angle_loc = gl.GetUniformLocation(prog, "angle");
    gl.GenVertexArrays(1, &vao);
    gl.BindVertexArray(vao);
    gl.GenBuffers(1, &vbo);
    gl.BindBuffer(GL_ARRAY_BUFFER, vbo);
    gl.BufferData(GL_ARRAY_BUFFER, sizeof VERTICES, VERTICES, GL_STATIC_DRAW);
    gl.VertexAttribPointer(0, 3, GL_FLOAT, GL_FALSE, 6 * sizeof(float), (const void *)0);
    gl.VertexAttribPointer(1, 3, GL_FLOAT, GL_FALSE, 6 * sizeof(float), (const void *)(3 * sizeof(float)));
    gl.EnableVertexAttribArray(0);
    gl.EnableVertexAttribArray(1);
    check_gl("while setting up");

    /* the capture: registered once, read every frame */
    glt_capture_desc desc;
    glt_capture_desc_init(&desc);
    desc.gl_name = tex;
    desc.gl_target = GLT_TEXTURE_2D;
    desc.backend = GLT_BACKEND_AUTO; /* CUDA when the context runs on a CUDA device, else CPU */
    glt_capture *cap = NULL;
    GLT_CHECK(glt_capture_create(&desc, &cap));
    glt_capture_info info = {0};
    GLT_CHECK(glt_capture_get_info(cap, &info));
    printf("capture: %s %s, %dx%d, backend %s (%s)\n", info.target_name, info.format_name, info.width,
           info.height, glt_backend_name(info.backend), info.backend_reason);

    /* the same texture, only a rectangle of it (an engine's viewport, or the image inside padding) */
    glt_capture_desc sub_desc = desc;
    sub_desc.region.x = w / 3;
    sub_desc.region.y = h / 4;
    sub_desc.region.width = w / 2 > 0 ? w / 2 : 1;
    sub_desc.region.height = h / 2 > 0 ? h / 2 : 1;
    glt_capture *sub = NULL;
    GLT_CHECK(glt_capture_create(&sub_desc, &sub));
    glt_capture_info sub_info = {0};
    GLT_CHECK(glt_capture_get_info(sub, &sub_info));
    const glt_rect rg = sub_info.region;
    printf("region capture: (x %d, y %d, width %d, height %d) of a %dx%d image, frames %dx%d\n", rg.x, rg.y,
           rg.width, rg.height, sub_info.image_width, sub_info.image_height, sub_info.width, sub_info.height);
    if (rg.width != sub_desc.region.width || rg.height != sub_desc.region.height || sub_info.image_width != w ||
        sub_info.width != rg.width)
        die("unexpected region info");

    size_t bytes = (size_t)w * h * 4;
    unsigned char *gl_pixels = malloc(bytes), *copy = malloc(bytes);
    if (!gl_pixels || !copy)
        die("out of host memory");
    glt_read_options opts;
    glt_read_options_init(&opts); /* flip = 1: top row first */
    int failures = 0;

    for (int f = 0; f < frames; f++) {
        /* render */
        gl.BindFramebuffer(GL_FRAMEBUFFER, fbo);
        gl.Viewport(0, 0, w, h);
        gl.Enable(GL_DEPTH_TEST);
        gl.DepthFunc(GL_LESS);
        gl.ClearColor(0.1f, 0.15f, 0.2f, 1.0f);
        gl.ClearDepth(1.0);
        gl.Clear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT);
        gl.UseProgram(prog);
        gl.Uniform1f(angle_loc, 0.25f * (float)f);
        gl.BindVertexArray(vao);
        gl.DrawArrays(GL_TRIANGLES, 0, 6);
        check_gl("while rendering");

        /* capture */
        glt_frame *frame = NULL;
        GLT_CHECK(glt_capture_read(cap, &opts, &frame));
        glt_frame_info fi = {0};
        glt_frame_get_info(frame, &fi);
        printf("frame %d: %s pointer %p, shape (%d, %d, %d) %s, %zu bytes, flipped %d\n", f,
               fi.memory == GLT_MEMORY_CUDA ? "CUDA device" : "host", fi.data, fi.height, fi.width, fi.channels,
               glt_dtype_name(fi.dtype), fi.nbytes, fi.flipped);
        if (fi.height != h || fi.width != w || fi.channels != 4 || fi.dtype != GLT_DTYPE_UINT8 || fi.nbytes != bytes)
            die("unexpected frame shape");

        /* the frame's pixels on the host */
        const unsigned char *pixels = NULL;
        if (fi.memory == GLT_MEMORY_HOST) {
            pixels = fi.data;
        } else {
#ifdef ENGINE_WITH_CUDA
            GLT_CHECK(glt_frame_synchronize(frame));
            if (cudaMemcpy(copy, fi.data, bytes, ENGINE_CUDA_MEMCPY_DEVICE_TO_HOST) != 0)
                die("cudaMemcpy of the frame failed");
            pixels = copy;
#else
            die("a CUDA frame, but this program was built without ENGINE_WITH_CUDA");
#endif
        }

        /* the reference: glReadPixels of the same framebuffer, rows bottom-up */
        gl.BindBuffer(GL_PIXEL_PACK_BUFFER, 0);
        gl.PixelStorei(GL_PACK_ALIGNMENT, 1);
        gl.BindFramebuffer(GL_FRAMEBUFFER, fbo);
        gl.ReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, gl_pixels);
        check_gl("in glReadPixels");
        int bad = 0, x0 = w / 2, y0 = h / 2; /* y0: row from the top */
        for (int r = 0; r < h; r++)
            if (memcmp(pixels + (size_t)r * w * 4, gl_pixels + (size_t)(h - 1 - r) * w * 4, (size_t)w * 4) != 0)
                bad++;
        const unsigned char *p = pixels + ((size_t)y0 * w + x0) * 4;
        const unsigned char *q = gl_pixels + ((size_t)(h - 1 - y0) * w + x0) * 4;
        printf("  pixel (row %d, col %d): frame (%u, %u, %u, %u), glReadPixels (%u, %u, %u, %u); %s\n", y0, x0,
               p[0], p[1], p[2], p[3], q[0], q[1], q[2], q[3], bad ? "MISMATCH" : "all rows match");
        if (bad) {
            fprintf(stderr, "engine: frame %d: %d of %d rows differ from glReadPixels\n", f, bad, h);
            failures++;
        }
        glt_frame_destroy(frame);

        /* the region: its top row first, each row the same pixels as glReadPixels' row at (rg.x, y) */
        GLT_CHECK(glt_capture_read(sub, &opts, &frame));
        glt_frame_get_info(frame, &fi);
        size_t row = (size_t)rg.width * 4;
        if (fi.height != rg.height || fi.width != rg.width || fi.nbytes != row * rg.height)
            die("unexpected region frame shape");
        if (fi.memory == GLT_MEMORY_HOST) {
            pixels = fi.data;
        } else {
#ifdef ENGINE_WITH_CUDA
            GLT_CHECK(glt_frame_synchronize(frame));
            if (cudaMemcpy(copy, fi.data, fi.nbytes, ENGINE_CUDA_MEMCPY_DEVICE_TO_HOST) != 0)
                die("cudaMemcpy of the region frame failed");
            pixels = copy;
#endif
        }
        bad = 0;
        for (int r = 0; r < rg.height; r++) {
            int gl_row = rg.y + rg.height - 1 - r;
            if (memcmp(pixels + (size_t)r * row, gl_pixels + ((size_t)gl_row * w + rg.x) * 4, row) != 0) bad++;
        }
        printf("  region: shape (%d, %d, %d); %s\n", fi.height, fi.width, fi.channels,
               bad ? "REGION MISMATCH" : "all region rows match");
        if (bad) {
            fprintf(stderr, "engine: frame %d: %d of %d region rows differ from glReadPixels\n", f, bad, rg.height);
            failures++;
        }
        glt_frame_destroy(frame);
    }

    glt_capture_destroy(sub);
    glt_capture_destroy(cap);
    free(gl_pixels);
    free(copy);
    gl.DeleteBuffers(1, &vbo);
    gl.DeleteVertexArrays(1, &vao);
    gl.DeleteProgram(prog);
    gl.DeleteFramebuffers(1, &fbo);
    gl.DeleteRenderbuffers(1, &depth);
    gl.DeleteTextures(1, &tex);
    glt_context_destroy(ctx);
    if (failures) {
        printf("engine: FAILED (%d of %d frames)\n", failures, frames);
        return 1;
    }
    printf("engine: OK, %d frames captured and checked (backend %s)\n", frames, glt_backend_name(info.backend));
    return 0;
}
