/*
 * Headless OpenGL contexts through EGL devices: the NVIDIA device that CUDA
 * knows as the requested ordinal, or Mesa's software device when there is none.
 *
 * The device is confirmed through CUDA (cudaGLGetDevices on the new context)
 * rather than trusted from EGL_CUDA_DEVICE_NV alone, because whether EGL's
 * number follows CUDA_VISIBLE_DEVICES is not something the EGL spec promises.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct glt_context {
    EGLDisplay display;
    EGLContext context;
    char *vendor, *renderer, *version;
    int cuda_device;
    int is_software;
    int gl_major, gl_minor;
};

#define MAX_DEVICES 32

static int has_ext(const char *list, const char *ext) {
    if (!list) return 0;
    size_t n = strlen(ext);
    for (const char *p = list; (p = strstr(p, ext)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    return 0;
}

static char *dup_str(const GLubyte *s) {
    const char *c = s ? (const char *)s : "";
    char *d = malloc(strlen(c) + 1);
    if (d) strcpy(d, c);
    return d;
}

/* Creates a config-less, surfaceless core context on `display` and makes it current. */
static EGLContext create_on_display(const glt_egl *egl, EGLDisplay display, const glt_context_desc *desc, int *major,
                                    int *minor) {
    EGLint maj, min;
    if (!egl->Initialize(display, &maj, &min)) return EGL_NO_CONTEXT;
    if (!egl->BindAPI(EGL_OPENGL_API)) return EGL_NO_CONTEXT;
    int versions[3][2] = {{desc->gl_major, desc->gl_minor}, {4, 5}, {3, 3}};
    for (int i = desc->gl_major > 0 ? 0 : 1; i < 3; ++i) {
        EGLint attrs[] = {EGL_CONTEXT_MAJOR_VERSION, versions[i][0], EGL_CONTEXT_MINOR_VERSION, versions[i][1],
                          EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
        EGLContext c = egl->CreateContext(display, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, attrs);
        if (c == EGL_NO_CONTEXT) continue;
        if (!egl->MakeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, c)) {
            egl->DestroyContext(display, c);
            continue;
        }
        *major = versions[i][0];
        *minor = versions[i][1];
        return c;
    }
    return EGL_NO_CONTEXT;
}

static glt_status finish(const glt_egl *egl, EGLDisplay d, EGLContext c, int major, int minor, int cuda_device,
                         glt_context **out) {
    const glt_gl *gl = glt_gl_load();
    if (!gl) {
        egl->MakeCurrent(d, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        egl->DestroyContext(d, c);
        return GLT_GL_ERROR;
    }
    glt_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory creating a GL context");
    ctx->display = d;
    ctx->context = c;
    ctx->vendor = dup_str(gl->GetString(GL_VENDOR));
    ctx->renderer = dup_str(gl->GetString(GL_RENDERER));
    ctx->version = dup_str(gl->GetString(GL_VERSION));
    ctx->gl_major = major;
    ctx->gl_minor = minor;
    ctx->cuda_device = cuda_device;
    ctx->is_software = ctx->renderer && (strstr(ctx->renderer, "llvmpipe") || strstr(ctx->renderer, "softpipe") ||
                                         strstr(ctx->renderer, "Software"));
    *out = ctx;
    glt_clear_error();
    return GLT_OK;
}

glt_status glt_context_create_headless(const glt_context_desc *desc_in, glt_context **out) {
    glt_context_desc desc;
    if (desc_in)
        desc = *desc_in;
    else
        glt_context_desc_init(&desc);
    if (!out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_context_create_headless: out is NULL");
    *out = NULL;
    const glt_egl *egl = glt_egl_load();
    if (!egl) return GLT_EGL_ERROR;
    if (!egl->QueryDevicesEXT || !egl->GetPlatformDisplayEXT)
        return glt_fail(GLT_EGL_ERROR, "this EGL lacks EGL_EXT_device_enumeration / EGL_EXT_platform_device, "
                                       "needed for headless contexts; install libglvnd's libegl1 with a driver "
                                       "that provides them (NVIDIA, or Mesa's libegl-mesa0)");
    EGLDeviceEXT devices[MAX_DEVICES];
    EGLint count = 0;
    if (!egl->QueryDevicesEXT(MAX_DEVICES, devices, &count) || count <= 0) count = 0;

    int major = 0, minor = 0;
    int nvidia_seen = 0;
    char tried[256] = "";
    if (!desc.force_software) {
        /* Two passes: first the device EGL says is our CUDA ordinal, then any other NVIDIA device. */
        for (int pass = 0; pass < 2; ++pass) {
            for (EGLint i = 0; i < count; ++i) {
                const char *ext = egl->QueryDeviceStringEXT ? egl->QueryDeviceStringEXT(devices[i], EGL_EXTENSIONS) : NULL;
                if (!has_ext(ext, "EGL_NV_device_cuda")) continue;
                nvidia_seen = 1;
                EGLAttrib egl_cuda = -1;
                if (egl->QueryDeviceAttribEXT) egl->QueryDeviceAttribEXT(devices[i], EGL_CUDA_DEVICE_NV, &egl_cuda);
                int preferred = desc.cuda_device < 0 || egl_cuda == desc.cuda_device;
                if ((pass == 0) != preferred) continue;
                EGLDisplay d = egl->GetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, devices[i], NULL);
                if (d == EGL_NO_DISPLAY) continue;
                EGLContext c = create_on_display(egl, d, &desc, &major, &minor);
                if (c == EGL_NO_CONTEXT) continue;
                int cuda_dev = -1;
                glt_status st = glt_cuda_device_of_current_context(&cuda_dev);
                if (st == GLT_OK && (desc.cuda_device < 0 || cuda_dev == desc.cuda_device))
                    return finish(egl, d, c, major, minor, cuda_dev, out);
                if (st == GLT_CUDA_UNAVAILABLE && pass == 0) /* no way to confirm: trust EGL's number */
                    return finish(egl, d, c, major, minor, -1, out);
                size_t len = strlen(tried);
                snprintf(tried + len, sizeof tried - len, "%sEGL device %d (CUDA %d)", len ? ", " : "", (int)i,
                         cuda_dev);
                egl->MakeCurrent(d, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
                egl->DestroyContext(d, c);
            }
        }
    }
    if (!desc.allow_software && !desc.force_software) {
        if (nvidia_seen)
            return glt_fail(GLT_WRONG_DEVICE,
                            "no NVIDIA EGL device runs on CUDA device %d (tried %s); pick another cuda_device "
                            "(CUDA_VISIBLE_DEVICES renumbers them) or allow the software fallback",
                            desc.cuda_device, tried[0] ? tried : "none");
        return glt_fail(GLT_EGL_ERROR,
                        "no NVIDIA EGL device found among %d EGL devices; install the NVIDIA driver's EGL "
                        "vendor library (10_nvidia.json, set __EGL_VENDOR_LIBRARY_FILENAMES if it is not found) "
                        "or allow the software fallback",
                        (int)count);
    }
    /* Mesa's software device, then the surfaceless platform as a last resort. */
    for (EGLint i = 0; i < count; ++i) {
        const char *ext = egl->QueryDeviceStringEXT ? egl->QueryDeviceStringEXT(devices[i], EGL_EXTENSIONS) : NULL;
        if (!has_ext(ext, "EGL_MESA_device_software")) continue;
        EGLDisplay d = egl->GetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, devices[i], NULL);
        if (d == EGL_NO_DISPLAY) continue;
        EGLContext c = create_on_display(egl, d, &desc, &major, &minor);
        if (c != EGL_NO_CONTEXT) return finish(egl, d, c, major, minor, -1, out);
    }
    EGLDisplay d = egl->GetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA, NULL, NULL);
    if (d != EGL_NO_DISPLAY) {
        EGLContext c = create_on_display(egl, d, &desc, &major, &minor);
        if (c != EGL_NO_CONTEXT) {
            glt_status st = finish(egl, d, c, major, minor, -1, out);
            if (st == GLT_OK && desc.force_software && !(*out)->is_software) {
                /* Without Mesa's software driver the surfaceless platform lands on a hardware driver. */
                char renderer[128];
                snprintf(renderer, sizeof renderer, "%s", (*out)->renderer ? (*out)->renderer : "?");
                glt_context_destroy(*out);
                *out = NULL;
                return glt_fail(GLT_EGL_ERROR,
                                "software=True asked for Mesa's software renderer, but EGL offers none (the context "
                                "it gave runs on \"%s\"); install it (Debian/Ubuntu: apt-get install libegl-mesa0 "
                                "libgl1-mesa-dri) or pass software=None",
                                renderer);
            }
            return st;
        }
    }
    return glt_fail(GLT_EGL_ERROR,
                    "could not create a headless OpenGL 3.3+ core context on any of %d EGL devices (last EGL "
                    "error 0x%04X); install Mesa's EGL driver for software rendering (apt-get install libegl1 "
                    "libegl-mesa0 libgl1-mesa-dri) or the NVIDIA driver",
                    (int)count, egl->GetError ? (unsigned)egl->GetError() : 0u);
}

glt_status glt_context_make_current(glt_context *ctx) {
    if (!ctx) return glt_fail(GLT_INVALID_ARGUMENT, "glt_context_make_current: context is NULL");
    const glt_egl *egl = glt_egl_load();
    if (!egl) return GLT_EGL_ERROR;
    /* The bound API is per thread: a thread that never bound OpenGL would not see this context. */
    egl->BindAPI(EGL_OPENGL_API);
    if (!egl->MakeCurrent(ctx->display, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx->context))
        return glt_fail(GLT_EGL_ERROR,
                        "eglMakeCurrent failed (EGL error 0x%04X): a context can be current in one thread at a "
                        "time; release it in the other thread first",
                        (unsigned)egl->GetError());
    return GLT_OK;
}

glt_status glt_context_release_current(glt_context *ctx) {
    if (!ctx) return glt_fail(GLT_INVALID_ARGUMENT, "glt_context_release_current: context is NULL");
    const glt_egl *egl = glt_egl_load();
    if (!egl) return GLT_EGL_ERROR;
    if (egl->GetCurrentContext() == ctx->context)
        egl->MakeCurrent(ctx->display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    return GLT_OK;
}

glt_status glt_context_get_info(const glt_context *ctx, glt_context_info *info) {
    if (!ctx || !info) return glt_fail(GLT_INVALID_ARGUMENT, "glt_context_get_info: NULL argument");
    info->vendor = ctx->vendor;
    info->renderer = ctx->renderer;
    info->version = ctx->version;
    info->cuda_device = ctx->cuda_device;
    info->is_software = ctx->is_software;
    info->gl_major = ctx->gl_major;
    info->gl_minor = ctx->gl_minor;
    return GLT_OK;
}

void glt_context_destroy(glt_context *ctx) {
    if (!ctx) return;
    const glt_egl *egl = glt_egl_load();
    if (egl) {
        glt_context_release_current(ctx);
        /* The display is not terminated: EGL shares one display per device in the process, and
         * terminating it would break other contexts (the caller's, or another glt_context) on it. */
        egl->DestroyContext(ctx->display, ctx->context);
    }
    free(ctx->vendor);
    free(ctx->renderer);
    free(ctx->version);
    free(ctx);
}
