/* Version, enum names and defaults: the small facts of the public API. */
#include "core/core.h"

#include <string.h>

unsigned glt_version_number(void) { return GLT_VERSION_NUMBER; }
const char *glt_version_string(void) { return GLT_VERSION_STRING; }

int glt_cuda_compiled(void) {
#ifdef GLT_WITH_CUDA
    return 1;
#else
    return 0;
#endif
}

const char *glt_dtype_name(glt_dtype dtype) {
    switch (dtype) {
    case GLT_DTYPE_UINT8: return "uint8";
    case GLT_DTYPE_UINT16: return "uint16";
    case GLT_DTYPE_UINT32: return "uint32";
    case GLT_DTYPE_FLOAT16: return "float16";
    case GLT_DTYPE_FLOAT32: return "float32";
    case GLT_DTYPE_BFLOAT16: return "bfloat16";
    }
    return "unknown";
}

size_t glt_dtype_size(glt_dtype dtype) {
    switch (dtype) {
    case GLT_DTYPE_UINT8: return 1;
    case GLT_DTYPE_UINT16: return 2;
    case GLT_DTYPE_FLOAT16: return 2;
    case GLT_DTYPE_UINT32: return 4;
    case GLT_DTYPE_FLOAT32: return 4;
    case GLT_DTYPE_BFLOAT16: return 2;
    }
    return 0;
}

const char *glt_backend_name(glt_backend backend) {
    switch (backend) {
    case GLT_BACKEND_AUTO: return "auto";
    case GLT_BACKEND_CUDA: return "cuda";
    case GLT_BACKEND_CPU: return "cpu";
    }
    return "unknown";
}

/* The defaults live in the GLT_*_INIT initialisers of gltensor.h; these functions hand them to callers that cannot
 * use a macro (the Python binding, other languages). */
void glt_context_desc_init(glt_context_desc *desc) {
    const glt_context_desc d = GLT_CONTEXT_DESC_INIT;
    *desc = d;
}

void glt_capture_desc_init(glt_capture_desc *desc) {
    const glt_capture_desc d = GLT_CAPTURE_DESC_INIT;
    *desc = d;
}

void glt_read_options_init(glt_read_options *opts) {
    const glt_read_options o = GLT_READ_OPTIONS_INIT;
    *opts = o;
}

/* Larger than this is no struct of ours from any release: an uninitialised size, refused before reading past it. */
#define GLT_STRUCT_SIZE_MAX 65536u

glt_status glt_struct_in(const void *in, void *out, size_t known, const void *defaults, const char *type,
                         const char *call) {
    if (!in) {
        if (out) memcpy(out, defaults, known);
        return GLT_OK;
    }
    size_t size;
    memcpy(&size, in, sizeof size); /* every public struct starts with its size_t size */
    if (size > known && size <= GLT_STRUCT_SIZE_MAX) {
        const unsigned char *tail = (const unsigned char *)in + known;
        for (size_t i = 0; i < size - known; ++i)
            if (tail[i])
                return glt_fail(GLT_INVALID_ARGUMENT,
                                "%s: %s.size is %zu, larger than this library's %s (%zu bytes, gltensor %s), and "
                                "byte %zu past it is set: the program was built against a newer gltensor.h and "
                                "uses a field this library does not know; run it with that release's libgltensor, "
                                "or leave the newer fields zero",
                                call, type, size, type, known, GLT_VERSION_STRING, known + i);
    } else if (size != 0 && size != known) {
        /* No older layout exists yet: 0.2 is the first release with size fields. A later release lists the older
         * sizes it accepts here and fills the fields they lack with their defaults. */
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "%s: %s.size is %zu, not a size of %s this library knows (0 or %zu in gltensor %s); "
                        "initialise the struct with %s_init(), the GLT_*_INIT initialiser, = {0} or memset, or set "
                        ".size = sizeof(%s)",
                        call, type, size, type, known, GLT_VERSION_STRING, type, type);
    }
    if (out) {
        memcpy(out, in, known);
        memcpy(out, &known, sizeof known); /* the copy is this release's layout */
    }
    return GLT_OK;
}

glt_status glt_read_options_in(const glt_read_options *in, glt_read_options *out, const char *call) {
    static const glt_read_options defaults = GLT_READ_OPTIONS_INIT;
    return glt_struct_in(in, out, sizeof *out, &defaults, "glt_read_options", call);
}

glt_status glt_write_options_in(const glt_write_options *in, glt_write_options *out, const char *call) {
    static const glt_write_options defaults = GLT_WRITE_OPTIONS_INIT;
    return glt_struct_in(in, out, sizeof *out, &defaults, "glt_write_options", call);
}
