/* Version, enum names and defaults: the small facts of the public API. */
#include "internal.h"

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

void glt_context_desc_init(glt_context_desc *desc) {
    desc->cuda_device = GLT_CUDA_DEVICE_AUTO;
    desc->allow_software = 1;
    desc->force_software = 0;
    desc->gl_major = 0;
    desc->gl_minor = 0;
    desc->device_uuid = NULL;
}

void glt_capture_desc_init(glt_capture_desc *desc) {
    desc->gl_name = 0;
    desc->gl_target = GLT_TEXTURE_2D;
    desc->backend = GLT_BACKEND_AUTO;
    desc->cuda_device = -1;
    desc->resizable = 0;
    desc->region.x = desc->region.y = desc->region.width = desc->region.height = 0;
}

void glt_read_options_init(glt_read_options *opts) {
    opts->flip = 1;
    opts->cuda_stream = NULL;
    opts->n_channels = 0;
    for (int i = 0; i < 4; ++i) opts->channels[i] = i;
    opts->convert_dtype = 0;
    opts->dtype = GLT_DTYPE_UINT8;
    opts->order = GLT_ORDER_HWC;
    opts->depth = GLT_DEPTH_WINDOW;
    opts->near_plane = 0.0;
    opts->far_plane = 1.0;
}

glt_read_options glt_read_options_or_default(const glt_read_options *opts) {
    glt_read_options o;
    if (opts)
        o = *opts;
    else
        glt_read_options_init(&o);
    return o;
}
