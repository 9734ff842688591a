/*
 * A shared-slot write by compute shader: the image is blitted into a texture of ours in the slot's format, and a
 * compute shader packs that texture's texels into a buffer object, rows top first (as slots hold them, so that
 * the trainer can hand a set out as it is) and bytes exactly as glReadPixels(slot format) would give them. The buffer is the trainer's imported memory (CUDA slots) or a
 * buffer of the writer's own (the CPU backend's variant, which CI uses to check the packing on every format).
 *
 * Why a shader: glReadPixels into a pixel-pack buffer and glCopyBufferSubData run on the GPU's copy engines,
 * which every worker process shares and whose context switches between processes are paid per copy; with slot
 * writes done that way the step grew by ~180 us per MB of slots with 4 or more workers on an H100 (driver 580),
 * against ~1 us per MB of device bandwidth. The shader runs on the graphics engine, in the worker's own GL
 * work, right behind its render.
 *
 * Why the blit first: a texture of ours is complete, unswizzled, at base level 0 and single-sampled whatever
 * the caller's image is (renderbuffer, rectangle or multisampled texture, a region of a larger image), so the
 * shader has one input; the blit also does the conversion when the source's format differs from the slot's,
 * as glReadPixels would. sRGB slots are sampled through a view of the linear format of the same size: texelFetch
 * would decode sRGB, glReadPixels does not.
 *
 * Each invocation writes one 32-bit word: 1, 2 or 4 whole components (slot rows start 256-byte aligned, and
 * every slot format has components of 1, 2 or 4 bytes), so neighbouring pixels never share a partial write.
 */
#include "slots/slots_shared.h"
#include "convert/convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct glt_slot_packer {
    const glt_format *fmt;
    int width, height;
    GLuint texture, view, draw_fbo, program, sampler;
    GLint loc_base, loc_row_words, loc_used_words;
    GLint ssbo_align;
    GLint loc_origin;
    int direct_allowed; /* GLTENSOR_SLOTS_PACK_INPUT is not "blit", and the driver has glGetTextureParameteriv */
    void (*get_texture_parameteriv)(GLuint, GLenum, GLint *);
};

static const char shader_fmt[] =
    "#version 430\n"
    "#define CB %d\n" /* bytes per component: 1, 2 or 4 */
    "#define CH %d\n" /* components per pixel: 1, 2 or 4 */
    "#define ENC %d\n" /* 0 unsigned-normalised, 1 float, 2 unsigned integer */
    "layout(local_size_x = 64, local_size_y = 4) in;\n"
    "layout(binding = 0) uniform %s img;\n"
    "layout(std430, binding = 0) writeonly buffer Slot { uint words[]; };\n"
    "uniform ivec2 size;\n"    /* pixels */
    "uniform int row_words;\n" /* words between the starts of two rows */
    "uniform int used_words;\n" /* words of a row that hold pixels */
    "uniform int base;\n"      /* the slot's first word in the bound range */
    "uniform ivec2 origin;\n"  /* the region's lower-left texel in img */
    "uint enc(%s t, int c) {\n"
    "#if ENC == 2\n"
    "    uint v = t[c];\n"
    "    return CB == 4 ? v : min(v, CB == 1 ? 255u : 65535u);\n"
    "#elif ENC == 1\n"
    "    return CB == 4 ? floatBitsToUint(t[c]) : (packHalf2x16(vec2(t[c], 0.0)) & 0xffffu);\n"
    "#else\n"
    "    return uint(round(clamp(t[c], 0.0, 1.0) * (CB == 1 ? 255.0 : 65535.0)));\n"
    "#endif\n"
    "}\n"
    "void main() {\n"
    "    int wx = int(gl_GlobalInvocationID.x), y = int(gl_GlobalInvocationID.y);\n"
    "    if (wx >= used_words || y >= size.y) return;\n"
    "    uint word = 0u;\n"
    "    int g0 = wx * (4 / CB);\n"
    "    for (int j = 0; j < 4 / CB; ++j) {\n"
    "        int g = g0 + j, px = g / CH, c = g - px * CH;\n"
    "        if (px < size.x) word |= enc(texelFetch(img, origin + ivec2(px, y), 0), c) << (8 * CB * j);\n"
    "    }\n"
    "    words[base + (size.y - 1 - y) * row_words + wx] = word;\n" /* rows top first */
    "}\n";

static GLenum sized(GLenum internal_format) {
    return internal_format == 0x1908 ? 0x8058 : internal_format; /* GL_RGBA -> GL_RGBA8 */
}

static int is_srgb(const glt_format *fmt) { return fmt->internal_format == 0x8C43; }

int glt_slot_packer_possible(const glt_gl *gl, const glt_format *fmt) {
    if (!gl->has_compute || !gl->ProgramUniform1i || !gl->TexStorage2D || (is_srgb(fmt) && !gl->TextureView))
        return 0;
    GLint major = 0, minor = 0;
    gl->GetIntegerv(GL_MAJOR_VERSION, &major);
    gl->GetIntegerv(GL_MINOR_VERSION, &minor);
    return major > 4 || (major == 4 && minor >= 3);
}

static glt_status build_program(const glt_gl *gl, glt_slot_packer *p) {
    int uint_kind = glt_format_kind(p->fmt) == GLT_KIND_UINT;
    int enc = uint_kind ? 2 : (p->fmt->dtype == GLT_DTYPE_FLOAT16 || p->fmt->dtype == GLT_DTYPE_FLOAT32) ? 1 : 0;
    char source[2048];
    snprintf(source, sizeof source, shader_fmt, (int)glt_dtype_size(p->fmt->dtype), p->fmt->channels, enc,
             uint_kind ? "usampler2D" : "sampler2D", uint_kind ? "uvec4" : "vec4");
    char what[96];
    snprintf(what, sizeof what, "the shared-slot pack shader for %s", p->fmt->name);
    glt_status st = glt_gl_compute_program(gl, source, what, "set GLTENSOR_SLOTS_WRITE=copy to write without it",
                                           &p->program);
    if (st != GLT_OK) return st;
    p->loc_base = gl->GetUniformLocation(p->program, "base");
    p->loc_row_words = gl->GetUniformLocation(p->program, "row_words");
    p->loc_used_words = gl->GetUniformLocation(p->program, "used_words");
    p->loc_origin = gl->GetUniformLocation(p->program, "origin");
    gl->ProgramUniform2i(p->program, gl->GetUniformLocation(p->program, "size"), p->width, p->height);
    gl->GenSamplers(1, &p->sampler);
    /* texelFetch ignores filtering, but completeness does not: the sampler's filter makes one level enough. */
    gl->SamplerParameteri(p->sampler, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    gl->SamplerParameteri(p->sampler, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    return GLT_OK;
}

glt_status glt_slot_packer_create(const glt_format *fmt, int width, int height, glt_slot_packer **out) {
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    if (!glt_slot_packer_possible(gl, fmt))
        return glt_fail(GLT_UNSUPPORTED, "this GL context cannot write shared slots of %s by compute shader (it "
                                         "needs GL 4.3%s); set GLTENSOR_SLOTS_WRITE=copy",
                        fmt->name, is_srgb(fmt) ? " and glTextureView" : "");
    glt_slot_packer *p = calloc(1, sizeof *p);
    if (!p) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    p->fmt = fmt;
    p->width = width;
    p->height = height;
    p->get_texture_parameteriv = (void (*)(GLuint, GLenum, GLint *))glt_gl_proc("glGetTextureParameteriv");
    p->direct_allowed = glt_env_choice(GLT_ENV_SLOTS_PACK_INPUT) == 0 && p->get_texture_parameteriv && !is_srgb(fmt);
    glt_gl_drain_errors(gl);
    GLint prev_tex = 0, prev_draw = 0;
    gl->GetIntegerv(GL_TEXTURE_BINDING_2D, &prev_tex);
    gl->GetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &prev_draw);
    gl->GenTextures(1, &p->texture);
    gl->BindTexture(GL_TEXTURE_2D, p->texture);
    gl->TexStorage2D(GL_TEXTURE_2D, 1, sized(fmt->internal_format), width, height);
    gl->BindTexture(GL_TEXTURE_2D, (GLuint)prev_tex);
    if (is_srgb(fmt)) {
        gl->GenTextures(1, &p->view); /* a view needs a name never bound */
        gl->TextureView(p->view, GL_TEXTURE_2D, p->texture, 0x8058 /* GL_RGBA8: the stored bytes */, 0, 1, 0, 1);
    }
    gl->GenFramebuffers(1, &p->draw_fbo);
    gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, p->draw_fbo);
    gl->FramebufferTexture2D(GL_DRAW_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, p->texture, 0);
    gl->DrawBuffer(GL_COLOR_ATTACHMENT0);
    glt_status st = gl->CheckFramebufferStatus(GL_DRAW_FRAMEBUFFER) == GL_FRAMEBUFFER_COMPLETE
                        ? GLT_OK
                        : glt_fail(GLT_GL_ERROR, "a %dx%d %s texture cannot be drawn into; set "
                                                 "GLTENSOR_SLOTS_WRITE=copy",
                                   width, height, fmt->name);
    gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, (GLuint)prev_draw);
    if (st == GLT_OK) st = build_program(gl, p);
    gl->GetIntegerv(GL_SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT, &p->ssbo_align);
    if (p->ssbo_align < 4) p->ssbo_align = 4;
    GLenum err = gl->GetError();
    if (st == GLT_OK && err != GL_NO_ERROR)
        st = glt_fail(GLT_GL_ERROR, "preparing the shared-slot pack shader for %s failed with %s; set "
                                    "GLTENSOR_SLOTS_WRITE=copy",
                      fmt->name, glt_gl_error_name(err));
    if (st != GLT_OK) {
        glt_slot_packer_destroy(p);
        return st;
    }
    *out = p;
    return GLT_OK;
}

void glt_slot_packer_destroy(glt_slot_packer *p) {
    if (!p) return;
    const glt_gl *gl = glt_gl_load();
    if (gl) {
        if (p->draw_fbo) gl->DeleteFramebuffers(1, &p->draw_fbo);
        if (p->view) gl->DeleteTextures(1, &p->view);
        if (p->texture) gl->DeleteTextures(1, &p->texture);
        if (p->program) gl->DeleteProgram(p->program);
        if (p->sampler) gl->DeleteSamplers(1, &p->sampler);
    }
    free(p);
}

int glt_slot_packer_reads_directly(const glt_slot_packer *p, GLuint name, GLenum target, int samples,
                                   const glt_format *src) {
    if (!p->direct_allowed || target != GL_TEXTURE_2D || samples > 1 || src != p->fmt) return 0;
    /* texelFetch sees the texture's swizzle and base level; glReadPixels sees neither. */
    GLint base = -1, swizzle[4] = {0, 0, 0, 0};
    p->get_texture_parameteriv(name, GL_TEXTURE_BASE_LEVEL, &base);
    p->get_texture_parameteriv(name, GL_TEXTURE_SWIZZLE_RGBA, swizzle);
    return base == 0 && swizzle[0] == GL_RED && swizzle[1] == GL_GREEN && swizzle[2] == GL_BLUE &&
           swizzle[3] == GL_ALPHA;
}

void glt_slot_packer_run(glt_slot_packer *p, GLuint source, int x, int y, GLuint buffer, uint64_t offset,
                         uint64_t pitch, int barrier) {
    const glt_gl *gl = glt_gl_load();
    if (!source) {
        /* The region of the bound read framebuffer into our texture (the caller saved the framebuffer bindings
         * and switched scissor and sRGB conversion off). */
        gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, p->draw_fbo);
        gl->BlitFramebuffer(x, y, x + p->width, y + p->height, 0, 0, p->width, p->height, GL_COLOR_BUFFER_BIT,
                            GL_NEAREST);
        x = y = 0;
    }
    uint64_t first = offset / (uint64_t)p->ssbo_align * (uint64_t)p->ssbo_align;
    uint64_t bytes = offset - first + pitch * (uint64_t)p->height;
    size_t bpp = glt_dtype_size(p->fmt->dtype) * (size_t)p->fmt->channels;
    int used_words = (int)(((size_t)p->width * bpp + 3) / 4);
    gl->ProgramUniform1i(p->program, p->loc_base, (GLint)((offset - first) / 4));
    gl->ProgramUniform1i(p->program, p->loc_row_words, (GLint)(pitch / 4));
    gl->ProgramUniform1i(p->program, p->loc_used_words, used_words);
    gl->ProgramUniform2i(p->program, p->loc_origin, x, y);
    glt_compute_state saved;
    glt_compute_push(gl, &saved);
    gl->UseProgram(p->program);
    gl->BindTexture(GL_TEXTURE_2D, source ? source : p->view ? p->view : p->texture);
    gl->BindSampler(0, p->sampler);
    gl->BindBufferRange(GL_SHADER_STORAGE_BUFFER, 0, buffer, (GLintptr)first, (GLsizeiptr)bytes);
    gl->DispatchCompute((GLuint)(used_words + 63) / 64, (GLuint)(p->height + 3) / 4, 1);
    /* GL's own later reads of the buffer (the CPU variant's glGetBufferSubData) need the barrier; the trainer's
     * CUDA reads need only the fence that ends every write, after which the writes are in device memory. */
    if (barrier) gl->MemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
    glt_compute_pop(gl, &saved);
}
