/*
 * Is the compute-shader depth path (gl_stage.c) bit-equal to glReadPixels on this driver?
 *
 * The shader reproduces the arithmetic NVIDIA's glReadPixels(GL_DEPTH_COMPONENT, GL_FLOAT) uses for
 * fixed-point depth; another driver (or a later NVIDIA one) may round differently, and a depth image
 * that differs from GL's own readback in the last bit would be a silently wrong result. So before the
 * compute path becomes the default it is run once, per GL renderer and process, next to the pixel-pack
 * copy on images holding every 16-bit value and 2^20 24-bit values spread over the whole range (every
 * low-order bit pattern included), and chosen only if every float is identical. The check costs a few
 * milliseconds once; tests/test_depth.py checks all 2^24 values.
 *
 * Every binding and pixel-store parameter it touches is restored, and GL errors it raises are drained.
 */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GL_UNPACK_SWAP_BYTES 0x0CF0
#define GL_UNPACK_ROW_LENGTH 0x0CF2
#define GL_UNPACK_SKIP_ROWS 0x0CF3
#define GL_UNPACK_SKIP_PIXELS 0x0CF4
#define GL_UNPACK_ALIGNMENT 0x0CF5
#define GL_PIXEL_UNPACK_BUFFER 0x88EC
#define GL_PIXEL_UNPACK_BUFFER_BINDING 0x88EF
#define GL_DEPTH_STENCIL_FMT 0x84F9
#define GL_UNSIGNED_INT_24_8 0x84FA

enum { MAX_RENDERERS = 4 };
static struct {
    char renderer[256];
    int exact;
} verdicts[MAX_RENDERERS];
static int n_verdicts;
static pthread_mutex_t verdict_lock = PTHREAD_MUTEX_INITIALIZER;

static const GLenum unpack_params[] = {GL_UNPACK_SWAP_BYTES, GL_UNPACK_ROW_LENGTH, GL_UNPACK_SKIP_ROWS,
                                       GL_UNPACK_SKIP_PIXELS, GL_UNPACK_ALIGNMENT};
enum { N_UNPACK = sizeof unpack_params / sizeof unpack_params[0] };

/* Maps a stage's float buffer and compares it with `ref`; 1 when identical. */
static int buffer_equals(const glt_gl *gl, GLuint pbo, const float *ref, size_t n) {
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, pbo);
    const void *p = gl->MapBufferRange(GL_PIXEL_PACK_BUFFER, 0, (GLsizeiptr)(n * sizeof(float)), GL_MAP_READ_BIT);
    int same = p && memcmp(p, ref, n * sizeof(float)) == 0;
    if (p) gl->UnmapBuffer(GL_PIXEL_PACK_BUFFER);
    return same;
}

/* One format: upload `data`, read it through both paths, compare. -1 when the check could not run. */
static int probe_format(const glt_gl *gl, GLenum internal, GLenum format, GLenum type, int w, int h,
                        const void *data) {
    const glt_format *fmt = glt_format_find(internal);
    if (!fmt) return -1;
    GLuint tex = 0;
    gl->GenTextures(1, &tex);
    gl->BindTexture(GL_TEXTURE_2D, tex);
    gl->TexStorage2D(GL_TEXTURE_2D, 1, internal, w, h);
    gl->TexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, w, h, format, type, data);
    gl->BindTexture(GL_TEXTURE_2D, 0);
    int result = -1;
    glt_gl_stage *by_shader = NULL, *by_read = NULL;
    if (gl->GetError() == GL_NO_ERROR &&
        glt_stage_create_path(tex, GL_TEXTURE_2D, fmt, w, h, 0, 1, &by_shader) == GLT_OK &&
        glt_stage_create_path(tex, GL_TEXTURE_2D, fmt, w, h, 0, 0, &by_read) == GLT_OK &&
        glt_stage_run(by_shader) == GLT_OK && glt_stage_run(by_read) == GLT_OK) {
        size_t n = (size_t)w * h;
        float *ref = malloc(n * sizeof(float));
        gl->BindBuffer(GL_PIXEL_PACK_BUFFER, glt_stage_depth_buffer(by_read));
        const void *p = gl->MapBufferRange(GL_PIXEL_PACK_BUFFER, 0, (GLsizeiptr)(n * sizeof(float)), GL_MAP_READ_BIT);
        if (ref && p) {
            memcpy(ref, p, n * sizeof(float));
            gl->UnmapBuffer(GL_PIXEL_PACK_BUFFER);
            result = buffer_equals(gl, glt_stage_depth_buffer(by_shader), ref, n);
        } else if (p) {
            gl->UnmapBuffer(GL_PIXEL_PACK_BUFFER);
        }
        free(ref);
    }
    glt_stage_destroy(by_shader);
    glt_stage_destroy(by_read);
    gl->DeleteTextures(1, &tex);
    return result;
}

static int probe(const glt_gl *gl) {
    enum { N16 = 256 * 256, W24 = 1024, H24 = 1024, N24 = W24 * H24 };
    uint16_t *d16 = malloc(N16 * sizeof *d16);
    uint32_t *d24 = malloc(N24 * sizeof *d24);
    if (!d16 || !d24) {
        free(d16);
        free(d24);
        return 0;
    }
    for (uint32_t i = 0; i < N16; ++i) d16[i] = (uint16_t)i;
    /* 16 * i + (i mod 16): 0 .. 2^24 - 1, in steps of ~16 with every low nibble; << 8 for the packed layout. */
    for (uint32_t i = 0; i < N24; ++i) d24[i] = ((i << 4) | (i & 15u)) << 8;

    GLint saved[N_UNPACK], unpack_pbo = 0, pack_pbo = 0, tex = 0;
    for (int i = 0; i < N_UNPACK; ++i) gl->GetIntegerv(unpack_params[i], &saved[i]);
    gl->GetIntegerv(GL_PIXEL_UNPACK_BUFFER_BINDING, &unpack_pbo);
    gl->GetIntegerv(GL_PIXEL_PACK_BUFFER_BINDING, &pack_pbo);
    gl->GetIntegerv(GL_TEXTURE_BINDING_2D, &tex);
    glt_gl_drain_errors(gl);
    gl->BindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
    for (int i = 0; i < N_UNPACK; ++i) gl->PixelStorei(unpack_params[i], unpack_params[i] == GL_UNPACK_ALIGNMENT);

    int exact = probe_format(gl, 0x81A5 /* DEPTH_COMPONENT16 */, GL_DEPTH_COMPONENT, GL_UNSIGNED_SHORT, 256, 256,
                             d16) == 1 &&
                probe_format(gl, 0x88F0 /* DEPTH24_STENCIL8 */, GL_DEPTH_STENCIL_FMT, GL_UNSIGNED_INT_24_8, W24, H24,
                             d24) == 1;

    for (int i = 0; i < N_UNPACK; ++i) gl->PixelStorei(unpack_params[i], saved[i]);
    gl->BindBuffer(GL_PIXEL_UNPACK_BUFFER, (GLuint)unpack_pbo);
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, (GLuint)pack_pbo);
    gl->BindTexture(GL_TEXTURE_2D, (GLuint)tex);
    glt_gl_drain_errors(gl);
    glt_clear_error(); /* a failed probe only means: use the pixel-pack copy */
    free(d16);
    free(d24);
    return exact;
}

int glt_depth_compute_exact(const glt_gl *gl) {
    if (!gl->has_compute || !gl->TexSubImage2D) return 0;
    const char *renderer = (const char *)gl->GetString(GL_RENDERER);
    const char *version = (const char *)gl->GetString(GL_VERSION);
    char key[256];
    snprintf(key, sizeof key, "%s | %s", renderer ? renderer : "?", version ? version : "?");
    pthread_mutex_lock(&verdict_lock);
    int exact = -1;
    for (int i = 0; i < n_verdicts && exact < 0; ++i)
        if (!strcmp(verdicts[i].renderer, key)) exact = verdicts[i].exact;
    if (exact < 0) {
        exact = probe(gl);
        if (n_verdicts < MAX_RENDERERS) {
            snprintf(verdicts[n_verdicts].renderer, sizeof verdicts[n_verdicts].renderer, "%s", key);
            verdicts[n_verdicts++].exact = exact;
        }
    }
    pthread_mutex_unlock(&verdict_lock);
    return exact;
}
