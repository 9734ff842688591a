/*
 * upload.c: the other direction in C: data into OpenGL through gltensor, checked against GL.
 *
 *   make -C examples/c run-upload     (or: examples/c/build/upload [WIDTH HEIGHT [POINTS]])
 *
 * 1. glt_context_create_headless (CUDA device 0's EGL device, else Mesa: then the CPU backend runs).
 * 2. Texture: an RGB8 gradient image (row 0 = top, as images are held) is written into an RGBA8
 *    texture with glt_upload_write (flip = 1, alpha filled with 255) and compared with glGetTexImage.
 * 3. Vertex buffer: POINTS float4 positions are written into a GL buffer through glt_buffer_map
 *    (GLT_MAP_WRITE), glt_buffer_unmap hands it back, GL draws them as points into a framebuffer, and
 *    glReadPixels must show each point at its pixel; glt_buffer_read then copies the buffer into a
 *    frame that must equal the positions.
 * On the CUDA backend the sources are CUDA memory (cudaMalloc + cudaMemcpy, declared below so that no
 * CUDA header is needed); on the CPU backend plain host memory. Exit status 0 when everything matched.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gltensor.h"

#ifdef ENGINE_WITH_CUDA
/* From cuda_runtime_api.h (cudaError_t is an enum: int here; 0 is cudaSuccess). */
extern int cudaMalloc(void **ptr, size_t size);
extern int cudaFree(void *ptr);
extern int cudaMemcpy(void *dst, const void *src, size_t count, int kind);
extern int cudaDeviceSynchronize(void);
#define CUDA_H2D 1
#define CUDA_D2H 2
#endif

typedef unsigned int GLenum;
typedef unsigned int GLuint;
typedef unsigned int GLbitfield;
typedef int GLint;
typedef int GLsizei;
typedef float GLfloat;
typedef char GLchar;
typedef unsigned char GLboolean;
typedef ptrdiff_t GLsizeiptr;

#define GL_NO_ERROR 0
#define GL_FALSE 0
#define GL_POINTS 0x0000
#define GL_PACK_ALIGNMENT 0x0D05
#define GL_TEXTURE_2D 0x0DE1
#define GL_UNSIGNED_BYTE 0x1401
#define GL_FLOAT 0x1406
#define GL_RGBA 0x1908
#define GL_RGBA8 0x8058
#define GL_ARRAY_BUFFER 0x8892
#define GL_DYNAMIC_DRAW 0x88E8
#define GL_FRAGMENT_SHADER 0x8B30
#define GL_VERTEX_SHADER 0x8B31
#define GL_COMPILE_STATUS 0x8B81
#define GL_LINK_STATUS 0x8B82
#define GL_FRAMEBUFFER_COMPLETE 0x8CD5
#define GL_COLOR_ATTACHMENT0 0x8CE0
#define GL_FRAMEBUFFER 0x8D40
#define GL_COLOR_BUFFER_BIT 0x00004000

static struct {
    void (*GenTextures)(GLsizei, GLuint *);
    void (*DeleteTextures)(GLsizei, const GLuint *);
    void (*BindTexture)(GLenum, GLuint);
    void (*TexImage2D)(GLenum, GLint, GLint, GLsizei, GLsizei, GLint, GLenum, GLenum, const void *);
    void (*GetTexImage)(GLenum, GLint, GLenum, GLenum, void *);
    void (*GenFramebuffers)(GLsizei, GLuint *);
    void (*DeleteFramebuffers)(GLsizei, const GLuint *);
    void (*BindFramebuffer)(GLenum, GLuint);
    void (*FramebufferTexture2D)(GLenum, GLenum, GLenum, GLuint, GLint);
    GLenum (*CheckFramebufferStatus)(GLenum);
    GLuint (*CreateShader)(GLenum);
    void (*ShaderSource)(GLuint, GLsizei, const GLchar *const *, const GLint *);
    void (*CompileShader)(GLuint);
    void (*GetShaderiv)(GLuint, GLenum, GLint *);
    void (*DeleteShader)(GLuint);
    GLuint (*CreateProgram)(void);
    void (*AttachShader)(GLuint, GLuint);
    void (*LinkProgram)(GLuint);
    void (*GetProgramiv)(GLuint, GLenum, GLint *);
    void (*UseProgram)(GLuint);
    void (*DeleteProgram)(GLuint);
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
    void (*ClearColor)(GLfloat, GLfloat, GLfloat, GLfloat);
    void (*Clear)(GLbitfield);
    void (*PixelStorei)(GLenum, GLint);
    void (*ReadPixels)(GLint, GLint, GLsizei, GLsizei, GLenum, GLenum, void *);
    GLenum (*GetError)(void);
} gl;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "upload: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

#define GLT_CHECK(call)                                                                \
    do {                                                                               \
        glt_status st_ = (call);                                                       \
        if (st_ != GLT_OK) die("%s failed (%s): %s", #call, glt_status_name(st_), glt_last_error()); \
    } while (0)

static void check_gl(const char *where) {
    GLenum e = gl.GetError();
    if (e != GL_NO_ERROR) die("GL error 0x%04x %s", e, where);
}

static void load_gl(void) {
    void *libgl = dlopen("libOpenGL.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (!libgl) libgl = dlopen("libGL.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *libegl = dlopen("libEGL.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *(*get_proc)(const char *) = NULL;
    if (libegl) *(void **)(&get_proc) = dlsym(libegl, "eglGetProcAddress");
    if (!libgl && !get_proc) die("cannot load libOpenGL.so.0 / libGL.so.1 or libEGL.so.1: %s", dlerror());
#define LOAD(field)                                                        \
    do {                                                                   \
        void *p_ = libgl ? dlsym(libgl, "gl" #field) : NULL;               \
        if (!p_ && get_proc) p_ = get_proc("gl" #field);                   \
        if (!p_) die("GL entry point gl%s not found", #field);             \
        *(void **)(&gl.field) = p_;                                        \
    } while (0)
    LOAD(GenTextures); LOAD(DeleteTextures); LOAD(BindTexture); LOAD(TexImage2D); LOAD(GetTexImage);
    LOAD(GenFramebuffers); LOAD(DeleteFramebuffers); LOAD(BindFramebuffer); LOAD(FramebufferTexture2D);
    LOAD(CheckFramebufferStatus); LOAD(CreateShader); LOAD(ShaderSource); LOAD(CompileShader);
    LOAD(GetShaderiv); LOAD(DeleteShader); LOAD(CreateProgram); LOAD(AttachShader); LOAD(LinkProgram);
    LOAD(GetProgramiv); LOAD(UseProgram); LOAD(DeleteProgram); LOAD(GenVertexArrays); LOAD(DeleteVertexArrays);
    LOAD(BindVertexArray); LOAD(GenBuffers); LOAD(DeleteBuffers); LOAD(BindBuffer); LOAD(BufferData);
    LOAD(VertexAttribPointer); LOAD(EnableVertexAttribArray); LOAD(DrawArrays); LOAD(Viewport);
    LOAD(ClearColor); LOAD(Clear); LOAD(PixelStorei); LOAD(ReadPixels); LOAD(GetError);
#undef LOAD
}

static GLuint compile(GLenum type, const char *src) {
    GLuint s = gl.CreateShader(type);
    gl.ShaderSource(s, 1, &src, NULL);
    gl.CompileShader(s);
    GLint ok = 0;
    gl.GetShaderiv(s, GL_COMPILE_STATUS, &ok);
    if (!ok) die("shader compile failed");
    return s;
}

static GLuint points_program(void) {
    const char *vs = "#version 330 core\n"
                     "layout(location = 0) in vec4 position;\n"
                     "void main() { gl_Position = position; gl_PointSize = 1.0; }\n";
    const char *fs = "#version 330 core\nout vec4 frag;\nvoid main() { frag = vec4(1.0); }\n";
    GLuint v = compile(GL_VERTEX_SHADER, vs), f = compile(GL_FRAGMENT_SHADER, fs), p = gl.CreateProgram();
    gl.AttachShader(p, v);
    gl.AttachShader(p, f);
    gl.LinkProgram(p);
    GLint ok = 0;
    gl.GetProgramiv(p, GL_LINK_STATUS, &ok);
    if (!ok) die("program link failed");
    gl.DeleteShader(v);
    gl.DeleteShader(f);
    return p;
}

/* Memory the backend's sources must live in: CUDA device memory on the CUDA backend, else the host. */
static void *to_backend(const void *host, size_t bytes, int cuda) {
#ifdef ENGINE_WITH_CUDA
    if (cuda) {
        void *d = NULL;
        if (cudaMalloc(&d, bytes) != 0 || cudaMemcpy(d, host, bytes, CUDA_H2D) != 0) die("cudaMalloc/cudaMemcpy failed");
        return d;
    }
#endif
    (void)cuda;
    void *p = malloc(bytes);
    if (!p) die("out of memory");
    memcpy(p, host, bytes);
    return p;
}

static void backend_free(void *p, int cuda) {
#ifdef ENGINE_WITH_CUDA
    if (cuda) {
        cudaFree(p);
        return;
    }
#endif
    (void)cuda;
    free(p);
}

static void to_host(void *dst, const void *src, size_t bytes, int cuda) {
#ifdef ENGINE_WITH_CUDA
    if (cuda) {
        cudaDeviceSynchronize();
        if (cudaMemcpy(dst, src, bytes, CUDA_D2H) != 0) die("cudaMemcpy to the host failed");
        return;
    }
#endif
    (void)cuda;
    memcpy(dst, src, bytes);
}

static int check_texture(int w, int h) {
    GLuint tex;
    gl.GenTextures(1, &tex);
    gl.BindTexture(GL_TEXTURE_2D, tex);
    gl.TexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, NULL);
    gl.BindTexture(GL_TEXTURE_2D, 0);
    check_gl("making the texture");

    glt_upload_desc desc;
    glt_upload_desc_init(&desc);
    desc.gl_name = tex;
    glt_upload *up = NULL;
    GLT_CHECK(glt_upload_create(&desc, &up));
    glt_upload_info info = {0}; /* size 0: this release's layout (gltensor.h, "Struct sizes") */
    GLT_CHECK(glt_upload_get_info(up, &info));
    int cuda = info.backend == GLT_BACKEND_CUDA;

    /* An RGB8 gradient, row 0 at the top. */
    size_t bytes = (size_t)w * h * 3;
    unsigned char *img = malloc(bytes);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            unsigned char *p = img + ((size_t)y * w + x) * 3;
            p[0] = (unsigned char)(x * 255 / (w > 1 ? w - 1 : 1));
            p[1] = (unsigned char)(y * 255 / (h > 1 ? h - 1 : 1));
            p[2] = (unsigned char)((x + y) & 0xFF);
        }
    glt_buffer_view src = {0};
    src.data = to_backend(img, bytes, cuda);
    src.memory = cuda ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST;
    src.cuda_device = cuda ? info.cuda_device : GLT_CUDA_DEVICE_ANY;
    src.dtype = GLT_DTYPE_UINT8;
    src.ndim = 3;
    src.shape[0] = h, src.shape[1] = w, src.shape[2] = 3;
    src.strides_bytes[0] = (int64_t)w * 3, src.strides_bytes[1] = 3, src.strides_bytes[2] = 1;
    glt_write_options opts;
    glt_write_options_init(&opts); /* flip = 1: row 0 is the top */
    GLT_CHECK(glt_upload_write(up, &opts, &src));
    printf("texture %u: %s %dx%d written from a (%d, %d, 3) uint8 %s image (backend %s)\n", tex, info.format_name, w,
           h, h, w, cuda ? "CUDA" : "host", glt_backend_name(info.backend));

    unsigned char *got = malloc((size_t)w * h * 4);
    gl.PixelStorei(GL_PACK_ALIGNMENT, 1);
    gl.BindTexture(GL_TEXTURE_2D, tex);
    gl.GetTexImage(GL_TEXTURE_2D, 0, GL_RGBA, GL_UNSIGNED_BYTE, got);
    gl.BindTexture(GL_TEXTURE_2D, 0);
    check_gl("glGetTexImage");
    int bad = 0;
    for (int y = 0; y < h; ++y) /* GL row y is image row h - 1 - y */
        for (int x = 0; x < w; ++x) {
            const unsigned char *g = got + ((size_t)y * w + x) * 4, *e = img + ((size_t)(h - 1 - y) * w + x) * 3;
            bad += g[0] != e[0] || g[1] != e[1] || g[2] != e[2] || g[3] != 255;
        }
    printf("texture: %s\n", bad ? "MISMATCH" : "every texel matches (flipped rows, alpha 255)");
    free(got);
    free(img);
    backend_free(src.data, cuda);
    glt_upload_destroy(up);
    gl.DeleteTextures(1, &tex);
    return bad == 0;
}

static int check_points(int w, int h, int n) {
    GLuint vbo, vao, target, fbo;
    gl.GenBuffers(1, &vbo);
    gl.BindBuffer(GL_ARRAY_BUFFER, vbo);
    gl.BufferData(GL_ARRAY_BUFFER, (GLsizeiptr)n * 16, NULL, GL_DYNAMIC_DRAW);
    gl.GenVertexArrays(1, &vao);
    gl.BindVertexArray(vao);
    gl.EnableVertexAttribArray(0);
    gl.VertexAttribPointer(0, 4, GL_FLOAT, GL_FALSE, 16, NULL);
    gl.BindVertexArray(0);
    gl.BindBuffer(GL_ARRAY_BUFFER, 0);

    glt_buffer_desc desc;
    glt_buffer_desc_init(&desc);
    desc.gl_name = vbo;
    glt_buffer *buf = NULL;
    GLT_CHECK(glt_buffer_create(&desc, &buf));
    glt_buffer_info info = {0};
    GLT_CHECK(glt_buffer_get_info(buf, &info));
    int cuda = info.backend == GLT_BACKEND_CUDA;

    /* Point k sits on the centre of pixel (k * 7 % w, k * 3 % h): distinct pixels for n <= w and h prime-ish. */
    float *pos = malloc((size_t)n * 16);
    for (int k = 0; k < n; ++k) {
        int px = (k * 7) % w, py = (k * 3) % h;
        pos[4 * k + 0] = (px + 0.5f) / w * 2.0f - 1.0f;
        pos[4 * k + 1] = (py + 0.5f) / h * 2.0f - 1.0f;
        pos[4 * k + 2] = 0.0f;
        pos[4 * k + 3] = 1.0f;
    }
    glt_buffer_mapping m;
    GLT_CHECK(glt_buffer_map(buf, GLT_MAP_WRITE, 0, 0, NULL, &m));
    if (cuda) {
#ifdef ENGINE_WITH_CUDA
        if (cudaMemcpy(m.data, pos, (size_t)n * 16, CUDA_H2D) != 0) die("cudaMemcpy into the mapped buffer failed");
#endif
    } else {
        memcpy(m.data, pos, (size_t)n * 16); /* host memory GL mapped (glMapBufferRange) */
    }
    printf("buffer %u: %zu bytes mapped at %p (%s), %d float4 positions written\n", vbo, m.bytes, m.data,
           cuda ? "CUDA device memory" : "host memory", n);
    GLT_CHECK(glt_buffer_unmap(buf));

    gl.GenTextures(1, &target);
    gl.BindTexture(GL_TEXTURE_2D, target);
    gl.TexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, NULL);
    gl.BindTexture(GL_TEXTURE_2D, 0);
    gl.GenFramebuffers(1, &fbo);
    gl.BindFramebuffer(GL_FRAMEBUFFER, fbo);
    gl.FramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, target, 0);
    if (gl.CheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE) die("framebuffer incomplete");
    GLuint prog = points_program();
    gl.Viewport(0, 0, w, h);
    gl.ClearColor(0, 0, 0, 0);
    gl.Clear(GL_COLOR_BUFFER_BIT);
    gl.UseProgram(prog);
    gl.BindVertexArray(vao);
    gl.DrawArrays(GL_POINTS, 0, n);
    gl.BindVertexArray(0);
    gl.UseProgram(0);
    unsigned char *px = malloc((size_t)w * h * 4);
    gl.PixelStorei(GL_PACK_ALIGNMENT, 1);
    gl.ReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px);
    gl.BindFramebuffer(GL_FRAMEBUFFER, 0);
    check_gl("drawing the points");
    unsigned char *want = calloc((size_t)w * h, 1);
    for (int k = 0; k < n; ++k) want[(size_t)((k * 3) % h) * w + (k * 7) % w] = 1;
    int bad = 0, lit = 0;
    for (size_t i = 0; i < (size_t)w * h; ++i) {
        lit += px[4 * i] == 255;
        bad += (px[4 * i] == 255) != want[i];
    }
    printf("points: %d pixels lit, %s\n", lit, bad ? "MISMATCH" : "each point is on its pixel");

    glt_frame *frame = NULL;
    GLT_CHECK(glt_buffer_read(buf, 0, 0, NULL, &frame));
    glt_frame_info fi = {0};
    glt_frame_get_info(frame, &fi);
    float *copy = malloc(fi.nbytes);
    to_host(copy, fi.data, fi.nbytes, fi.memory == GLT_MEMORY_CUDA);
    int copy_ok = fi.nbytes == (size_t)n * 16 && memcmp(copy, pos, fi.nbytes) == 0;
    printf("glt_buffer_read: %zu bytes, %s\n", fi.nbytes, copy_ok ? "equal to the positions" : "MISMATCH");
    glt_frame_destroy(frame);
    glt_buffer_destroy(buf);

    free(copy);
    free(want);
    free(px);
    free(pos);
    gl.DeleteProgram(prog);
    gl.DeleteFramebuffers(1, &fbo);
    gl.DeleteTextures(1, &target);
    gl.DeleteVertexArrays(1, &vao);
    gl.DeleteBuffers(1, &vbo);
    return bad == 0 && copy_ok;
}

int main(int argc, char **argv) {
    int w = argc > 2 ? atoi(argv[1]) : 97;
    int h = argc > 2 ? atoi(argv[2]) : 61;
    int n = argc > 3 ? atoi(argv[3]) : 50;
    if (w <= 0 || h <= 0 || n <= 0 || n > w || n > h) die("usage: upload [WIDTH HEIGHT [POINTS]], POINTS <= both");
    glt_context_desc cdesc;
    glt_context_desc_init(&cdesc);
    glt_context *ctx = NULL;
    GLT_CHECK(glt_context_create_headless(&cdesc, &ctx));
    glt_context_info cinfo = {0};
    GLT_CHECK(glt_context_get_info(ctx, &cinfo));
    load_gl();
    printf("gltensor %s, GL %s on %s (cuda_device %d)\n", glt_version_string(), cinfo.version, cinfo.renderer,
           cinfo.cuda_device);
    int ok = check_texture(w, h);
    ok &= check_points(w, h, n);
    glt_context_destroy(ctx);
    if (!ok) return 1;
    printf("upload: OK\n");
    return 0;
}
