/* The core's own declarations, below every other folder of src/ (core/README.md): reading a caller's struct
 * (library.c), the per-thread error message (errors.c) and the environment (env.c). No GL, no CUDA. */
#ifndef GLT_CORE_H
#define GLT_CORE_H

#include "gltensor.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
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

#endif
