/*
 * The CPU backend: read the image back through a pixel-pack buffer into host
 * memory. Used when CUDA is missing or the GL context does not run on a CUDA
 * device (Mesa, another vendor). Textures are read with glGetTexImage; a
 * renderbuffer is attached to a framebuffer of our own and read with
 * glReadPixels. A region (a rectangle smaller than the image) is read alone:
 * glReadPixels of that rectangle for renderbuffers, glGetTextureSubImage for
 * textures (GL 4.5), or glReadPixels through our framebuffer in older contexts.
 * Every binding and pack parameter touched is restored.
 */
#include "cpu/cpu.h"

#include <stdlib.h>
#include <string.h>

struct glt_cpu_reader {
    GLuint name;
    GLenum target;
    GLuint pbo;
    size_t pbo_size;
    GLuint fbo; /* renderbuffers, and texture regions without glGetTextureSubImage */
    int sub_image; /* 1: glGetTextureSubImage can read texture regions in this context */
};

glt_status glt_cpu_reader_create(GLuint name, GLenum target, glt_cpu_reader **out) {
    glt_cpu_reader *r = calloc(1, sizeof *r);
    if (!r) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    r->name = name;
    r->target = target;
    const glt_gl *gl = glt_gl_load();
    /* GLTENSOR_TEXTURE_REGION_READ=framebuffer takes the pre-4.5 route everywhere (tests run it on GL 4.5). */
    int framebuffer = glt_env_choice(GLT_ENV_TEXTURE_REGION_READ) == 1;
    if (gl && gl->GetTextureSubImage && target != GL_RENDERBUFFER && !framebuffer) {
        /* The entry point resolves whatever the context's version: use it only where GL 4.5 promises it. */
        GLint major = 0, minor = 0;
        gl->GetIntegerv(GL_MAJOR_VERSION, &major);
        gl->GetIntegerv(GL_MINOR_VERSION, &minor);
        r->sub_image = major > 4 || (major == 4 && minor >= 5);
    }
    *out = r;
    return GLT_OK;
}

void glt_cpu_reader_destroy(glt_cpu_reader *r) {
    if (!r) return;
    const glt_gl *gl = glt_gl_load();
    if (gl) {
        if (r->pbo) gl->DeleteBuffers(1, &r->pbo);
        if (r->fbo) gl->DeleteFramebuffers(1, &r->fbo);
    }
    free(r);
}

/* Issues the readback of `rect` (whole: it is the whole image) into the bound pixel-pack buffer of `bytes`. */
static glt_status issue_readback(const glt_gl *gl, glt_cpu_reader *r, const glt_format *fmt, const glt_rect *rect,
                                 int whole, size_t bytes) {
    if (r->target != GL_RENDERBUFFER && !whole && r->sub_image) {
        gl->GetTextureSubImage(r->name, 0, rect->x, rect->y, 0, rect->width, rect->height, 1, fmt->read_format,
                               fmt->read_type, (GLsizei)bytes, NULL);
        return GLT_OK;
    }
    if (r->target != GL_RENDERBUFFER && whole) {
        GLint prev = 0;
        gl->GetIntegerv(r->target == GL_TEXTURE_RECTANGLE ? GL_TEXTURE_BINDING_RECTANGLE : GL_TEXTURE_BINDING_2D, &prev);
        gl->BindTexture(r->target, r->name);
        gl->GetTexImage(r->target, 0, fmt->read_format, fmt->read_type, NULL);
        gl->BindTexture(r->target, (GLuint)prev);
        return GLT_OK;
    }
    GLint prev_fbo = 0;
    gl->GetIntegerv(GL_READ_FRAMEBUFFER_BINDING, &prev_fbo);
    if (!r->fbo) {
        gl->GenFramebuffers(1, &r->fbo);
        gl->BindFramebuffer(GL_READ_FRAMEBUFFER, r->fbo);
        if (r->target == GL_RENDERBUFFER)
            gl->FramebufferRenderbuffer(GL_READ_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, r->name);
        else /* a texture region in a context older than 4.5 */
            gl->FramebufferTexture2D(GL_READ_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, r->target, r->name, 0);
        gl->ReadBuffer(GL_COLOR_ATTACHMENT0); /* framebuffer state: set once */
    } else {
        gl->BindFramebuffer(GL_READ_FRAMEBUFFER, r->fbo);
    }
    glt_status st = GLT_OK;
    GLenum status = gl->CheckFramebufferStatus(GL_READ_FRAMEBUFFER);
    if (status != GL_FRAMEBUFFER_COMPLETE)
        st = glt_fail(GLT_GL_ERROR,
                      "%s %u (%s) cannot be read: its framebuffer is incomplete (status 0x%04X)",
                      r->target == GL_RENDERBUFFER ? "renderbuffer" : "texture", r->name, fmt->name, status);
    else
        gl->ReadPixels(rect->x, rect->y, rect->width, rect->height, fmt->read_format, fmt->read_type, NULL);
    gl->BindFramebuffer(GL_READ_FRAMEBUFFER, (GLuint)prev_fbo);
    return st;
}

glt_status glt_cpu_reader_read(glt_cpu_reader *r, const glt_format *fmt, int image_width, int image_height,
                               const glt_rect *rect, void *dst, size_t dst_pitch, int flip) {
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    int width = rect->width, height = rect->height;
    int whole = rect->x == 0 && rect->y == 0 && width == image_width && height == image_height;
    size_t row_bytes = (size_t)width * fmt->channels * glt_dtype_size(fmt->dtype);
    size_t total = row_bytes * (size_t)height;
    const char *kind = r->target == GL_RENDERBUFFER ? "renderbuffer" : "texture";
    glt_gl_drain_errors(gl);
    glt_pack_state saved;
    glt_pack_push(gl, &saved);
    if (!r->pbo) gl->GenBuffers(1, &r->pbo);
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, r->pbo);
    if (r->pbo_size != total) {
        gl->BufferData(GL_PIXEL_PACK_BUFFER, (GLsizeiptr)total, NULL, GL_STREAM_READ);
        r->pbo_size = total;
    }
    glt_status st = issue_readback(gl, r, fmt, rect, whole, total);
    GLenum err = gl->GetError();
    if (st == GLT_OK && err != GL_NO_ERROR) {
        r->pbo_size = 0; /* the buffer may not have been (re)allocated */
        st = glt_fail(GLT_GL_ERROR,
                      "reading back %s %u (%s, %dx%d at %d, %d) failed with %s; check that the image has storage "
                      "and is not bound for rendering in a way that forbids reading",
                      kind, r->name, fmt->name, width, height, rect->x, rect->y, glt_gl_error_name(err));
    }
    if (st == GLT_OK) {
        /* Mapping waits for the readback; then rows go out in the requested order. */
        const unsigned char *src = gl->MapBufferRange(GL_PIXEL_PACK_BUFFER, 0, (GLsizeiptr)total, GL_MAP_READ_BIT);
        if (!src) {
            st = glt_fail(GLT_GL_ERROR, "glMapBufferRange of the %zu-byte pixel-pack buffer for %s %u failed (%s)",
                          total, kind, r->name, glt_gl_error_name(gl->GetError()));
        } else {
            unsigned char *out = dst;
            if (!flip && dst_pitch == row_bytes) {
                memcpy(out, src, total);
            } else {
                for (int y = 0; y < height; ++y) {
                    int src_y = flip ? height - 1 - y : y;
                    memcpy(out + (size_t)y * dst_pitch, src + (size_t)src_y * row_bytes, row_bytes);
                }
            }
            gl->UnmapBuffer(GL_PIXEL_PACK_BUFFER);
        }
    }
    glt_pack_pop(gl, &saved);
    return st;
}
