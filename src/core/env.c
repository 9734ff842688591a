/*
 * The environment, read in one place: the GLTENSOR_* variables the library obeys (each with the values it
 * knows; any other value is refused, naming the valid ones, where it used to be ignored silently), and the
 * EGL/Mesa variables that break context creation in ways whose symptom ("no EGL device", "install Mesa")
 * points away from the cause. The doctor prints both (python/gltensor/doctor.py).
 */
#include "core/core.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct env_var {
    const char *name;
    const char *values[4]; /* values[0] is the default ("auto"); unset or empty means it too */
    const char *what;
} env_var;

static const env_var vars[GLT_ENV_COUNT] = {
    [GLT_ENV_DEPTH_PATH] = {"GLTENSOR_DEPTH_PATH", {"auto", "readpixels", "compute", NULL},
                            "how depth is read: glReadPixels or the compute shader"},
    [GLT_ENV_TEXTURE_REGION_READ] = {"GLTENSOR_TEXTURE_REGION_READ", {"auto", "framebuffer", NULL, NULL},
                                     "the CPU backend's route for texture regions (glGetTextureSubImage or a "
                                     "framebuffer read)"},
    [GLT_ENV_UPLOAD_PATH] = {"GLTENSOR_UPLOAD_PATH", {"auto", "copy", NULL, NULL},
                             "the CUDA upload path (surface writes, or a linear copy)"},
    [GLT_ENV_SLOTS_WRITE] = {"GLTENSOR_SLOTS_WRITE", {"auto", "shader", "copy", "direct"},
                             "how a shared-slot worker writes: auto (a compute shader where GL 4.3 has one, else copy), "
                             "shader, copy (glReadPixels + glCopyBufferSubData), direct (a diagnostic: wrong on "
                             "NVIDIA's driver 580)"},
    [GLT_ENV_SLOTS_COMPRESSION] = {"GLTENSOR_SLOTS_COMPRESSION", {"generic", "none", NULL, NULL},
                                   "whether CUDA shared slots are compressible (a diagnostic: 'none' reads stale "
                                   "pixels on NVIDIA's GL)"},
    [GLT_ENV_SLOTS_ALIGN] = {"GLTENSOR_SLOTS_ALIGN", {"4k", "64k", "2m", NULL},
                             "where each shared slot starts (a diagnostic)"},
    [GLT_ENV_SLOTS_PACK_INPUT] = {"GLTENSOR_SLOTS_PACK_INPUT", {"auto", "blit", NULL, NULL},
                                  "what the shared-slot shader write reads: auto (the caller's texture itself where "
                                  "that is exact, else a blitted copy), blit (always the copy; a diagnostic)"},
};

static int value_index(const env_var *v, const char *s) {
    if (!s || !*s) return 0;
    for (int i = 0; i < 4 && v->values[i]; ++i)
        if (!strcmp(s, v->values[i])) return i;
    return -1;
}

int glt_env_choice(glt_env_var var) {
    int k = value_index(&vars[var], getenv(vars[var].name));
    return k < 0 ? 0 : k; /* refused by glt_env_check at every object's creation; read as the default here */
}

static void list_values(const env_var *v, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < 4 && v->values[i] && k < size; ++i)
        k += (size_t)snprintf(buf + k, size - k, "%s%s", i ? ", " : "", v->values[i]);
}

glt_status glt_env_check(void) {
    for (int i = 0; i < GLT_ENV_COUNT; ++i) {
        const char *s = getenv(vars[i].name);
        if (value_index(&vars[i], s) >= 0) continue;
        char valid[96];
        list_values(&vars[i], valid, sizeof valid);
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "%s=%s is not a value gltensor knows (it sets %s); use one of %s, or unset it", vars[i].name,
                        s, vars[i].what, valid);
    }
    return GLT_OK;
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int dir_has_json(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        found = n > 5 && !strcmp(e->d_name + n - 5, ".json");
    }
    closedir(d);
    return found;
}

/* Whether every ':'-separated entry of `list` passes `ok`; the first that does not, in *bad. */
static int all_entries(const char *list, int (*ok)(const char *), char *bad, size_t bad_size) {
    char path[1024];
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n && n < sizeof path) {
            memcpy(path, p, n);
            path[n] = '\0';
            if (!ok(path)) {
                snprintf(bad, bad_size, "%s", path);
                return 0;
            }
        }
        p += n + (end ? 1 : 0);
    }
    return 1;
}

/* Gallium drivers Mesa builds (a name it does not know leaves EGL without a driver for the device). */
static const char *const gallium_drivers[] = {"llvmpipe", "softpipe", "swrast", "zink", "radeonsi", "r600", "r300",
                                              "nouveau", "iris", "crocus", "i915", "virgl", "d3d12", "v3d", "vc4",
                                              "freedreno", "etnaviv", "lima", "panfrost", "asahi", "svga", "kmsro",
                                              NULL};

static int known_gallium(const char *s) {
    for (int i = 0; gallium_drivers[i]; ++i)
        if (!strcmp(s, gallium_drivers[i])) return 1;
    return 0;
}

size_t glt_env_problems(char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
#define ADD(...)                                                                                    \
    do {                                                                                            \
        if (k < size) k += (size_t)snprintf(buf + k, size - k, "%s", k ? "\n" : "");               \
        if (k < size) k += (size_t)snprintf(buf + k, size - k, __VA_ARGS__);                        \
    } while (0)
    for (int i = 0; i < GLT_ENV_COUNT; ++i) {
        const char *s = getenv(vars[i].name);
        if (value_index(&vars[i], s) >= 0) continue;
        char valid[96];
        list_values(&vars[i], valid, sizeof valid);
        ADD("%s=%s is not a value gltensor knows; use one of %s, or unset it", vars[i].name, s, valid);
    }
    char bad[1024];
    const char *s = getenv("__EGL_VENDOR_LIBRARY_FILENAMES");
    if (s && *s && !all_entries(s, is_file, bad, sizeof bad))
        ADD("__EGL_VENDOR_LIBRARY_FILENAMES=%s names %s, which is no file: glvnd then loads no EGL vendor library "
            "from it (no EGL device, no context); point it at existing vendor .json files, or unset it",
            s, bad);
    s = getenv("__EGL_VENDOR_LIBRARY_DIRS");
    if (s && *s && !all_entries(s, dir_has_json, bad, sizeof bad))
        ADD("__EGL_VENDOR_LIBRARY_DIRS=%s names %s, which holds no vendor .json file: glvnd searches only these "
            "directories, so it finds no EGL vendor library there; fix the directories, or unset it",
            s, bad);
    s = getenv("MESA_GL_VERSION_OVERRIDE");
    if (s && *s) {
        int major = 0, minor = 0;
        if (sscanf(s, "%d.%d", &major, &minor) < 1 || major < 3 || (major == 3 && minor < 3))
            ADD("MESA_GL_VERSION_OVERRIDE=%s caps Mesa's OpenGL below the 3.3 core profile gltensor's contexts "
                "need, so creating one fails; unset it (or set 4.5)",
                s);
    }
    const char *names[] = {"GALLIUM_DRIVER", "MESA_LOADER_DRIVER_OVERRIDE"};
    for (int i = 0; i < 2; ++i) {
        s = getenv(names[i]);
        if (s && *s && !known_gallium(s))
            ADD("%s=%s is no Mesa driver (e.g. llvmpipe, softpipe, zink, radeonsi, iris): Mesa then opens no "
                "device for EGL; unset it, or name a driver this Mesa has",
                names[i], s);
    }
    s = getenv("CUDA_VISIBLE_DEVICES");
    if (s && (!*s || !strcmp(s, "-1") || !strcmp(s, "none") || !strcmp(s, "NoDevFiles")))
        ADD("CUDA_VISIBLE_DEVICES=%s hides every GPU from CUDA: the CUDA backend cannot run; unset it or list "
            "the GPUs to use",
            s);
#undef ADD
    return k;
}
