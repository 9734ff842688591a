/*
 * Is the compute-shader depth path (gl_stage.c) bit-equal to glReadPixels on this driver?
 *
 * The shader reproduces the arithmetic NVIDIA's glReadPixels(GL_DEPTH_COMPONENT, GL_FLOAT) uses for
 * fixed-point depth; another driver (or a later NVIDIA one) may round differently, and a depth image
 * that differs from GL's own readback in the last bit would be a silently wrong result. So before the
 * compute path becomes the default it is run once, per GL renderer and process, next to the pixel-pack
 * copy on images holding every 16-bit value and 2^20 24-bit values spread over the whole range (every
 * low-order bit pattern included), uploaded, and on images cleared with glClearDepth to values between
 * the steps of the format; it is chosen only if every float is identical. Cleared images matter: on an
 * H100 (driver 580) every uploaded or drawn value matched, but regions cleared to such values read back
 * differently through glReadPixels than through the shader (tests/test_depth.py), so there the
 * pixel-pack copy stays. The check costs a few milliseconds once; tests/test_depth.py checks all 2^24
 * values and cleared images.
 *
 * Every binding and pixel-store parameter it touches is restored, and GL errors it raises are drained.
 */
#include "read/gl_stage.h"

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* 1 when the two stages' float buffers hold the same bytes; both mapped at once, on two binding points. */
static int buffers_equal(const glt_gl *gl, const glt_gl_stage *x, const glt_gl_stage *y, size_t bytes) {
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, glt_stage_depth_buffer(x));
    gl->BindBuffer(GL_COPY_READ_BUFFER, glt_stage_depth_buffer(y));
    const void *px = gl->MapBufferRange(GL_PIXEL_PACK_BUFFER, 0, (GLsizeiptr)bytes, GL_MAP_READ_BIT);
    const void *py = gl->MapBufferRange(GL_COPY_READ_BUFFER, 0, (GLsizeiptr)bytes, GL_MAP_READ_BIT);
    int same = px && py && memcmp(px, py, bytes) == 0;
    if (px) gl->UnmapBuffer(GL_PIXEL_PACK_BUFFER);
    if (py) gl->UnmapBuffer(GL_COPY_READ_BUFFER);
    return same;
}

/* 64 stripes cleared to depths between the format's steps, as glClearDepth with a computed value gives. */
static void clear_stripes(const glt_gl *gl, GLuint tex, GLenum internal, int w, int h) {
    GLint draw = 0, box[4] = {0, 0, 0, 0}, mask = 1;
    double clear = 1.0;
    GLboolean scissor = gl->IsEnabled(GL_SCISSOR_TEST);
    gl->GetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &draw);
    gl->GetIntegerv(GL_SCISSOR_BOX, box);
    gl->GetIntegerv(GL_DEPTH_WRITEMASK, &mask);
    gl->GetDoublev(GL_DEPTH_CLEAR_VALUE, &clear);
    GLuint fbo = 0;
    gl->GenFramebuffers(1, &fbo);
    gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, fbo);
    gl->FramebufferTexture2D(GL_DRAW_FRAMEBUFFER, internal == 0x88F0 ? GL_DEPTH_STENCIL_ATTACHMENT : GL_DEPTH_ATTACHMENT,
                             GL_TEXTURE_2D, tex, 0);
    gl->DrawBuffer(GL_NONE);
    gl->Enable(GL_SCISSOR_TEST);
    gl->DepthMask(1);
    for (int i = 0; i < 64; ++i) {
        gl->Scissor(i * (w / 64), 0, w / 64, h);
        gl->ClearDepth(i / 63.0 * 0.999 + 0.0005 * (i % 7));
        gl->Clear(GL_DEPTH_BUFFER_BIT);
    }
    gl->DepthMask((GLboolean)mask);
    gl->ClearDepth(clear);
    gl->Scissor(box[0], box[1], box[2], box[3]);
    if (!scissor) gl->Disable(GL_SCISSOR_TEST);
    gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, (GLuint)draw);
    gl->DeleteFramebuffers(1, &fbo);
}

/* One format: fill a texture (upload `data`, or clear stripes when it is NULL), read it through both
 * paths, compare. 1: identical; 0: different; -1: the check could not run. */
static int probe_format(const glt_gl *gl, GLenum internal, GLenum format, GLenum type, int w, int h,
                        const void *data) {
    const glt_format *fmt = glt_format_find(internal);
    if (!fmt) return -1;
    GLuint tex = 0;
    gl->GenTextures(1, &tex);
    gl->BindTexture(GL_TEXTURE_2D, tex);
    gl->TexStorage2D(GL_TEXTURE_2D, 1, internal, w, h);
    if (data) gl->TexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, w, h, format, type, data);
    gl->BindTexture(GL_TEXTURE_2D, 0);
    if (!data) clear_stripes(gl, tex, internal, w, h);
    int result = -1;
    glt_gl_stage *by_shader = NULL, *by_read = NULL;
    if (gl->GetError() == GL_NO_ERROR &&
        glt_stage_create(tex, GL_TEXTURE_2D, fmt, w, h, 0, NULL, 1, &by_shader) == GLT_OK &&
        glt_stage_create(tex, GL_TEXTURE_2D, fmt, w, h, 0, NULL, 0, &by_read) == GLT_OK &&
        glt_stage_run(by_shader) == GLT_OK && glt_stage_run(by_read) == GLT_OK)
        result = buffers_equal(gl, by_shader, by_read, (size_t)w * h * sizeof(float));
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

    GLint saved[N_UNPACK], unpack_pbo = 0, pack_pbo = 0, copy_read = 0, tex = 0;
    for (int i = 0; i < N_UNPACK; ++i) gl->GetIntegerv(unpack_params[i], &saved[i]);
    gl->GetIntegerv(GL_PIXEL_UNPACK_BUFFER_BINDING, &unpack_pbo);
    gl->GetIntegerv(GL_PIXEL_PACK_BUFFER_BINDING, &pack_pbo);
    gl->GetIntegerv(GL_COPY_READ_BUFFER_BINDING, &copy_read);
    gl->GetIntegerv(GL_TEXTURE_BINDING_2D, &tex);
    glt_gl_drain_errors(gl);
    gl->BindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
    for (int i = 0; i < N_UNPACK; ++i) gl->PixelStorei(unpack_params[i], unpack_params[i] == GL_UNPACK_ALIGNMENT);

    int exact = probe_format(gl, 0x81A5 /* DEPTH_COMPONENT16 */, GL_DEPTH_COMPONENT, GL_UNSIGNED_SHORT, 256, 256,
                             d16) == 1 &&
                probe_format(gl, 0x88F0 /* DEPTH24_STENCIL8 */, GL_DEPTH_STENCIL, GL_UNSIGNED_INT_24_8, W24, H24,
                             d24) == 1 &&
                probe_format(gl, 0x81A5, 0, 0, 1024, 16, NULL) == 1 &&
                probe_format(gl, 0x81A6 /* DEPTH_COMPONENT24 */, 0, 0, 1024, 16, NULL) == 1 &&
                probe_format(gl, 0x88F0, 0, 0, 1024, 16, NULL) == 1;

    for (int i = 0; i < N_UNPACK; ++i) gl->PixelStorei(unpack_params[i], saved[i]);
    gl->BindBuffer(GL_PIXEL_UNPACK_BUFFER, (GLuint)unpack_pbo);
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, (GLuint)pack_pbo);
    gl->BindBuffer(GL_COPY_READ_BUFFER, (GLuint)copy_read);
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

int glt_depth_use_compute(const glt_format *fmt, int for_cuda) {
    const glt_gl *gl = glt_gl_load();
    if (!gl || !glt_stage_compute_possible(gl, fmt)) return 0;
    int path = glt_env_choice(GLT_ENV_DEPTH_PATH);
    if (path == 1) return 0; /* readpixels */
    if (path == 2) return 1; /* compute */
    return for_cuda && glt_depth_compute_exact(gl);
}
