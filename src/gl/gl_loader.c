/*
 * Run-time loading of EGL, GLX and the GL entry points, and the identity of the
 * context current in the calling thread.
 *
 * Loaded at run time so that building needs no GL headers or libraries, and so
 * that one binary serves EGL (headless) and GLX (window) programs alike. With
 * libglvnd, the entry points are dispatch stubs shared by every context, so one
 * table per process is enough.
 */
#include "gl/gl.h"

#include <dlfcn.h>
#include <string.h>

typedef void *(*PFN_glXGetProcAddressARB)(const unsigned char *);
typedef void *(*PFN_glXGetCurrentContext)(void);
typedef void *(*PFN_glXGetCurrentDisplay)(void);
typedef unsigned long (*PFN_glXGetCurrentDrawable)(void);
typedef int (*PFN_glXMakeContextCurrent)(void *, unsigned long, unsigned long, void *);

static pthread_once_t egl_once = PTHREAD_ONCE_INIT;
static pthread_once_t gl_once = PTHREAD_ONCE_INIT;
static glt_egl egl_table;
static int egl_ok;
static glt_gl gl_table;
static const char *gl_missing; /* first GL entry point that could not be found */
static void *libegl, *libglx, *libgl, *libopengl;
static PFN_glXGetProcAddressARB glx_get_proc;
static PFN_glXGetCurrentContext glx_current_context;
static PFN_glXGetCurrentDisplay glx_current_display;
static glt_glx glx_table;

static void *open_first(const char *const *names) {
    for (; *names; ++names) {
        void *h = dlopen(*names, RTLD_LAZY | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

static void load_egl(void) {
    static const char *const names[] = {"libEGL.so.1", "libEGL.so", NULL};
    libegl = open_first(names);
    if (!libegl) return;
#define LOAD_EGL(fn) egl_table.fn = (PFN_egl##fn)dlsym(libegl, "egl" #fn)
    LOAD_EGL(GetCurrentDisplay);
    LOAD_EGL(GetCurrentContext);
    LOAD_EGL(GetCurrentSurface);
    LOAD_EGL(QueryAPI);
    LOAD_EGL(GetProcAddress);
    LOAD_EGL(GetError);
    LOAD_EGL(Initialize);
    LOAD_EGL(Terminate);
    LOAD_EGL(BindAPI);
    LOAD_EGL(CreateContext);
    LOAD_EGL(DestroyContext);
    LOAD_EGL(MakeCurrent);
    LOAD_EGL(QueryString);
#undef LOAD_EGL
    if (!egl_table.GetProcAddress || !egl_table.GetCurrentContext || !egl_table.MakeCurrent) return;
    /* Extension entry points come only through eglGetProcAddress. */
    egl_table.QueryDevicesEXT = (PFN_eglQueryDevicesEXT)egl_table.GetProcAddress("eglQueryDevicesEXT");
    egl_table.QueryDeviceAttribEXT =
        (PFN_eglQueryDeviceAttribEXT)egl_table.GetProcAddress("eglQueryDeviceAttribEXT");
    egl_table.QueryDeviceStringEXT =
        (PFN_eglQueryDeviceStringEXT)egl_table.GetProcAddress("eglQueryDeviceStringEXT");
    egl_table.GetPlatformDisplayEXT =
        (PFN_eglGetPlatformDisplayEXT)egl_table.GetProcAddress("eglGetPlatformDisplayEXT");
    egl_ok = 1;
}

const glt_egl *glt_egl_load(void) {
    pthread_once(&egl_once, load_egl);
    if (!egl_ok) {
        glt_fail(GLT_EGL_ERROR,
                 "could not load libEGL.so.1 (%s); install the EGL loader (Debian/Ubuntu: apt-get install "
                 "libegl1, plus libegl-mesa0 for software rendering or the NVIDIA driver for the GPU)",
                 dlerror() ? "dlopen failed" : "entry points missing");
        return NULL;
    }
    return &egl_table;
}

static void load_glx(void) {
    static const char *const names[] = {"libGLX.so.0", "libGL.so.1", NULL};
    libglx = open_first(names);
    if (!libglx) return;
    glx_get_proc = (PFN_glXGetProcAddressARB)dlsym(libglx, "glXGetProcAddressARB");
    glx_current_context = (PFN_glXGetCurrentContext)dlsym(libglx, "glXGetCurrentContext");
    glx_current_display = (PFN_glXGetCurrentDisplay)dlsym(libglx, "glXGetCurrentDisplay");
    glx_table.GetCurrentContext = glx_current_context;
    glx_table.GetCurrentDisplay = glx_current_display;
    glx_table.GetCurrentDrawable = (PFN_glXGetCurrentDrawable)dlsym(libglx, "glXGetCurrentDrawable");
    glx_table.GetCurrentReadDrawable = (PFN_glXGetCurrentDrawable)dlsym(libglx, "glXGetCurrentReadDrawable");
    glx_table.MakeContextCurrent = (PFN_glXMakeContextCurrent)dlsym(libglx, "glXMakeContextCurrent");
}

static void *gl_proc(const char *name) {
    void *p = NULL;
    if (libopengl) p = dlsym(libopengl, name);
    if (!p && libgl) p = dlsym(libgl, name);
    if (!p && egl_ok) p = egl_table.GetProcAddress(name);
    if (!p && glx_get_proc) p = glx_get_proc((const unsigned char *)name);
    return p;
}

static void load_gl(void) {
    static const char *const opengl_names[] = {"libOpenGL.so.0", "libOpenGL.so", NULL};
    static const char *const gl_names[] = {"libGL.so.1", "libGL.so", NULL};
    pthread_once(&egl_once, load_egl);
    load_glx();
    libopengl = open_first(opengl_names);
    libgl = open_first(gl_names);
#define LOAD_GL(fn)                                      \
    do {                                                 \
        gl_table.fn = (PFN_gl##fn)gl_proc("gl" #fn);     \
        if (!gl_table.fn && !gl_missing) gl_missing = "gl" #fn; \
    } while (0)
    LOAD_GL(GetError);
    LOAD_GL(GetIntegerv);
    LOAD_GL(GetString);
    LOAD_GL(BindTexture);
    LOAD_GL(IsTexture);
    LOAD_GL(GetTexLevelParameteriv);
    LOAD_GL(GetTexImage);
    LOAD_GL(IsRenderbuffer);
    LOAD_GL(BindRenderbuffer);
    LOAD_GL(GetRenderbufferParameteriv);
    LOAD_GL(GenFramebuffers);
    LOAD_GL(DeleteFramebuffers);
    LOAD_GL(BindFramebuffer);
    LOAD_GL(FramebufferRenderbuffer);
    LOAD_GL(CheckFramebufferStatus);
    LOAD_GL(ReadBuffer);
    LOAD_GL(ReadPixels);
    LOAD_GL(PixelStorei);
    LOAD_GL(GenBuffers);
    LOAD_GL(DeleteBuffers);
    LOAD_GL(BindBuffer);
    LOAD_GL(BufferData);
    LOAD_GL(MapBufferRange);
    LOAD_GL(UnmapBuffer);
    LOAD_GL(BlitFramebuffer);
    LOAD_GL(FramebufferTexture2D);
    LOAD_GL(DrawBuffer);
    LOAD_GL(GenRenderbuffers);
    LOAD_GL(DeleteRenderbuffers);
    LOAD_GL(RenderbufferStorage);
    LOAD_GL(IsEnabled);
    LOAD_GL(Enable);
    LOAD_GL(Disable);
    /* upload.c / buffer.c */
    LOAD_GL(IsBuffer);
    LOAD_GL(GetBufferParameteriv);
    LOAD_GL(GetBufferParameteri64v);
    LOAD_GL(GetBufferSubData);
    LOAD_GL(CopyBufferSubData);
#undef LOAD_GL
    int all = 1;
#define LOAD_OPT(fn)                                  \
    do {                                              \
        gl_table.fn = (PFN_gl##fn)gl_proc("gl" #fn);  \
        all &= gl_table.fn != NULL;                   \
    } while (0)
    LOAD_OPT(CreateShader);
    LOAD_OPT(ShaderSource);
    LOAD_OPT(CompileShader);
    LOAD_OPT(GetShaderiv);
    LOAD_OPT(GetShaderInfoLog);
    LOAD_OPT(CreateProgram);
    LOAD_OPT(AttachShader);
    LOAD_OPT(LinkProgram);
    LOAD_OPT(GetProgramiv);
    LOAD_OPT(DeleteShader);
    LOAD_OPT(DeleteProgram);
    LOAD_OPT(UseProgram);
    LOAD_OPT(GetUniformLocation);
    LOAD_OPT(ProgramUniform2i);
    LOAD_OPT(DispatchCompute);
    LOAD_OPT(MemoryBarrier);
    LOAD_OPT(BindBufferBase);
    LOAD_OPT(BindBufferRange);
    LOAD_OPT(GetIntegeri_v);
    LOAD_OPT(GetInteger64i_v);
    LOAD_OPT(ActiveTexture);
    LOAD_OPT(GenSamplers);
    LOAD_OPT(DeleteSamplers);
    LOAD_OPT(BindSampler);
    LOAD_OPT(SamplerParameteri);
    LOAD_OPT(GenTextures);
    LOAD_OPT(DeleteTextures);
    LOAD_OPT(TexStorage2D);
    LOAD_OPT(TexSubImage2D);
    LOAD_OPT(Scissor);
    LOAD_OPT(ClearDepth);
    LOAD_OPT(Clear);
    LOAD_OPT(DepthMask);
    LOAD_OPT(GetDoublev);
#undef LOAD_OPT
    gl_table.has_compute = all;
    /* not part of has_compute: BatchRenderer falls back to a resolve per tile without it */
    gl_table.CopyImageSubData = (PFN_glCopyImageSubData)gl_proc("glCopyImageSubData");

    gl_table.GetTextureSubImage = (PFN_glGetTextureSubImage)gl_proc("glGetTextureSubImage");
#define LOAD_ALONE(fn) gl_table.fn = (PFN_gl##fn)gl_proc("gl" #fn)
    LOAD_ALONE(FenceSync);
    LOAD_ALONE(ClientWaitSync);
    LOAD_ALONE(DeleteSync);
    LOAD_ALONE(Flush);
    LOAD_ALONE(GetStringi);
    LOAD_ALONE(BufferSubData);
    LOAD_ALONE(ProgramUniform1i);
    LOAD_ALONE(TextureView);
    LOAD_ALONE(CreateMemoryObjectsEXT);
    LOAD_ALONE(DeleteMemoryObjectsEXT);
    LOAD_ALONE(ImportMemoryFdEXT);
    LOAD_ALONE(BufferStorageMemEXT);
    LOAD_ALONE(GetUnsignedBytei_vEXT);
    LOAD_ALONE(BufferStorage);
#undef LOAD_ALONE
}

void *glt_gl_proc(const char *name) {
    pthread_once(&gl_once, load_gl);
    return gl_proc(name);
}

const glt_glx *glt_glx_load(void) {
    pthread_once(&gl_once, load_gl);
    if (!glx_table.GetCurrentContext || !glx_table.GetCurrentDisplay || !glx_table.GetCurrentDrawable ||
        !glx_table.GetCurrentReadDrawable || !glx_table.MakeContextCurrent)
        return NULL;
    return &glx_table;
}

const glt_gl *glt_gl_load(void) {
    pthread_once(&gl_once, load_gl);
    if (gl_missing) {
        glt_fail(GLT_GL_ERROR,
                 "OpenGL entry point %s not found in libOpenGL.so.0, libGL.so.1 or through EGL/GLX; "
                 "install the GL loader (Debian/Ubuntu: apt-get install libopengl0 libgl1) and use an "
                 "OpenGL 3.0+ context",
                 gl_missing);
        return NULL;
    }
    return &gl_table;
}

glt_gl_context_id glt_current_gl_handles(void) {
    glt_gl_context_id id = {GLT_API_NONE, NULL, NULL, 0};
    pthread_once(&gl_once, load_gl);
    if (egl_ok) {
        void *c = egl_table.GetCurrentContext();
        if (c) {
            id.api = GLT_API_EGL;
            id.context = c;
            id.display = egl_table.GetCurrentDisplay ? egl_table.GetCurrentDisplay() : NULL;
            return id;
        }
    }
    if (glx_current_context) {
        void *c = glx_current_context();
        if (c) {
            id.api = GLT_API_GLX;
            id.context = c;
            id.display = glx_current_display ? glx_current_display() : NULL;
        }
    }
    return id;
}

void glt_gl_drain_errors(const glt_gl *gl) {
    /* Bounded: a context lost with a pending error can report one forever. */
    for (int i = 0; i < 16 && gl->GetError() != GL_NO_ERROR; ++i) {
    }
}

const char *glt_gl_error_name(GLenum err) {
    switch (err) {
    case GL_NO_ERROR: return "GL_NO_ERROR";
    case GL_INVALID_ENUM: return "GL_INVALID_ENUM";
    case GL_INVALID_VALUE: return "GL_INVALID_VALUE";
    case GL_INVALID_OPERATION: return "GL_INVALID_OPERATION";
    case GL_OUT_OF_MEMORY: return "GL_OUT_OF_MEMORY";
    case GL_INVALID_FRAMEBUFFER_OPERATION: return "GL_INVALID_FRAMEBUFFER_OPERATION";
    default: return "GL error";
    }
}
