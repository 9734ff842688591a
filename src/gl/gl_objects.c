/*
 * GL object helpers shared by the objects that write textures (upload.c), use buffer objects (buffer.c,
 * slot_writer.c) or dispatch a compute shader of ours (gl_stage.c's depth shader, slot_pack.c): a compute
 * program built from one source, the compute bindings and the pixel-pack state saved and put back, texture
 * size/format queries and writes, and buffer-object calls. Each restores whatever binding it touches.
 */
#include "gl/gl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A compute program from one GLSL source (the depth shader in gl_stage.c, the slot pack in slot_pack.c). `what`
 * names it in errors, `hint` says what to do instead. *program is 0 on failure. */
glt_status glt_gl_compute_program(const glt_gl *gl, const char *source, const char *what, const char *hint,
                                  GLuint *program) {
    *program = 0;
    GLuint sh = gl->CreateShader(GL_COMPUTE_SHADER);
    gl->ShaderSource(sh, 1, &source, NULL);
    gl->CompileShader(sh);
    GLint ok = 0;
    gl->GetShaderiv(sh, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char log[512] = "";
        gl->GetShaderInfoLog(sh, sizeof log, NULL, log);
        gl->DeleteShader(sh);
        return glt_fail(GLT_GL_ERROR, "compiling %s failed: %s; %s", what, log, hint);
    }
    GLuint prog = gl->CreateProgram();
    gl->AttachShader(prog, sh);
    gl->LinkProgram(prog);
    gl->DeleteShader(sh);
    gl->GetProgramiv(prog, GL_LINK_STATUS, &ok);
    if (!ok) {
        gl->DeleteProgram(prog);
        return glt_fail(GLT_GL_ERROR, "linking %s failed; %s", what, hint);
    }
    *program = prog;
    return GLT_OK;
}

/* The caller's pixel-pack state around our readbacks (the CPU backend's, the depth stage's, a slot write's): saved
 * and reset to tight, unswapped rows, then put back. */
void glt_pack_push(const glt_gl *gl, glt_pack_state *s) {
    gl->GetIntegerv(GL_PIXEL_PACK_BUFFER_BINDING, &s->pbo);
    gl->GetIntegerv(GL_PACK_ALIGNMENT, &s->alignment);
    gl->GetIntegerv(GL_PACK_ROW_LENGTH, &s->row_length);
    gl->GetIntegerv(GL_PACK_SKIP_ROWS, &s->skip_rows);
    gl->GetIntegerv(GL_PACK_SKIP_PIXELS, &s->skip_pixels);
    gl->GetIntegerv(GL_PACK_SWAP_BYTES, &s->swap_bytes);
    gl->PixelStorei(GL_PACK_ALIGNMENT, 1); /* tight rows: odd widths of RGB8/R8 have no padding */
    gl->PixelStorei(GL_PACK_ROW_LENGTH, 0);
    gl->PixelStorei(GL_PACK_SKIP_ROWS, 0);
    gl->PixelStorei(GL_PACK_SKIP_PIXELS, 0);
    gl->PixelStorei(GL_PACK_SWAP_BYTES, 0);
}

void glt_pack_pop(const glt_gl *gl, const glt_pack_state *s) {
    gl->PixelStorei(GL_PACK_ALIGNMENT, s->alignment);
    gl->PixelStorei(GL_PACK_ROW_LENGTH, s->row_length);
    gl->PixelStorei(GL_PACK_SKIP_ROWS, s->skip_rows);
    gl->PixelStorei(GL_PACK_SKIP_PIXELS, s->skip_pixels);
    gl->PixelStorei(GL_PACK_SWAP_BYTES, s->swap_bytes);
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, (GLuint)s->pbo);
}

/* What a compute dispatch of ours changes in the caller's context: the program, texture unit 0's 2D texture and
 * sampler (unit 0 made active), and shader-storage binding 0. The depth shader and the slot pack share it. */
void glt_compute_push(const glt_gl *gl, glt_compute_state *s) {
    memset(s, 0, sizeof *s);
    gl->GetIntegerv(GL_CURRENT_PROGRAM, &s->program);
    gl->GetIntegerv(GL_ACTIVE_TEXTURE, &s->active);
    gl->ActiveTexture(GL_TEXTURE0);
    gl->GetIntegerv(GL_TEXTURE_BINDING_2D, &s->texture);
    gl->GetIntegerv(GL_SAMPLER_BINDING, &s->sampler);
    gl->GetIntegerv(GL_SHADER_STORAGE_BUFFER_BINDING, &s->ssbo);
    gl->GetIntegeri_v(GL_SHADER_STORAGE_BUFFER_BINDING, 0, &s->ssbo0);
    gl->GetInteger64i_v(GL_SHADER_STORAGE_BUFFER_START, 0, &s->ssbo0_start);
    gl->GetInteger64i_v(GL_SHADER_STORAGE_BUFFER_SIZE, 0, &s->ssbo0_size);
}

void glt_compute_pop(const glt_gl *gl, const glt_compute_state *s) {
    if (s->ssbo0_size > 0)
        gl->BindBufferRange(GL_SHADER_STORAGE_BUFFER, 0, (GLuint)s->ssbo0, (GLintptr)s->ssbo0_start,
                            (GLsizeiptr)s->ssbo0_size);
    else
        gl->BindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, (GLuint)s->ssbo0);
    gl->BindBuffer(GL_SHADER_STORAGE_BUFFER, (GLuint)s->ssbo);
    gl->BindSampler(0, (GLuint)s->sampler);
    gl->BindTexture(GL_TEXTURE_2D, (GLuint)s->texture);
    gl->ActiveTexture((GLenum)s->active);
    gl->UseProgram((GLuint)s->program);
}

/* ---- GL-side helpers of upload.c (texture writes) and buffer.c (buffer objects) ----
 * Each binds what it needs, does its call, and restores the caller's binding (and unpack state), so
 * that uploads and buffer maps leave the caller's GL state as it was. Buffers go through
 * GL_COPY_WRITE_BUFFER, a binding point that draw and read state do not depend on. */

static GLenum texture_binding_of(GLenum target) {
    return target == GL_TEXTURE_RECTANGLE ? GL_TEXTURE_BINDING_RECTANGLE : GL_TEXTURE_BINDING_2D;
}

glt_status glt_gl_texture_query(const glt_gl *gl, GLuint name, GLenum target, int *width, int *height,
                                GLenum *internal_format) {
    glt_gl_drain_errors(gl);
    if (name == 0 || !gl->IsTexture(name))
        return glt_fail(GLT_INVALID_OBJECT,
                        "texture %u does not exist in the current GL context (never created, deleted, or created "
                        "in a context that does not share objects with this one); pass a live texture name",
                        name);
    GLint prev = 0, w = 0, h = 0, f = 0;
    gl->GetIntegerv(texture_binding_of(target), &prev);
    gl->BindTexture(target, name);
    GLenum err = gl->GetError();
    if (err == GL_NO_ERROR) {
        gl->GetTexLevelParameteriv(target, 0, GL_TEXTURE_WIDTH, &w);
        gl->GetTexLevelParameteriv(target, 0, GL_TEXTURE_HEIGHT, &h);
        gl->GetTexLevelParameteriv(target, 0, GL_TEXTURE_INTERNAL_FORMAT, &f);
    }
    gl->BindTexture(target, (GLuint)prev);
    glt_gl_drain_errors(gl);
    if (err != GL_NO_ERROR)
        return glt_fail(GLT_INVALID_OBJECT,
                        "texture %u cannot be bound as %s (%s): it was created with another target; pass the target "
                        "it was created with (GL_TEXTURE_2D or GL_TEXTURE_RECTANGLE)",
                        name, glt_target_name(target), glt_gl_error_name(err));
    if (w <= 0 || h <= 0)
        return glt_fail(GLT_INVALID_OBJECT,
                        "texture %u has no storage yet; allocate it (glTexImage2D or glTexStorage2D) before writing "
                        "into it",
                        name);
    *width = w;
    *height = h;
    *internal_format = (GLenum)f;
    return GLT_OK;
}

glt_status glt_gl_texture_write(const glt_gl *gl, GLuint name, GLenum target, int x, int y, int width, int height,
                                GLenum format, GLenum type, const void *pixels) {
    if (!gl->TexSubImage2D)
        return glt_fail(GLT_GL_ERROR, "glTexSubImage2D is missing from this GL; the CPU backend cannot write textures");
    static const GLenum unpack[] = {GL_UNPACK_ALIGNMENT, GL_UNPACK_ROW_LENGTH, GL_UNPACK_SKIP_ROWS,
                                    GL_UNPACK_SKIP_PIXELS, GL_UNPACK_SWAP_BYTES, GL_UNPACK_IMAGE_HEIGHT,
                                    GL_UNPACK_SKIP_IMAGES};
    static const GLint tight[] = {1, 0, 0, 0, 0, 0, 0};
    GLint saved[7], prev_tex = 0, prev_pbo = 0;
    glt_gl_drain_errors(gl);
    for (int i = 0; i < 7; ++i) {
        gl->GetIntegerv(unpack[i], &saved[i]);
        gl->PixelStorei(unpack[i], tight[i]);
    }
    gl->GetIntegerv(GL_PIXEL_UNPACK_BUFFER_BINDING, &prev_pbo);
    gl->GetIntegerv(texture_binding_of(target), &prev_tex);
    gl->BindBuffer(GL_PIXEL_UNPACK_BUFFER, 0); /* pixels is host memory, not an offset into a bound buffer */
    gl->BindTexture(target, name);
    gl->TexSubImage2D(target, 0, x, y, width, height, format, type, pixels);
    GLenum err = gl->GetError();
    gl->BindTexture(target, (GLuint)prev_tex);
    gl->BindBuffer(GL_PIXEL_UNPACK_BUFFER, (GLuint)prev_pbo);
    for (int i = 0; i < 7; ++i) gl->PixelStorei(unpack[i], saved[i]);
    if (err != GL_NO_ERROR)
        return glt_fail(GLT_GL_ERROR, "glTexSubImage2D of a %dx%d region at (%d, %d) into texture %u failed with %s",
                        width, height, x, y, name, glt_gl_error_name(err));
    return GLT_OK;
}

/* Binds `name` to GL_COPY_WRITE_BUFFER (the caller's binding in *prev); GLT_INVALID_OBJECT when deleted. */
static glt_status buffer_bind(const glt_gl *gl, GLuint name, GLint *prev) {
    glt_gl_drain_errors(gl);
    if (name == 0 || !gl->IsBuffer(name))
        return glt_fail(GLT_INVALID_OBJECT,
                        "buffer %u does not exist in the current GL context (never created, deleted, or created in "
                        "a context that does not share objects with this one); pass a live buffer name",
                        name);
    gl->GetIntegerv(GL_COPY_WRITE_BUFFER_BINDING, prev);
    gl->BindBuffer(GL_COPY_WRITE_BUFFER, name);
    return GLT_OK;
}

static glt_status buffer_unbind(const glt_gl *gl, GLuint name, GLint prev, const char *call) {
    GLenum err = gl->GetError();
    gl->BindBuffer(GL_COPY_WRITE_BUFFER, (GLuint)prev);
    if (err != GL_NO_ERROR)
        return glt_fail(GLT_GL_ERROR, "%s on buffer %u failed with %s", call, name, glt_gl_error_name(err));
    return GLT_OK;
}

glt_status glt_gl_buffer_size(const glt_gl *gl, GLuint name, size_t *size, int *gl_mapped) {
    GLint prev = 0, mapped = 0;
    GLint64 bytes = 0;
    glt_status st = buffer_bind(gl, name, &prev);
    if (st != GLT_OK) return st;
    gl->GetBufferParameteri64v(GL_COPY_WRITE_BUFFER, GL_BUFFER_SIZE, &bytes);
    gl->GetBufferParameteriv(GL_COPY_WRITE_BUFFER, GL_BUFFER_MAPPED, &mapped);
    st = buffer_unbind(gl, name, prev, "glGetBufferParameteri64v(GL_BUFFER_SIZE)");
    *size = bytes > 0 ? (size_t)bytes : 0;
    if (gl_mapped) *gl_mapped = mapped != 0;
    return st;
}

glt_status glt_gl_buffer_create(const glt_gl *gl, size_t bytes, const void *data, GLuint *out) {
    GLint prev = 0;
    GLuint name = 0;
    *out = 0;
    glt_gl_drain_errors(gl);
    gl->GenBuffers(1, &name);
    gl->GetIntegerv(GL_COPY_WRITE_BUFFER_BINDING, &prev);
    gl->BindBuffer(GL_COPY_WRITE_BUFFER, name);
    gl->BufferData(GL_COPY_WRITE_BUFFER, (GLsizeiptr)bytes, data, GL_STATIC_DRAW);
    glt_status st = buffer_unbind(gl, name, prev, "glBufferData");
    if (st != GLT_OK) {
        gl->DeleteBuffers(1, &name);
        return st;
    }
    *out = name;
    return GLT_OK;
}

glt_status glt_gl_buffer_map(const glt_gl *gl, GLuint name, size_t offset, size_t bytes, GLbitfield access,
                             void **out) {
    GLint prev = 0;
    glt_status st = buffer_bind(gl, name, &prev);
    if (st != GLT_OK) return st;
    *out = gl->MapBufferRange(GL_COPY_WRITE_BUFFER, (GLintptr)offset, (GLsizeiptr)bytes, access);
    st = buffer_unbind(gl, name, prev, "glMapBufferRange");
    if (st == GLT_OK && !*out)
        st = glt_fail(GLT_GL_ERROR, "glMapBufferRange of %zu bytes at %zu of buffer %u returned NULL", bytes, offset,
                      name);
    return st;
}

glt_status glt_gl_buffer_unmap(const glt_gl *gl, GLuint name) {
    GLint prev = 0;
    glt_status st = buffer_bind(gl, name, &prev);
    if (st != GLT_OK) return st;
    GLboolean ok = gl->UnmapBuffer(GL_COPY_WRITE_BUFFER);
    st = buffer_unbind(gl, name, prev, "glUnmapBuffer");
    if (st == GLT_OK && !ok)
        st = glt_fail(GLT_GL_ERROR, "glUnmapBuffer of buffer %u reported its contents corrupted (the driver lost "
                                    "the mapping, e.g. after a mode switch); write them again",
                      name);
    return st;
}

glt_status glt_gl_buffer_get(const glt_gl *gl, GLuint name, size_t offset, size_t bytes, void *dst) {
    GLint prev = 0;
    glt_status st = buffer_bind(gl, name, &prev);
    if (st != GLT_OK) return st;
    gl->GetBufferSubData(GL_COPY_WRITE_BUFFER, (GLintptr)offset, (GLsizeiptr)bytes, dst);
    return buffer_unbind(gl, name, prev, "glGetBufferSubData");
}

glt_status glt_gl_buffer_mappable(const glt_gl *gl, GLuint name, GLbitfield access, int *mappable) {
    GLint prev = 0, immutable = 0, flags = 0;
    glt_status st = buffer_bind(gl, name, &prev);
    if (st != GLT_OK) return st;
    gl->GetBufferParameteriv(GL_COPY_WRITE_BUFFER, GL_BUFFER_IMMUTABLE_STORAGE, &immutable);
    if (immutable) gl->GetBufferParameteriv(GL_COPY_WRITE_BUFFER, GL_BUFFER_STORAGE_FLAGS, &flags);
    GLbitfield need = access & (GL_MAP_READ_BIT | GL_MAP_WRITE_BIT);
    *mappable = !immutable || ((GLbitfield)flags & need) == need;
    return buffer_unbind(gl, name, prev, "glGetBufferParameteriv(GL_BUFFER_STORAGE_FLAGS)");
}

/* Through a temporary buffer and glCopyBufferSubData: a GL-side copy may write immutable storage whatever
 * its flags, where glBufferSubData needs GL_DYNAMIC_STORAGE_BIT. Both of the caller's copy bindings are kept. */
glt_status glt_gl_buffer_put(const glt_gl *gl, GLuint name, size_t offset, size_t bytes, const void *src) {
    GLint prev_write = 0, prev_read = 0;
    glt_status st = buffer_bind(gl, name, &prev_write);
    if (st != GLT_OK) return st;
    GLuint tmp = 0;
    gl->GetIntegerv(GL_COPY_READ_BUFFER_BINDING, &prev_read);
    gl->GenBuffers(1, &tmp);
    gl->BindBuffer(GL_COPY_READ_BUFFER, tmp);
    gl->BufferData(GL_COPY_READ_BUFFER, (GLsizeiptr)bytes, src, GL_STREAM_COPY);
    gl->CopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, (GLintptr)offset, (GLsizeiptr)bytes);
    GLenum err = gl->GetError();
    gl->BindBuffer(GL_COPY_READ_BUFFER, (GLuint)prev_read);
    gl->DeleteBuffers(1, &tmp);
    st = buffer_unbind(gl, name, prev_write, "glCopyBufferSubData");
    if (st == GLT_OK && err != GL_NO_ERROR)
        st = glt_fail(GLT_GL_ERROR, "writing %zu bytes at %zu into buffer %u (glBufferData + glCopyBufferSubData) "
                                    "failed with %s; the mapped view's writes did not reach GL. On GL_OUT_OF_MEMORY "
                                    "free GL objects or map a smaller range, then map and write again",
                      bytes, offset, name, glt_gl_error_name(err));
    return st;
}
