/*
 * Headless OpenGL contexts through EGL devices: the NVIDIA device that CUDA
 * knows as the requested ordinal, or Mesa's software device when there is none.
 *
 * The device is confirmed through CUDA (cudaGLGetDevices on the new context)
 * rather than trusted from EGL_CUDA_DEVICE_NV alone, because whether EGL's
 * number follows CUDA_VISIBLE_DEVICES is not something the EGL spec promises.
 */
#include "device/device.h"
#include "cuda/cuda_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct glt_context {
    EGLDisplay display;
    EGLContext context;
    char *vendor, *renderer, *version;
    int cuda_device;
    int is_software;
    int gl_major, gl_minor;
    long current_tid; /* the thread gltensor last made it current in (0: released): for messages */
};

static long this_thread(void) { return (long)syscall(SYS_gettid); }

static int thread_alive(long tid) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/self/task/%ld", tid);
    return stat(path, &st) == 0;
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

/* NVIDIA's EGL does not survive fork: a child of a process that made an NVIDIA EGL context crashes (abort or
 * segfault, seen on an H100 with driver 580) when it makes or uses one. Children of such a process are told
 * so, before any EGL call, instead. (Contexts an engine made itself are not seen here: the rule, "spawn or
 * forkserver when the parent renders", is in docs/shared-slots.md.) */
static int nvidia_egl_used;            /* this process made an NVIDIA EGL context through gltensor */
static volatile int forked_after_nvidia; /* set in the child of such a process (an int store: fork-safe) */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void mark_forked_child(void) { forked_after_nvidia = nvidia_egl_used; }
static void register_atfork(void) { pthread_atfork(NULL, NULL, mark_forked_child); }

int glt_fork_safe(void) { return !nvidia_egl_used && !forked_after_nvidia; }

glt_status glt_egl_fork_check(void) {
    if (!forked_after_nvidia) return GLT_OK;
    return glt_fail(GLT_UNSUPPORTED,
                    "this process was forked from one that used NVIDIA's EGL (pid %d's parent made a GL context on an "
                    "NVIDIA GPU), and NVIDIA's EGL does not survive fork: start the worker processes with 'spawn' or "
                    "'forkserver' (multiprocessing.get_context('forkserver'), AsyncVectorEnv(..., context="
                    "'forkserver'), SubprocVecEnv(..., start_method='forkserver')), or make no GL context in the "
                    "parent before forking",
                    (int)getpid());
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
    glt_gl_context_own(d, c); /* objects made in it from now on can tell it from a later one at this pointer */
    ctx->vendor = dup_str(gl->GetString(GL_VENDOR));
    ctx->renderer = dup_str(gl->GetString(GL_RENDERER));
    ctx->version = dup_str(gl->GetString(GL_VERSION));
    ctx->gl_major = major;
    ctx->gl_minor = minor;
    ctx->current_tid = this_thread(); /* created current in this thread */
    ctx->cuda_device = cuda_device;
    ctx->is_software = ctx->renderer && (strstr(ctx->renderer, "llvmpipe") || strstr(ctx->renderer, "softpipe") ||
                                         strstr(ctx->renderer, "Software"));
    if (ctx->vendor && strstr(ctx->vendor, "NVIDIA")) {
        pthread_once(&atfork_once, register_atfork);
        nvidia_egl_used = 1;
    }
    *out = ctx;
    glt_clear_error();
    return GLT_OK;
}

glt_status glt_default_cuda_device(int *cuda_device) {
    if (!cuda_device) return glt_fail(GLT_INVALID_ARGUMENT, "glt_default_cuda_device: cuda_device is NULL");
    *cuda_device = -1;
    int count = 0;
    if (glt_cuda_probe(&count) != GLT_OK || count <= 0) {
        glt_clear_error(); /* no CUDA: not an error here, the caller falls back to software */
        return GLT_OK;
    }
    const char *rank = getenv("LOCAL_RANK");
    if (!rank || !*rank) {
        *cuda_device = 0;
        return GLT_OK;
    }
    char *end = NULL;
    long r = strtol(rank, &end, 10);
    if (*end != '\0' || r < 0)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "LOCAL_RANK=\"%s\" is not a rank number; unset it, or pass the CUDA device explicitly "
                        "(gltensor.Context.headless(cuda_device=N))",
                        rank);
    if (r < count) {
        *cuda_device = (int)r;
    } else if (count == 1) {
        *cuda_device = 0; /* the launcher gave each rank one GPU through CUDA_VISIBLE_DEVICES */
    } else {
        const char *visible = getenv("CUDA_VISIBLE_DEVICES");
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "LOCAL_RANK=%ld, but only %d CUDA devices are visible (CUDA_VISIBLE_DEVICES=%s); start at most "
                        "%d ranks per node, give each rank its own GPU through CUDA_VISIBLE_DEVICES, or pass the "
                        "CUDA device explicitly",
                        r, count, visible ? visible : "unset", count);
    }
    return GLT_OK;
}

/* A context on an NVIDIA EGL device, current in this thread, and the CUDA device it runs on. */
typedef struct opened {
    EGLDisplay display;
    EGLContext context;
    int major, minor;
    int cuda_device; /* -1 when CUDA cannot say (status CUDA_UNAVAILABLE) */
    glt_status cuda_status;
} opened;

static int open_nvidia(const glt_egl *egl, EGLDeviceEXT device, const glt_context_desc *desc, opened *o) {
    o->display = egl->GetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, device, NULL);
    if (o->display == EGL_NO_DISPLAY) return 0;
    o->context = create_on_display(egl, o->display, desc, &o->major, &o->minor);
    if (o->context == EGL_NO_CONTEXT) return 0;
    o->cuda_device = -1;
    o->cuda_status = glt_cuda_device_of_current_context(&o->cuda_device);
    return 1;
}

static void close_opened(const glt_egl *egl, opened *o) {
    egl->MakeCurrent(o->display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    egl->DestroyContext(o->display, o->context);
}

/* Visits NVIDIA EGL devices in two passes, first those EGL numbers as `wanted`, then the others (EGL's
 * number may not follow CUDA_VISIBLE_DEVICES), opening a context on each until `take` keeps one
 * (returns 1; the context stays current) or none is left (returns 0, each context destroyed).
 * `tried` lists what was tried, for messages. */
typedef int (*take_fn)(const opened *o, int pass, void *arg);
static int find_nvidia(const glt_egl *egl, const glt_context_desc *desc, int wanted, take_fn take, void *arg,
                       opened *out, int *index, int *nvidia_seen, char *tried, size_t tried_size) {
    EGLDeviceEXT devices[GLT_EGL_MAX_DEVICES];
    int count = glt_egl_query_devices(egl, devices);
    for (int pass = 0; pass < 2; ++pass) {
        for (int i = 0; i < count; ++i) {
            if (!glt_egl_device_is_nvidia(egl, devices[i])) continue;
            if (nvidia_seen) *nvidia_seen = 1;
            int preferred = wanted < 0 || glt_egl_device_cuda_number(egl, devices[i]) == wanted;
            if ((pass == 0) != preferred) continue;
            opened o;
            if (!open_nvidia(egl, devices[i], desc, &o)) continue;
            if (take(&o, pass, arg)) {
                *out = o;
                if (index) *index = i;
                return 1;
            }
            size_t len = strlen(tried);
            snprintf(tried + len, tried_size - len, "%sEGL device %d (CUDA %d)", len ? ", " : "", i, o.cuda_device);
            close_opened(egl, &o);
        }
    }
    return 0;
}

/* Keeps the context that CUDA confirms runs on *(int *)arg (any, when negative); with CUDA unusable,
 * trusts EGL's own number (first pass only). */
static int take_device(const opened *o, int pass, void *arg) {
    int wanted = *(const int *)arg;
    if (o->cuda_status == GLT_OK) return wanted < 0 || o->cuda_device == wanted;
    return o->cuda_status == GLT_CUDA_UNAVAILABLE && pass == 0;
}

static glt_status create_headless(const glt_egl *egl, const glt_context_desc *desc_in, glt_context **out);

glt_status glt_context_create_headless(const glt_context_desc *desc_in, glt_context **out) {
    if (!out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_context_create_headless: out is NULL");
    *out = NULL;
    glt_status forked = glt_egl_fork_check();
    if (forked != GLT_OK) return forked;
    if (glt_env_check() != GLT_OK) return GLT_INVALID_ARGUMENT;
    const glt_egl *egl = glt_egl_load();
    if (!egl) return GLT_EGL_ERROR;
    /* A failed create (or an egl_device_index lookup) must leave the caller's context as it found it. */
    glt_saved_context saved;
    glt_context_save_current(&saved);
    glt_status st = create_headless(egl, desc_in, out);
    if (st != GLT_OK) {
        /* Keep the failure's message: restoring must not overwrite it. */
        glt_context_restore_quietly(&saved);
    }
    return st;
}

/* The NVIDIA EGL device whose GL reports `uuid` (GL_EXT_memory_object's device UUID): no CUDA call, for
 * processes that must not create a CUDA context. */
static glt_status create_on_uuid(const glt_egl *egl, const glt_context_desc *desc, glt_context **out) {
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    EGLDeviceEXT devices[GLT_EGL_MAX_DEVICES];
    int count = glt_egl_query_devices(egl, devices), nvidia = 0;
    char seen[256] = "";
    for (int i = 0; i < count; ++i) {
        if (!glt_egl_device_is_nvidia(egl, devices[i])) continue;
        nvidia++;
        EGLDisplay d = egl->GetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, devices[i], NULL);
        int major = 0, minor = 0;
        EGLContext c = d == EGL_NO_DISPLAY ? EGL_NO_CONTEXT : create_on_display(egl, d, desc, &major, &minor);
        if (c == EGL_NO_CONTEXT) continue;
        unsigned char uuid[16] = {0};
        GLint n = 0;
        if (gl->GetUnsignedBytei_vEXT) gl->GetIntegerv(GL_NUM_DEVICE_UUIDS_EXT, &n);
        for (GLint k = 0; k < n; ++k) {
            gl->GetUnsignedBytei_vEXT(GL_DEVICE_UUID_EXT, (GLuint)k, uuid);
            if (!memcmp(uuid, desc->device_uuid, 16)) return finish(egl, d, c, major, minor, -1, out);
        }
        size_t len = strlen(seen);
        snprintf(seen + len, sizeof seen - len, "%sEGL device %d (UUID %02x%02x%02x%02x...)", len ? ", " : "", i,
                 uuid[0], uuid[1], uuid[2], uuid[3]);
        egl->MakeCurrent(d, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        egl->DestroyContext(d, c);
    }
    const unsigned char *u = desc->device_uuid;
    return glt_fail(nvidia ? GLT_WRONG_DEVICE : GLT_EGL_ERROR,
                    "no NVIDIA EGL device runs on the GPU with UUID %02x%02x%02x%02x... (%d NVIDIA EGL device(s)%s%s); "
                    "run this process on the machine and GPU of the trainer, with NVIDIA's EGL vendor library",
                    u[0], u[1], u[2], u[3], nvidia, seen[0] ? ": " : "", seen);
}

static glt_status create_headless(const glt_egl *egl, const glt_context_desc *desc_in, glt_context **out) {
    static const glt_context_desc defaults = GLT_CONTEXT_DESC_INIT;
    glt_context_desc desc;
    glt_status size_st = glt_struct_in(desc_in, &desc, sizeof desc, &defaults, "glt_context_desc",
                                       "glt_context_create_headless");
    if (size_st != GLT_OK) return size_st;
    if (!egl->QueryDevicesEXT || !egl->GetPlatformDisplayEXT)
        return glt_fail(GLT_EGL_ERROR, "this EGL lacks EGL_EXT_device_enumeration / EGL_EXT_platform_device, "
                                       "needed for headless contexts; install libglvnd's libegl1 with a driver "
                                       "that provides them (NVIDIA, or Mesa's libegl-mesa0)");
    /* Shared-slot workers (gltensor.slots sets this in them): the trainer's GPU, found without CUDA, so that an
     * engine's own Context.headless() in a worker creates no CUDA context and works after fork. */
    unsigned char env_uuid[16];
    const char *env = getenv("GLTENSOR_EGL_DEVICE_UUID");
    if (!desc.device_uuid && desc.cuda_device == GLT_CUDA_DEVICE_AUTO && env && *env) {
        int ok = strlen(env) == 32;
        for (int i = 0; ok && i < 16; ++i) {
            unsigned v;
            ok = sscanf(env + 2 * i, "%2x", &v) == 1;
            env_uuid[i] = (unsigned char)v;
        }
        if (!ok)
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "GLTENSOR_EGL_DEVICE_UUID=%s is not a GPU UUID (32 hex digits, as SharedSlots.device_uuid"
                            ".hex() gives); unset it or correct it",
                            env);
        desc.device_uuid = env_uuid;
    }
    if (desc.device_uuid) return create_on_uuid(egl, &desc, out);
    /* A device the caller named must be honoured or refused; only "whichever this process uses" may fall
     * back to software. */
    int named = desc.cuda_device >= 0;
    if (desc.cuda_device == GLT_CUDA_DEVICE_AUTO) {
        glt_status st = glt_default_cuda_device(&desc.cuda_device);
        if (st != GLT_OK) return st;
    } else if (desc.cuda_device < -1) {
        return glt_fail(GLT_INVALID_ARGUMENT, "cuda_device %d is not a CUDA ordinal; pass N >= 0, GLT_CUDA_DEVICE_ANY (-1) "
                                              "or GLT_CUDA_DEVICE_AUTO (-2)", desc.cuda_device);
    }
    EGLDeviceEXT devices[GLT_EGL_MAX_DEVICES];
    int count = glt_egl_query_devices(egl, devices);

    int nvidia_seen = 0;
    char tried[256] = "";
    if (!desc.force_software) {
        opened o;
        if (find_nvidia(egl, &desc, desc.cuda_device, take_device, &desc.cuda_device, &o, NULL, &nvidia_seen, tried,
                        sizeof tried))
            return finish(egl, o.display, o.context, o.major, o.minor, o.cuda_status == GLT_OK ? o.cuda_device : -1,
                          out);
    }
    if (named && !desc.force_software) {
        int n = 0;
        if (glt_cuda_probe(&n) != GLT_OK || n <= 0)
            return glt_fail(GLT_CUDA_UNAVAILABLE,
                            "cuda_device=%d was asked for, but CUDA is unavailable here (%s); pass no cuda_device "
                            "to fall back to Mesa's software renderer, or fix the NVIDIA driver (python -m "
                            "gltensor doctor)",
                            desc.cuda_device, n <= 0 && glt_cuda_compiled() ? "no usable CUDA device"
                                                                             : "this gltensor was built without CUDA");
        if (desc.cuda_device >= n)
            return glt_fail(GLT_WRONG_DEVICE,
                            "cuda_device=%d was asked for, but only %d CUDA device(s) are visible (CUDA_VISIBLE_DEVICES "
                            "renumbers them from 0); pass a device below %d",
                            desc.cuda_device, n, n);
    }
    if ((named || !desc.allow_software) && !desc.force_software) {
        if (nvidia_seen)
            return glt_fail(GLT_WRONG_DEVICE,
                            "no NVIDIA EGL device runs on CUDA device %d (tried %s); pick another cuda_device "
                            "(CUDA_VISIBLE_DEVICES renumbers them) or allow the software fallback",
                            desc.cuda_device, tried[0] ? tried : "none");
    {
        char problems[1024];
        if (glt_env_problems(problems, sizeof problems))
            return glt_fail(GLT_EGL_ERROR, "no NVIDIA EGL device found among %d EGL devices, with the environment "
                                           "set as follows:\n%s", count, problems);
        return glt_fail(GLT_EGL_ERROR,
                        "no NVIDIA EGL device found among %d EGL devices; install the NVIDIA driver's EGL "
                        "vendor library (10_nvidia.json, set __EGL_VENDOR_LIBRARY_FILENAMES if it is not found)%s",
                        count, named ? "" : " or allow the software fallback");
    }
    }
    int major = 0, minor = 0;
    /* Mesa's software device, then the surfaceless platform as a last resort. */
    for (int i = 0; i < count; ++i) {
        const char *ext = egl->QueryDeviceStringEXT ? egl->QueryDeviceStringEXT(devices[i], EGL_EXTENSIONS) : NULL;
        if (!glt_has_extension(ext, "EGL_MESA_device_software")) continue;
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
    /* Variables that break EGL or Mesa give this same symptom with the drivers installed: name them first. */
    char problems[1024];
    unsigned last = egl->GetError ? (unsigned)egl->GetError() : 0u;
    if (glt_env_problems(problems, sizeof problems))
        return glt_fail(GLT_EGL_ERROR,
                        "could not create a headless OpenGL 3.3+ core context on any of %d EGL devices (last EGL "
                        "error 0x%04X), with the environment set as follows:\n%s\n(python -m gltensor doctor "
                        "lists every EGL/Mesa/gltensor variable it sees)",
                        count, last, problems);
    return glt_fail(GLT_EGL_ERROR,
                    "could not create a headless OpenGL 3.3+ core context on any of %d EGL devices (last EGL "
                    "error 0x%04X); install Mesa's EGL driver for software rendering (apt-get install libegl1 "
                    "libegl-mesa0 libgl1-mesa-dri) or the NVIDIA driver",
                    count, last);
}

/* Keeps nothing: only CUDA's confirmed answer counts, so *(int *)arg learns it and the search goes on
 * unless it is the wanted device. */
static int take_confirmed(const opened *o, int pass, void *arg) {
    (void)pass;
    return o->cuda_status == GLT_OK && o->cuda_device == *(const int *)arg;
}

glt_status glt_egl_device_index(int cuda_device, int *egl_index) {
    if (!egl_index) return glt_fail(GLT_INVALID_ARGUMENT, "glt_egl_device_index: egl_index is NULL");
    *egl_index = -1;
    int n = 0;
    glt_status st = glt_cuda_probe(&n);
    if (st != GLT_OK) return st;
    if (cuda_device < 0 || cuda_device >= n)
        return glt_fail(GLT_INVALID_ARGUMENT, "cuda_device %d is not one of the %d visible CUDA devices (0..%d)",
                        cuda_device, n, n - 1);
    /* The mapping is fixed for the life of the process (CUDA_VISIBLE_DEVICES is read once by CUDA). */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int known[GLT_EGL_MAX_DEVICES];
    static int known_set[GLT_EGL_MAX_DEVICES];
    pthread_mutex_lock(&lock);
    if (cuda_device < GLT_EGL_MAX_DEVICES && known_set[cuda_device]) {
        *egl_index = known[cuda_device];
        pthread_mutex_unlock(&lock);
        return GLT_OK;
    }
    pthread_mutex_unlock(&lock);
    const glt_egl *egl = glt_egl_load();
    if (!egl) return GLT_EGL_ERROR;
    if (!egl->QueryDevicesEXT || !egl->GetPlatformDisplayEXT)
        return glt_fail(GLT_EGL_ERROR, "this EGL lacks EGL_EXT_device_enumeration / EGL_EXT_platform_device");
    /* The caller's current context (if any) comes back afterwards, with its bound API. */
    glt_saved_context saved;
    glt_context_save_current(&saved);

    glt_context_desc desc;
    glt_context_desc_init(&desc);
    opened o;
    int index = -1, nvidia_seen = 0;
    char tried[256] = "";
    int found = find_nvidia(egl, &desc, cuda_device, take_confirmed, &cuda_device, &o, &index, &nvidia_seen, tried,
                            sizeof tried);
    if (found) close_opened(egl, &o);
    glt_context_restore_quietly(&saved);
    if (!found) {
        if (!nvidia_seen)
            return glt_fail(GLT_EGL_ERROR, "no NVIDIA EGL device is visible; install the NVIDIA driver's EGL vendor "
                                           "library (10_nvidia.json; set __EGL_VENDOR_LIBRARY_FILENAMES if it is not "
                                           "found)");
        return glt_fail(GLT_WRONG_DEVICE, "no NVIDIA EGL device runs on CUDA device %d (tried %s)", cuda_device,
                        tried[0] ? tried : "none");
    }
    pthread_mutex_lock(&lock);
    if (cuda_device < GLT_EGL_MAX_DEVICES) {
        known[cuda_device] = index;
        known_set[cuda_device] = 1;
    }
    pthread_mutex_unlock(&lock);
    *egl_index = index;
    return GLT_OK;
}

glt_status glt_context_make_current(glt_context *ctx) {
    if (!ctx) return glt_fail(GLT_INVALID_ARGUMENT, "glt_context_make_current: context is NULL");
    const glt_egl *egl = glt_egl_load();
    if (!egl) return GLT_EGL_ERROR;
    /* The bound API is per thread: a thread that never bound OpenGL would not see this context. */
    egl->BindAPI(EGL_OPENGL_API);
    if (!egl->MakeCurrent(ctx->display, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx->context)) {
        unsigned err = (unsigned)egl->GetError();
        long owner = ctx->current_tid;
        /* A thread that just returned from its work may still be tearing down (Python's join returns before the
         * OS thread is gone): give it a moment before telling "busy elsewhere" from "bound to a dead thread". */
        for (int i = 0; owner && owner != this_thread() && thread_alive(owner) && i < 40; ++i) usleep(5000);
        if (owner && owner != this_thread() && !thread_alive(owner))
            return glt_fail(GLT_EGL_ERROR,
                            "eglMakeCurrent failed (EGL error 0x%04X): the context is still current in thread %ld, "
                            "which ended without releasing it; EGL keeps a context bound to that thread, so no "
                            "thread can make it current again. Create a new context (Context.headless()), and call "
                            "ctx.release() in a thread before it ends",
                            err, owner);
        return glt_fail(GLT_EGL_ERROR,
                        "eglMakeCurrent failed (EGL error 0x%04X): a context can be current in one thread at a "
                        "time%s; release it in the other thread first (ctx.release() there)",
                        err, owner && owner != this_thread() ? " and it is current in another thread" : "");
    }
    ctx->current_tid = this_thread();
    return GLT_OK;
}

glt_status glt_context_release_current(glt_context *ctx) {
    if (!ctx) return glt_fail(GLT_INVALID_ARGUMENT, "glt_context_release_current: context is NULL");
    const glt_egl *egl = glt_egl_load();
    if (!egl) return GLT_EGL_ERROR;
    if (egl->GetCurrentContext() == ctx->context) {
        egl->MakeCurrent(ctx->display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        ctx->current_tid = 0;
    }
    return GLT_OK;
}

glt_status glt_context_get_info(const glt_context *ctx, glt_context_info *info) {
    if (!ctx || !info) return glt_fail(GLT_INVALID_ARGUMENT, "glt_context_get_info: NULL argument");
    info->size = sizeof *info;
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
        glt_gl_context_forget_owned(ctx->display, ctx->context); /* its objects now refuse, ClosedError */
        /* The display is not terminated: EGL shares one display per device in the process, and
         * terminating it would break other contexts (the caller's, or another glt_context) on it. */
        egl->DestroyContext(ctx->display, ctx->context);
    }
    free(ctx->vendor);
    free(ctx->renderer);
    free(ctx->version);
    free(ctx);
}
