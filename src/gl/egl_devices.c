/*
 * EGL devices in eglQueryDevicesEXT's order: the order engines that open their own EGL display count in
 * (Panda3D's egl-device-index, MuJoCo's MUJOCO_EGL_DEVICE_ID, moderngl's device_index). egl_context.c looks
 * among them for the device to create a context on; glt_egl_device_get_info describes each for diagnostics
 * (gltensor.doctor), so that no caller has to load libEGL a second way.
 */
#include "gl/gl.h"

#include <string.h>

int glt_has_extension(const char *list, const char *ext) {
    if (!list) return 0;
    size_t n = strlen(ext);
    for (const char *p = list; (p = strstr(p, ext)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    return 0;
}

int glt_egl_query_devices(const glt_egl *egl, EGLDeviceEXT *devices) {
    EGLint count = 0;
    if (!egl->QueryDevicesEXT || !egl->QueryDevicesEXT(GLT_EGL_MAX_DEVICES, devices, &count) || count <= 0) return 0;
    return (int)count;
}

int glt_egl_device_is_nvidia(const glt_egl *egl, EGLDeviceEXT device) {
    return glt_has_extension(egl->QueryDeviceStringEXT ? egl->QueryDeviceStringEXT(device, EGL_EXTENSIONS) : NULL,
                             "EGL_NV_device_cuda");
}

int glt_egl_device_cuda_number(const glt_egl *egl, EGLDeviceEXT device) {
    EGLAttrib n = -1;
    if (!egl->QueryDeviceAttribEXT || !egl->QueryDeviceAttribEXT(device, EGL_CUDA_DEVICE_NV, &n)) return -1;
    return (int)n;
}

glt_status glt_egl_device_count(int *count) {
    if (!count) return glt_fail(GLT_INVALID_ARGUMENT, "glt_egl_device_count: count is NULL");
    *count = 0;
    const glt_egl *egl = glt_egl_load();
    if (!egl) return GLT_EGL_ERROR;
    EGLDeviceEXT devices[GLT_EGL_MAX_DEVICES];
    *count = glt_egl_query_devices(egl, devices);
    return GLT_OK;
}

glt_status glt_egl_device_get_info(int index, glt_egl_device_info *info) {
    if (!info) return glt_fail(GLT_INVALID_ARGUMENT, "glt_egl_device_get_info: info is NULL");
    const glt_egl *egl = glt_egl_load();
    if (!egl) return GLT_EGL_ERROR;
    EGLDeviceEXT devices[GLT_EGL_MAX_DEVICES];
    int count = glt_egl_query_devices(egl, devices);
    if (index < 0 || index >= count)
        return glt_fail(GLT_INVALID_ARGUMENT, "glt_egl_device_get_info: EGL device %d does not exist (%d device(s): "
                                              "0 to %d); count them with glt_egl_device_count", index, count, count - 1);
    EGLDeviceEXT d = devices[index];
    const char *exts = egl->QueryDeviceStringEXT ? egl->QueryDeviceStringEXT(d, EGL_EXTENSIONS) : NULL;
    memset(info, 0, sizeof *info);
    info->size = sizeof *info;
    info->index = index;
    info->extensions = exts ? exts : "";
    info->cuda_device = glt_has_extension(exts, "EGL_NV_device_cuda") ? glt_egl_device_cuda_number(egl, d) : -1;
    if (glt_has_extension(exts, "EGL_EXT_device_drm")) info->drm_node = egl->QueryDeviceStringEXT(d, EGL_DRM_DEVICE_FILE_EXT);
    if (glt_has_extension(exts, "EGL_EXT_device_drm_render_node"))
        info->render_node = egl->QueryDeviceStringEXT(d, EGL_DRM_RENDER_NODE_FILE_EXT);
    if (glt_has_extension(exts, "EGL_EXT_device_query_name")) {
        info->renderer = egl->QueryDeviceStringEXT(d, EGL_RENDERER_EXT);
        info->vendor = egl->QueryDeviceStringEXT(d, EGL_VENDOR);
    }
    return GLT_OK;
}

const char *glt_egl_client_extensions(void) {
    const glt_egl *egl = glt_egl_load();
    if (!egl || !egl->QueryString) return NULL;
    const char *s = egl->QueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (!s && egl->GetError) egl->GetError(); /* EGL_BAD_DISPLAY: no client extensions here */
    return s ? s : "";
}
