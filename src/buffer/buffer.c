/*
 * GL buffer objects as linear memory: a vertex, index, storage or pixel buffer registered once and
 * mapped for a while, so that tensor libraries read and write it in place, or copied into a frame.
 *   CUDA backend: cudaGraphicsGLRegisterBuffer once; each map sets the map flags for the mode
 *                 (read-only, write-discard or none) and maps on the caller's stream; the unmap is
 *                 issued on that stream after work queued by the consumers that synchronised with it.
 *   CPU backend:  glMapBufferRange (read; write with the range invalidated; read-write) gives host
 *                 memory; glGetBufferSubData copies for reads. Immutable storage (glBufferStorage)
 *                 without the map bits the mode needs cannot be mapped by GL, though CUDA maps it:
 *                 there the view is a host copy (glGetBufferSubData in, a GL-side copy back at unmap),
 *                 so the same code runs on both backends.
 * One mapping at a time per buffer. Each map re-reads the buffer's size, so a buffer reallocated with
 * glBufferData since the last map is registered again, and a range beyond its end is refused.
 */
#include "objects/objects.h"
#include "frames/frames.h"
#include "cuda/cuda_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct glt_buffer {
    glt_object_base base; /* first: context, name, backend and device */
    size_t size;
    glt_cuda_mapbuf *cuda;
    glt_pool *pool; /* frames of glt_buffer_read */
    int mapped;
    glt_buffer_mapping mapping; /* its read_only says whether the staging copy goes back to GL */
    size_t offset;
    void *staging; /* CPU backend: the host copy lent out when GL may not map the buffer itself */
};

void glt_buffer_desc_init(glt_buffer_desc *d) {
    memset(d, 0, sizeof *d);
    d->size = sizeof *d;
    d->backend = GLT_BACKEND_AUTO;
    d->cuda_device = -1;
}

/* The mapping went with its destroyed context: the driver unmapped the buffer and dropped the registration,
 * so only our side is left to release. What was written into the view is lost. */
static void mapping_lost(glt_buffer *b) {
    glt_cuda_mapbuf_forget(b->cuda);
    b->cuda = NULL;
    b->size = 0;
    free(b->staging);
    b->staging = NULL;
    b->mapped = 0;
}

static glt_status mapping_lost_error(const glt_buffer *b) {
    return glt_fail(GLT_CLOSED,
                    "buffer %u was mapped when its OpenGL context was destroyed: the mapping went with the context, "
                    "the view is invalid and what was written into it is lost; leave map_buffer blocks (unmap) "
                    "before closing or destroying the context",
                    b->base.name);
}

glt_status glt_buffer_check_mapping(glt_buffer *b) {
    if (!b) return glt_fail(GLT_CLOSED, "the buffer was closed (NULL handle)");
    if (!b->mapped) return glt_fail(GLT_INVALID_ARGUMENT, "buffer %u is not mapped", b->base.name);
    if (glt_gl_context_alive(b->base.gl_context)) return GLT_OK;
    mapping_lost(b);
    return mapping_lost_error(b);
}

glt_status glt_buffer_create(const glt_buffer_desc *desc, glt_buffer **out) {
    if (!desc || !out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_buffer_create: desc and out must not be NULL");
    *out = NULL;
    GLT_CHECK_STRUCT_SIZE(desc, glt_buffer_desc);
    glt_object_base base;
    glt_object_state now;
    glt_status st = glt_object_open(&base, GLT_OBJECT_BUFFER, desc->gl_name, 0, &now);
    if (st != GLT_OK) return st;
    glt_buffer *b = calloc(1, sizeof *b);
    if (!b) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    b->base = base;
    b->size = now.size;
    st = glt_object_choose_backend(&b->base, desc->backend, desc->cuda_device);
    if (st == GLT_OK) {
        b->pool = glt_pool_create(b->base.backend == GLT_BACKEND_CUDA ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST,
                                  b->base.cuda_device);
        if (!b->pool) st = GLT_CUDA_ERROR;
    }
    if (st == GLT_OK && b->base.backend == GLT_BACKEND_CUDA) {
        if (b->size == 0)
            st = glt_fail(GLT_INVALID_OBJECT,
                          "buffer %u has no storage yet; allocate it (glBufferData or glBufferStorage) before "
                          "registering it",
                          b->base.name);
        else
            st = glt_cuda_mapbuf_register(b->base.name, b->base.cuda_device, &b->cuda);
    }
    if (st != GLT_OK) {
        glt_buffer_destroy(b);
        return st;
    }
    glt_clear_error();
    *out = b;
    return GLT_OK;
}

void glt_buffer_destroy(glt_buffer *b) {
    if (!b) return;
    /* Unmapping and unregistering happen in the buffer's own context; where that cannot be entered the
     * registration is left to the driver (dropped with the context) instead of calls that fail. */
    glt_gl_context_saved saved;
    int in_context = glt_gl_context_enter(b->base.gl_context, &saved);
    if (in_context && b->mapped) glt_buffer_unmap(b);
    if (b->mapped) mapping_lost(b); /* its context cannot be entered: the driver ends the mapping with it */
    if (in_context) glt_cuda_mapbuf_unregister(b->cuda);
    else glt_cuda_mapbuf_forget(b->cuda);
    glt_gl_context_leave(&saved);
    glt_pool_release(b->pool);
    free(b->staging); /* left by a mapping its context could not take back */
    free(b);
}

glt_status glt_buffer_get_info(const glt_buffer *b, glt_buffer_info *info) {
    if (!b || !info) return glt_fail(GLT_INVALID_ARGUMENT, "glt_buffer_get_info: NULL argument");
    info->size = sizeof *info, info->bytes = b->size;
    info->backend = b->base.backend;
    info->backend_reason = b->base.backend_reason;
    info->cuda_device = b->base.cuda_device;
    info->mapped = b->mapped && glt_gl_context_alive(b->base.gl_context);
    return GLT_OK;
}

/* Checks the context and re-reads the size; a reallocated buffer is registered again. Refuses a buffer GL has
 * mapped itself. */
static glt_status refresh(glt_buffer *b) {
    glt_object_state now;
    glt_status st = glt_object_query(&b->base, &now);
    if (st != GLT_OK) return st;
    size_t size = now.size;
    if (now.gl_mapped)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "buffer %u is mapped by GL (glMapBuffer/glMapBufferRange) elsewhere; unmap it there first",
                        b->base.name);
    if (size != b->size && b->base.backend == GLT_BACKEND_CUDA) {
        glt_cuda_mapbuf_unregister(b->cuda);
        b->cuda = NULL;
        if (size == 0)
            return glt_fail(GLT_INVALID_OBJECT, "buffer %u has no storage any more (glBufferData with size 0)",
                            b->base.name);
        st = glt_cuda_mapbuf_register(b->base.name, b->base.cuda_device, &b->cuda);
        if (st != GLT_OK) return st;
    }
    b->size = size;
    return GLT_OK;
}

glt_status glt_buffer_query_size(glt_buffer *b, size_t *size) {
    if (!b) return glt_fail(GLT_CLOSED, "the buffer was closed (NULL handle)");
    if (b->mapped && glt_buffer_check_mapping(b) == GLT_OK) {
        if (size) *size = b->size; /* GL reports a buffer it lent out as mapped: keep what was mapped */
        return GLT_OK;
    }
    glt_status st = refresh(b);
    if (st == GLT_OK && size) *size = b->size;
    return st;
}

/* [offset, offset + *bytes) inside the buffer; *bytes 0 means to the end. */
static glt_status check_range(const glt_buffer *b, size_t offset, size_t *bytes) {
    if (offset > b->size || (*bytes && *bytes > b->size - offset))
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "%zu bytes at offset %zu do not fit buffer %u, which holds %zu bytes; ask for a smaller "
                        "shape or dtype, or allocate a larger buffer (glBufferData)",
                        *bytes, offset, b->base.name, b->size);
    if (!*bytes) *bytes = b->size - offset;
    if (!*bytes)
        return glt_fail(GLT_INVALID_ARGUMENT, "the range at offset %zu of buffer %u (%zu bytes) is empty", offset,
                        b->base.name, b->size);
    return GLT_OK;
}

/* The CPU backend's host copy for a buffer GL may not map: read modes start from the buffer's content, write
 * mode from zeros (what write-discard leaves undefined, never stale heap memory). */
static glt_status map_staged(glt_buffer *b, const glt_gl *gl, glt_map_mode mode, size_t offset, size_t bytes,
                             void **data) {
    b->staging = calloc(1, bytes);
    if (!b->staging)
        return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory for a %zu-byte copy of buffer %u", bytes, b->base.name);
    glt_status st = mode == GLT_MAP_WRITE ? GLT_OK : glt_gl_buffer_get(gl, b->base.name, offset, bytes, b->staging);
    if (st != GLT_OK) {
        free(b->staging);
        b->staging = NULL;
        return st;
    }
    *data = b->staging;
    return GLT_OK;
}

glt_status glt_buffer_map(glt_buffer *b, glt_map_mode mode, size_t offset, size_t bytes, void *stream,
                          glt_buffer_mapping *out) {
    if (!b) return glt_fail(GLT_CLOSED, "the buffer was closed (NULL handle)");
    if (!out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_buffer_map: out is NULL");
    if (mode != GLT_MAP_READ && mode != GLT_MAP_WRITE && mode != GLT_MAP_READ_WRITE)
        return glt_fail(GLT_INVALID_ARGUMENT, "unknown map mode %d; use read, write or readwrite", (int)mode);
    if (b->mapped && glt_buffer_check_mapping(b) == GLT_CLOSED) return GLT_CLOSED;
    if (b->mapped)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "buffer %u is mapped already; leave the first map_buffer block (or unmap) before mapping it "
                        "again",
                        b->base.name);
    glt_status st = refresh(b);
    if (st == GLT_OK) st = check_range(b, offset, &bytes);
    if (st != GLT_OK) return st;
    glt_buffer_mapping m;
    memset(&m, 0, sizeof m);
    m.bytes = bytes;
    m.read_only = mode == GLT_MAP_READ;
    m.cuda_device = b->base.cuda_device;
    if (b->base.backend == GLT_BACKEND_CUDA) {
        if (stream && (st = glt_cuda_check_stream(stream, b->base.cuda_device)) != GLT_OK) return st;
        void *base = NULL;
        size_t size = 0;
        st = glt_cuda_mapbuf_map(b->cuda, (int)mode, stream, &base, &size);
        if (st != GLT_OK) return st;
        if (size < offset + bytes) {
            glt_cuda_mapbuf_unmap(b->cuda);
            return glt_fail(GLT_CUDA_ERROR, "CUDA mapped %zu bytes of buffer %u, which GL says holds %zu", size,
                            b->base.name, b->size);
        }
        m.data = (char *)base + offset;
        m.memory = GLT_MEMORY_CUDA;
        m.stream = stream;
    } else {
        if (stream)
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "a CUDA stream was given to buffer %u on the CPU backend (%s); drop stream=", b->base.name,
                            b->base.backend_reason);
        GLbitfield access = mode == GLT_MAP_READ    ? GL_MAP_READ_BIT
                            : mode == GLT_MAP_WRITE ? (GL_MAP_WRITE_BIT | GL_MAP_INVALIDATE_RANGE_BIT)
                                                    : (GL_MAP_READ_BIT | GL_MAP_WRITE_BIT);
        const glt_gl *gl = glt_gl_load();
        int mappable = 1;
        st = glt_gl_buffer_mappable(gl, b->base.name, access, &mappable);
        if (st == GLT_OK && mappable) st = glt_gl_buffer_map(gl, b->base.name, offset, bytes, access, &m.data);
        if (st == GLT_OK && !mappable) st = map_staged(b, gl, mode, offset, bytes, &m.data);
        if (st != GLT_OK) return st;
        m.memory = GLT_MEMORY_HOST;
    }
    b->mapped = 1;
    b->offset = offset;
    b->mapping = m;
    *out = m;
    return GLT_OK;
}

glt_status glt_buffer_sync_stream(glt_buffer *b, void *consumer) {
    if (!b) return glt_fail(GLT_CLOSED, "the buffer was closed (NULL handle)");
    if (!b->mapped)
        return glt_fail(GLT_INVALID_ARGUMENT, "buffer %u is not mapped; its memory is GL's again", b->base.name);
    glt_status live = glt_buffer_check_mapping(b);
    if (live != GLT_OK) return live;
    if (b->base.backend != GLT_BACKEND_CUDA || consumer == b->mapping.stream) return GLT_OK;
    return glt_cuda_mapbuf_consumer(b->cuda, consumer);
}

/* The mapping's states: mapped -> unmapped, and nothing else. A step that cannot undo the mapping (another
 * context current, none current, a CUDA unmap that failed) leaves it mapped, so that the caller can try again
 * where it can be done; only a mapping that no longer exists (context destroyed, buffer deleted) is dropped. */
glt_status glt_buffer_unmap(glt_buffer *b) {
    if (!b) return glt_fail(GLT_CLOSED, "the buffer was closed (NULL handle)");
    if (!b->mapped) return glt_fail(GLT_INVALID_ARGUMENT, "buffer %u is not mapped", b->base.name);
    char what[128];
    snprintf(what, sizeof what, "buffer %u (still mapped: unmap it again with its own context current)", b->base.name);
    glt_status st = glt_check_gl_context(b->base.gl_context, what);
    if (st == GLT_CLOSED) {
        mapping_lost(b);
        return mapping_lost_error(b);
    }
    if (st != GLT_OK) return st;
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    /* Deleting a buffer GL has mapped unmaps it in GL; under CUDA the registration keeps the storage
     * alive until it is unmapped and unregistered. Either way the memory the views pointed at is gone. */
    int alive = gl->IsBuffer(b->base.name);
    if (b->base.backend == GLT_BACKEND_CUDA) {
        st = glt_cuda_mapbuf_unmap(b->cuda);
        if (st != GLT_OK && alive) return st; /* still mapped in CUDA: stays mapped here too */
        if (!alive) {
            glt_cuda_mapbuf_unregister(b->cuda);
            b->cuda = NULL;
            b->size = 0;
        }
    } else if (b->staging) {
        if (alive && !b->mapping.read_only)
            st = glt_gl_buffer_put(gl, b->base.name, b->offset, b->mapping.bytes, b->staging);
        free(b->staging);
        b->staging = NULL;
    } else if (alive) {
        st = glt_gl_buffer_unmap(gl, b->base.name); /* GL ends the mapping even when it reports the contents lost */
    }
    b->mapped = 0;
    if (st == GLT_OK && !alive)
        st = glt_fail(GLT_INVALID_OBJECT,
                      "buffer %u was deleted while it was mapped; what was written into the view is lost, and the "
                      "view is invalid. Delete GL buffers only after leaving the map_buffer block",
                      b->base.name);
    return st;
}

glt_status glt_buffer_read(glt_buffer *b, size_t offset, size_t bytes, void *stream, glt_frame **out) {
    if (!b) return glt_fail(GLT_CLOSED, "the buffer was closed (NULL handle)");
    if (!out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_buffer_read: out is NULL");
    *out = NULL;
    if (b->mapped && glt_buffer_check_mapping(b) == GLT_OK)
        return glt_fail(GLT_INVALID_ARGUMENT, "buffer %u is mapped; read it after leaving the map_buffer block",
                        b->base.name);
    glt_status st = refresh(b);
    if (st == GLT_OK) st = check_range(b, offset, &bytes);
    if (st != GLT_OK) return st;
    int cuda = b->base.backend == GLT_BACKEND_CUDA;
    if (!cuda && stream)
        return glt_fail(GLT_INVALID_ARGUMENT, "a CUDA stream was given to buffer %u on the CPU backend; drop stream=",
                        b->base.name);
    if (cuda && stream && (st = glt_cuda_check_stream(stream, b->base.cuda_device)) != GLT_OK) return st;
    void *s = cuda ? (stream ? stream : glt_pool_stream(b->pool)) : NULL;
    glt_out_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.dtype = GLT_DTYPE_UINT8;
    spec.channels = 1;
    spec.order = GLT_LAYOUT_HWC;
    if (bytes > 0x7FFFFFFF)
        return glt_fail(GLT_INVALID_ARGUMENT, "reads of more than 2 GiB at once are not supported; read in parts");
    glt_frame *f = NULL;
    st = glt_frame_create(b->pool, s, cuda ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST, b->base.cuda_device, &spec, 0, 1,
                          (int)bytes, 0, &f);
    if (st != GLT_OK) return st;
    if (cuda)
        st = glt_cuda_mapbuf_copy(b->cuda, offset, bytes, glt_frame_data(f), s, glt_block_ready_event(f->block));
    else
        st = glt_gl_buffer_get(glt_gl_load(), b->base.name, offset, bytes, glt_frame_data(f));
    if (st != GLT_OK) {
        glt_frame_destroy(f);
        return st;
    }
    *out = f;
    return GLT_OK;
}
