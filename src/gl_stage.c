/*
 * The GL-side step some images need before CUDA (or the CPU backend) can read
 * them, run at the start of every read:
 *   - multisampled images are resolved with glBlitFramebuffer into a
 *     single-sample renderbuffer of our own (kept between reads), since CUDA
 *     cannot map multisampled images;
 *   - depth images are copied by GL into a pixel-pack buffer as float window
 *     depth (glReadPixels with GL_DEPTH_COMPONENT, GL_FLOAT, from a framebuffer of ours),
 *     since CUDA cannot map depth formats either. The buffer is registered with
 *     CUDA once; its mapping is linear device memory, so the CUDA side is one
 *     kernel (flip, optional linearisation) and no host copy happens.
 *     Why a pixel-pack copy rather than a shader pass writing R32F: it keeps
 *     the source's full precision (float depth, 24 or 32 bits) with no program,
 *     vertex array, or draw state of ours in the caller's context, and it
 *     measured within the target (depth <= 2x colour capture at 1024^2; see
 *     benchmarks/bench_convert.py).
 * Every binding and enable touched is restored.
 */
#include "internal.h"

#include <stdlib.h>

struct glt_gl_stage {
    GLuint name;
    GLenum target;
    const glt_format *fmt;
    int width, height, samples;
    GLuint src_fbo, dst_fbo, resolve_rb; /* multisampled sources */
    GLuint read_fbo;                     /* depth renderbuffers: reading needs a framebuffer */
    GLuint pbo;                          /* depth: float window depth, bottom-up rows */
};

static GLenum depth_attachment(const glt_format *fmt) {
    /* Packed depth-stencil images attach at the combined point; either way only depth is read. */
    switch (fmt->internal_format) {
    case 0x84F9: /* GL_DEPTH_STENCIL */
    case 0x88F0: /* GL_DEPTH24_STENCIL8 */
    case 0x8CAD: /* GL_DEPTH32F_STENCIL8 */
        return GL_DEPTH_STENCIL_ATTACHMENT;
    default:
        return GL_DEPTH_ATTACHMENT;
    }
}

/* Attaches an image to the bound READ framebuffer at the colour or depth point. */
static void attach(const glt_gl *gl, GLenum fb_target, const glt_format *fmt, GLenum target, GLuint name) {
    GLenum point = fmt->depth ? depth_attachment(fmt) : GL_COLOR_ATTACHMENT0;
    if (target == GL_RENDERBUFFER)
        gl->FramebufferRenderbuffer(fb_target, point, GL_RENDERBUFFER, name);
    else
        gl->FramebufferTexture2D(fb_target, point, target, name, 0);
    /* Read/draw buffer state belongs to the framebuffer bound at that point: set only the relevant one.
     * A depth-only framebuffer is complete only without colour buffers. */
    GLenum buffer = fmt->depth ? GL_NONE : GL_COLOR_ATTACHMENT0;
    if (fb_target == GL_READ_FRAMEBUFFER)
        gl->ReadBuffer(buffer);
    else
        gl->DrawBuffer(buffer);
}

int glt_stage_needed(const glt_format *fmt, GLenum target, int samples) {
    return fmt->depth || samples > 0 || target == GL_TEXTURE_2D_MULTISAMPLE;
}

glt_status glt_stage_create(GLuint name, GLenum target, const glt_format *fmt, int width, int height, int samples,
                            glt_gl_stage **out) {
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    glt_gl_stage *s = calloc(1, sizeof *s);
    if (!s) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    s->name = name;
    s->target = target;
    s->fmt = fmt;
    s->width = width;
    s->height = height;
    s->samples = samples;
    glt_gl_drain_errors(gl);
    GLint prev_read = 0, prev_draw = 0, prev_rb = 0, prev_pbo = 0;
    gl->GetIntegerv(GL_READ_FRAMEBUFFER_BINDING, &prev_read);
    gl->GetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &prev_draw);
    gl->GetIntegerv(GL_RENDERBUFFER_BINDING, &prev_rb);
    gl->GetIntegerv(GL_PIXEL_PACK_BUFFER_BINDING, &prev_pbo);
    glt_status st = GLT_OK;
    if (samples > 0 || target == GL_TEXTURE_2D_MULTISAMPLE) {
        gl->GenRenderbuffers(1, &s->resolve_rb);
        gl->BindRenderbuffer(GL_RENDERBUFFER, s->resolve_rb);
        gl->RenderbufferStorage(GL_RENDERBUFFER, fmt->internal_format == 0x1908   ? 0x8058 /* RGBA -> RGBA8 */
                                                 : fmt->internal_format == 0x1907 ? 0x8051 /* RGB -> RGB8 */
                                                                                  : fmt->internal_format,
                                width, height);
        gl->GenFramebuffers(1, &s->src_fbo);
        gl->GenFramebuffers(1, &s->dst_fbo);
        gl->BindFramebuffer(GL_READ_FRAMEBUFFER, s->src_fbo);
        attach(gl, GL_READ_FRAMEBUFFER, fmt, target, name);
        gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, s->dst_fbo);
        attach(gl, GL_DRAW_FRAMEBUFFER, fmt, GL_RENDERBUFFER, s->resolve_rb);
        if (gl->CheckFramebufferStatus(GL_READ_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE ||
            gl->CheckFramebufferStatus(GL_DRAW_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
            st = glt_fail(GLT_GL_ERROR,
                          "%s %u (%s, %d samples) cannot be resolved: a framebuffer with it is incomplete; make sure "
                          "it has storage",
                          target == GL_RENDERBUFFER ? "renderbuffer" : "texture", name, fmt->name, samples);
    } else if (fmt->depth) {
        /* glReadPixels from a framebuffer for textures too: NVIDIA's glGetTexImage converts 24-bit
         * depth to float with a different rounding (1 ulp apart), and glReadPixels is the reference. */
        gl->GenFramebuffers(1, &s->read_fbo);
        gl->BindFramebuffer(GL_READ_FRAMEBUFFER, s->read_fbo);
        attach(gl, GL_READ_FRAMEBUFFER, fmt, target, name);
    }
    if (st == GLT_OK && fmt->depth) {
        gl->GenBuffers(1, &s->pbo);
        gl->BindBuffer(GL_PIXEL_PACK_BUFFER, s->pbo);
        gl->BufferData(GL_PIXEL_PACK_BUFFER, (GLsizeiptr)((size_t)width * height * sizeof(float)), NULL,
                       GL_STREAM_READ);
    }
    gl->BindFramebuffer(GL_READ_FRAMEBUFFER, (GLuint)prev_read);
    gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, (GLuint)prev_draw);
    gl->BindRenderbuffer(GL_RENDERBUFFER, (GLuint)prev_rb);
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, (GLuint)prev_pbo);
    GLenum err = gl->GetError();
    if (st == GLT_OK && err != GL_NO_ERROR)
        st = glt_fail(GLT_GL_ERROR, "preparing to read %s %u (%s) failed with %s",
                      target == GL_RENDERBUFFER ? "renderbuffer" : "texture", name, fmt->name, glt_gl_error_name(err));
    if (st != GLT_OK) {
        glt_stage_destroy(s);
        return st;
    }
    *out = s;
    return GLT_OK;
}

void glt_stage_destroy(glt_gl_stage *s) {
    if (!s) return;
    const glt_gl *gl = glt_gl_load();
    if (gl) {
        if (s->src_fbo) gl->DeleteFramebuffers(1, &s->src_fbo);
        if (s->dst_fbo) gl->DeleteFramebuffers(1, &s->dst_fbo);
        if (s->read_fbo) gl->DeleteFramebuffers(1, &s->read_fbo);
        if (s->resolve_rb) gl->DeleteRenderbuffers(1, &s->resolve_rb);
        if (s->pbo) gl->DeleteBuffers(1, &s->pbo);
    }
    free(s);
}

GLuint glt_stage_resolved(const glt_gl_stage *s) { return s->resolve_rb; }
GLuint glt_stage_depth_buffer(const glt_gl_stage *s) { return s->pbo; }

glt_status glt_stage_run(glt_gl_stage *s) {
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    glt_gl_drain_errors(gl);
    GLint prev_read = 0, prev_draw = 0;
    gl->GetIntegerv(GL_READ_FRAMEBUFFER_BINDING, &prev_read);
    if (s->resolve_rb) {
        /* Blits obey the scissor test and sRGB conversion: switch both off for a faithful resolve. */
        GLboolean scissor = gl->IsEnabled(GL_SCISSOR_TEST), srgb = gl->IsEnabled(GL_FRAMEBUFFER_SRGB);
        gl->GetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &prev_draw);
        if (scissor) gl->Disable(GL_SCISSOR_TEST);
        if (srgb) gl->Disable(GL_FRAMEBUFFER_SRGB);
        gl->BindFramebuffer(GL_READ_FRAMEBUFFER, s->src_fbo);
        gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, s->dst_fbo);
        gl->BlitFramebuffer(0, 0, s->width, s->height, 0, 0, s->width, s->height,
                            s->fmt->depth ? GL_DEPTH_BUFFER_BIT : GL_COLOR_BUFFER_BIT, GL_NEAREST);
        gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, (GLuint)prev_draw);
        if (scissor) gl->Enable(GL_SCISSOR_TEST);
        if (srgb) gl->Enable(GL_FRAMEBUFFER_SRGB);
    }
    if (s->pbo) {
        glt_pack_state pack;
        glt_pack_push(gl, &pack);
        gl->BindBuffer(GL_PIXEL_PACK_BUFFER, s->pbo);
        gl->BindFramebuffer(GL_READ_FRAMEBUFFER, s->resolve_rb ? s->dst_fbo : s->read_fbo);
        gl->ReadPixels(0, 0, s->width, s->height, GL_DEPTH_COMPONENT, GL_FLOAT, NULL);
        glt_pack_pop(gl, &pack);
    }
    gl->BindFramebuffer(GL_READ_FRAMEBUFFER, (GLuint)prev_read);
    GLenum err = gl->GetError();
    if (err != GL_NO_ERROR)
        return glt_fail(GLT_GL_ERROR, "%s %s %u (%s) failed with %s", s->resolve_rb ? "resolving" : "reading depth of",
                        s->target == GL_RENDERBUFFER ? "renderbuffer" : "texture", s->name, s->fmt->name,
                        glt_gl_error_name(err));
    return GLT_OK;
}

glt_status glt_stage_read_depth_host(glt_gl_stage *s, int flip, int mode, double near_plane, double far_plane,
                                     void *dst, size_t pitch) {
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    GLint prev_pbo = 0;
    gl->GetIntegerv(GL_PIXEL_PACK_BUFFER_BINDING, &prev_pbo);
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, s->pbo);
    size_t bytes = (size_t)s->width * s->height * sizeof(float);
    const float *src = gl->MapBufferRange(GL_PIXEL_PACK_BUFFER, 0, (GLsizeiptr)bytes, GL_MAP_READ_BIT);
    glt_status st = GLT_OK;
    if (!src) {
        st = glt_fail(GLT_GL_ERROR, "mapping the depth readback of %s %u failed (%s)",
                      s->target == GL_RENDERBUFFER ? "renderbuffer" : "texture", s->name,
                      glt_gl_error_name(gl->GetError()));
    } else {
        for (int y = 0; y < s->height; ++y) {
            const float *row = src + (size_t)(flip ? s->height - 1 - y : y) * s->width;
            float *out = (float *)((char *)dst + (size_t)y * pitch);
            for (int x = 0; x < s->width; ++x) out[x] = glt_depth_value(row[x], mode, near_plane, far_plane);
        }
        gl->UnmapBuffer(GL_PIXEL_PACK_BUFFER);
    }
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, (GLuint)prev_pbo);
    return st;
}
