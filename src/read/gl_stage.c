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
 *     The pixel-pack copy is the default because it equals glReadPixels by
 *     construction and needs no program or state of ours in the caller's
 *     context. Measured on an H200 at 1024^2 (python -m gltensor.bench convert), it
 *     costs 1.5x a colour read for DEPTH32F but 5.6x for DEPTH24, whose
 *     readback NVIDIA converts slowly; for 16/24-bit depth on the CUDA backend
 *     the compute-shader path below replaces it where a check on the driver
 *     (depth_probe.c) finds it bit-equal to glReadPixels.
 * Both cover only the capture's region when it has one: the resolve blits that
 * rectangle in place (same coordinates in the resolve renderbuffer) and the
 * depth pack holds its rows alone, so no pixel outside it is copied.
 * Every binding and enable touched is restored.
 */
#include "read/gl_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct glt_gl_stage {
    GLuint name;
    GLenum target;
    const glt_format *fmt;
    int width, height, samples;
    glt_rect region; /* the part read: resolved, converted and packed (rows of region.width floats) */
    GLuint src_fbo, dst_fbo, resolve_rb; /* multisampled sources */
    GLuint read_fbo;                     /* depth renderbuffers: reading needs a framebuffer */
    GLuint pbo;                          /* depth: the region's float window depth, bottom-up rows */
    /* Fixed-point depth (16/24-bit) through a compute shader (the long comment below). */
    GLuint program, sampler;
    GLuint sample_tex;  /* the depth texture the shader reads: the source, or copy_tex */
    GLuint copy_tex, copy_fbo; /* same-format copy for sources a shader cannot sample */
};

/* Fixed-point depth formats are slow to read back on NVIDIA: glReadPixels(GL_DEPTH_COMPONENT,
 * GL_FLOAT) of a 1024x1024 image took 1,715-2,008 us for DEPTH24 and ~4,200 us for DEPTH16 on an H200,
 * against 82 us for DEPTH32F (python -m gltensor.bench convert measures both paths). A compute shader that
 * texelFetches the depth into a shader storage buffer (the same buffer CUDA maps) read the same images
 * in 340 us (texture) / 430 us (renderbuffer, blitted to a texture first) there. Its first version,
 * returning the sampled float, differed from glReadPixels in the last bit for a few DEPTH16 values
 * (the sampler rounds v / max correctly; NVIDIA's glReadPixels computes float(v) * float(1 / max));
 * the shader below reproduces the latter, and tests/test_depth.py checks every 16- and 24-bit value.
 * Drivers may round differently (Mesa's glReadPixels is 1-2 ulp off the shader for 24-bit depth), so
 * the compute path is the default only for the CUDA backend (where the speed matters) and only once
 * glt_depth_compute_exact() has found it equal to glReadPixels on this driver (glt_depth_use_compute in
 * depth_probe.c decides, and the caller passes the verdict to glt_stage_create); otherwise, and for
 * float depth (fast already; 32-bit fixed point is not exactly recoverable from a sampled float), the
 * pixel-pack copy. GLTENSOR_DEPTH_PATH=readpixels or =compute overrides the choice (read when a
 * capture is created). */
int glt_stage_compute_possible(const glt_gl *gl, const glt_format *fmt) {
    if (!fmt->depth || !gl->has_compute) return 0;
    if (fmt->internal_format == 0x8CAC || fmt->internal_format == 0x8CAD || fmt->internal_format == 0x81A7) return 0;
    GLint major = 0, minor = 0;
    gl->GetIntegerv(GL_MAJOR_VERSION, &major);
    gl->GetIntegerv(GL_MINOR_VERSION, &minor);
    return major > 4 || (major == 4 && minor >= 3);
}

/* The shader recovers the stored integer v from the sampled depth (exact: the product is exact in
 * double and within half a step of v), then gives float(v) * float(1 / max), the arithmetic of
 * NVIDIA's glReadPixels(GL_DEPTH_COMPONENT, GL_FLOAT), which differs in the last bit from the sampled
 * value (a correctly rounded v / max) for some v. */
static const char depth_shader_fmt[] =
    "#version 430\n"
    "layout(local_size_x = 16, local_size_y = 16) in;\n"
    "layout(binding = 0) uniform sampler2D depth_tex;\n"
    "layout(std430, binding = 0) writeonly buffer Out { float depth[]; };\n"
    "uniform ivec2 size;\n"
    "uniform ivec2 origin;\n"
    "void main() {\n"
    "    ivec2 p = ivec2(gl_GlobalInvocationID.xy);\n"
    "    if (p.x >= size.x || p.y >= size.y) return;\n"
    "    double v = floor(double(texelFetch(depth_tex, origin + p, 0).r) * %.1flf + 0.5lf);\n"
    "    depth[p.y * size.x + p.x] = float(v) * %.9g;\n"
    "}\n";

static double depth_max(const glt_format *fmt) {
    return fmt->internal_format == 0x81A5 ? 65535.0 : 16777215.0; /* DEPTH_COMPONENT16, else 24-bit */
}

static glt_status build_program(const glt_gl *gl, glt_gl_stage *s) {
    char source[1024];
    double max = depth_max(s->fmt);
    snprintf(source, sizeof source, depth_shader_fmt, max, (double)(float)(1.0 / max));
    glt_status st = glt_gl_compute_program(gl, source, "the depth conversion shader",
                                           "set GLTENSOR_DEPTH_PATH=readpixels to read depth without it", &s->program);
    if (st != GLT_OK) return st;
    gl->ProgramUniform2i(s->program, gl->GetUniformLocation(s->program, "size"), s->region.width, s->region.height);
    gl->ProgramUniform2i(s->program, gl->GetUniformLocation(s->program, "origin"), s->region.x, s->region.y);
    gl->GenSamplers(1, &s->sampler);
    /* The sampler overrides the texture's own filtering and comparison, which would otherwise make
     * an unmipmapped texture incomplete or turn texelFetch into a depth comparison. */
    gl->SamplerParameteri(s->sampler, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    gl->SamplerParameteri(s->sampler, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    gl->SamplerParameteri(s->sampler, GL_TEXTURE_COMPARE_MODE, GL_NONE);
    return GLT_OK;
}

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
                            const glt_rect *region, int use_compute, glt_gl_stage **out) {
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    use_compute = use_compute && glt_stage_compute_possible(gl, fmt);
    glt_gl_stage *s = calloc(1, sizeof *s);
    if (!s) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    s->name = name;
    s->target = target;
    s->fmt = fmt;
    s->width = width;
    s->height = height;
    s->samples = samples;
    if (region) {
        s->region = *region;
    } else {
        s->region.x = s->region.y = 0;
        s->region.width = width;
        s->region.height = height;
    }
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
    } else if (fmt->depth && !use_compute) {
        /* glReadPixels from a framebuffer for textures too: NVIDIA's glGetTexImage converts 24-bit
         * depth to float with a different rounding (1 ulp apart), and glReadPixels is the reference. */
        gl->GenFramebuffers(1, &s->read_fbo);
        gl->BindFramebuffer(GL_READ_FRAMEBUFFER, s->read_fbo);
        attach(gl, GL_READ_FRAMEBUFFER, fmt, target, name);
    }
    if (st == GLT_OK && use_compute) {
        st = build_program(gl, s);
        if (st == GLT_OK && target == GL_TEXTURE_2D && !s->resolve_rb) {
            s->sample_tex = name;
        } else if (st == GLT_OK) {
            /* Renderbuffers, rectangle textures and resolved images: blit (same format) into a texture. */
            GLenum sized = fmt->internal_format == 0x1902 ? 0x81A6 /* DEPTH_COMPONENT -> 24 */
                           : fmt->internal_format == 0x84F9 ? 0x88F0 /* DEPTH_STENCIL -> D24S8 */
                                                            : fmt->internal_format;
            GLint prev_tex = 0;
            gl->GetIntegerv(GL_TEXTURE_BINDING_2D, &prev_tex);
            gl->GenTextures(1, &s->copy_tex);
            gl->BindTexture(GL_TEXTURE_2D, s->copy_tex);
            gl->TexStorage2D(GL_TEXTURE_2D, 1, sized, width, height);
            gl->BindTexture(GL_TEXTURE_2D, (GLuint)prev_tex);
            gl->GenFramebuffers(1, &s->copy_fbo);
            gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, s->copy_fbo);
            attach(gl, GL_DRAW_FRAMEBUFFER, fmt, GL_TEXTURE_2D, s->copy_tex);
            if (!s->resolve_rb && !s->read_fbo) { /* renderbuffer or rectangle texture: a framebuffer to blit from */
                gl->GenFramebuffers(1, &s->read_fbo);
                gl->BindFramebuffer(GL_READ_FRAMEBUFFER, s->read_fbo);
                attach(gl, GL_READ_FRAMEBUFFER, fmt, target, name);
            }
            s->sample_tex = s->copy_tex;
        }
    }
    if (st == GLT_OK && fmt->depth) {
        gl->GenBuffers(1, &s->pbo);
        gl->BindBuffer(GL_PIXEL_PACK_BUFFER, s->pbo);
        gl->BufferData(GL_PIXEL_PACK_BUFFER,
                       (GLsizeiptr)((size_t)s->region.width * s->region.height * sizeof(float)), NULL, GL_STREAM_READ);
    }
    gl->BindFramebuffer(GL_READ_FRAMEBUFFER, (GLuint)prev_read);
    gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, (GLuint)prev_draw);
    gl->BindRenderbuffer(GL_RENDERBUFFER, (GLuint)prev_rb);
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, (GLuint)prev_pbo);
    GLenum err = gl->GetError();
    if (st == GLT_OK && err != GL_NO_ERROR)
        st = glt_fail(GLT_GL_ERROR,
                      "preparing to read %s %u (%s) failed with %s; check that it has storage and that no GL error "
                      "was pending from your own calls (glGetError before capturing)",
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
        if (s->copy_fbo) gl->DeleteFramebuffers(1, &s->copy_fbo);
        if (s->copy_tex) gl->DeleteTextures(1, &s->copy_tex);
        if (s->program) gl->DeleteProgram(s->program);
        if (s->sampler) gl->DeleteSamplers(1, &s->sampler);
    }
    free(s);
}

GLuint glt_stage_resolved(const glt_gl_stage *s) { return s->resolve_rb; }
GLuint glt_stage_depth_buffer(const glt_gl_stage *s) { return s->pbo; }

/* Copies the region between the bound framebuffers, in place (same coordinates on both sides): the resolve
 * and the depth copy touch no pixel outside it. */
static void blit_region(const glt_gl *gl, const glt_gl_stage *s, GLbitfield mask) {
    const glt_rect *r = &s->region;
    gl->BlitFramebuffer(r->x, r->y, r->x + r->width, r->y + r->height, r->x, r->y, r->x + r->width, r->y + r->height,
                        mask, GL_NEAREST);
}

/* Depth -> floats in s->pbo through the compute shader; every binding it touches is restored. */
static void run_compute(const glt_gl *gl, glt_gl_stage *s) {
    if (s->copy_tex) {
        GLint prev_read = 0, prev_draw = 0;
        GLboolean scissor = gl->IsEnabled(GL_SCISSOR_TEST);
        gl->GetIntegerv(GL_READ_FRAMEBUFFER_BINDING, &prev_read);
        gl->GetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &prev_draw);
        if (scissor) gl->Disable(GL_SCISSOR_TEST);
        gl->BindFramebuffer(GL_READ_FRAMEBUFFER, s->resolve_rb ? s->dst_fbo : s->read_fbo);
        gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, s->copy_fbo);
        blit_region(gl, s, GL_DEPTH_BUFFER_BIT);
        gl->BindFramebuffer(GL_READ_FRAMEBUFFER, (GLuint)prev_read);
        gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, (GLuint)prev_draw);
        if (scissor) gl->Enable(GL_SCISSOR_TEST);
    }
    glt_compute_state saved;
    glt_compute_push(gl, &saved);
    gl->UseProgram(s->program);
    gl->BindTexture(GL_TEXTURE_2D, s->sample_tex);
    gl->BindSampler(0, s->sampler);
    gl->BindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, s->pbo);
    gl->DispatchCompute((GLuint)(s->region.width + 15) / 16, (GLuint)(s->region.height + 15) / 16, 1);
    /* Host mapping (CPU backend) and later GL reads see the writes; CUDA's map waits for the dispatch. */
    gl->MemoryBarrier(GL_ALL_BARRIER_BITS);

    glt_compute_pop(gl, &saved);
}

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
        blit_region(gl, s, s->fmt->depth ? GL_DEPTH_BUFFER_BIT : GL_COLOR_BUFFER_BIT);
        gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, (GLuint)prev_draw);
        if (scissor) gl->Enable(GL_SCISSOR_TEST);
        if (srgb) gl->Enable(GL_FRAMEBUFFER_SRGB);
    }
    if (s->program) {
        run_compute(gl, s);
    } else if (s->pbo) {
        glt_pack_state pack;
        glt_pack_push(gl, &pack);
        gl->BindBuffer(GL_PIXEL_PACK_BUFFER, s->pbo);
        gl->BindFramebuffer(GL_READ_FRAMEBUFFER, s->resolve_rb ? s->dst_fbo : s->read_fbo);
        gl->ReadPixels(s->region.x, s->region.y, s->region.width, s->region.height, GL_DEPTH_COMPONENT, GL_FLOAT,
                       NULL);
        glt_pack_pop(gl, &pack);
    }
    gl->BindFramebuffer(GL_READ_FRAMEBUFFER, (GLuint)prev_read);
    GLenum err = gl->GetError();
    if (err != GL_NO_ERROR)
        return glt_fail(GLT_GL_ERROR,
                        "%s %s %u (%s) failed with %s; if the image was reallocated or deleted since the capture was "
                        "made, make a new capture (or pass resizable=True)",
                        s->resolve_rb ? "resolving" : "reading depth of",
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
    int width = s->region.width, height = s->region.height;
    size_t bytes = (size_t)width * height * sizeof(float);
    const float *src = gl->MapBufferRange(GL_PIXEL_PACK_BUFFER, 0, (GLsizeiptr)bytes, GL_MAP_READ_BIT);
    glt_status st = GLT_OK;
    if (!src) {
        st = glt_fail(GLT_GL_ERROR, "mapping the depth readback of %s %u failed (%s); unmap any pixel-pack buffer "
                                    "you left mapped, then read again",
                      s->target == GL_RENDERBUFFER ? "renderbuffer" : "texture", s->name,
                      glt_gl_error_name(gl->GetError()));
    } else {
        for (int y = 0; y < height; ++y) {
            const float *row = src + (size_t)(flip ? height - 1 - y : y) * width;
            float *out = (float *)((char *)dst + (size_t)y * pitch);
            for (int x = 0; x < width; ++x) out[x] = glt_depth_value(row[x], mode, near_plane, far_plane);
        }
        gl->UnmapBuffer(GL_PIXEL_PACK_BUFFER);
    }
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, (GLuint)prev_pbo);
    return st;
}
