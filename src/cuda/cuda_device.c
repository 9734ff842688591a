/*
 * The CUDA device: entering an object's device (ON_DEVICE, cuda_device.h), wording a failed call, the
 * driver's entry points, whether CUDA is there at all, which device a GL context runs on, and the
 * doctor's queries. Also the small helpers the other CUDA files share.
 */
#include "cuda/cuda_api.h"

#ifdef GLT_WITH_CUDA

#include "cuda/cuda_device.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h> /* access: is an NVIDIA driver loaded at all */

/* cuda_gl_interop.h pulls in GL/gl.h, which the build machine may lack: declare the call we need. */
enum glt_cudaGLDeviceList { glt_cudaGLDeviceListAll = 1 };
extern cudaError_t cudaGLGetDevices(unsigned int *pCudaDeviceCount, int *pCudaDevices, unsigned int cudaDeviceCount,
                                    enum glt_cudaGLDeviceList deviceList);

glt_status glt_device_guard_enter(glt_device_guard *g, int device) {
    g->changed = 0;
    g->previous = device;
    if (cudaGetDevice(&g->previous) != cudaSuccess) g->previous = device;
    if (g->previous != device) {
        cudaError_t e = cudaSetDevice(device);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return glt_fail(GLT_CUDA_ERROR, "cudaSetDevice(%d) failed (%s: %s)", device, cudaGetErrorName(e),
                            cudaGetErrorString(e));
        }
        g->changed = 1;
    }
    return GLT_OK;
}

void *glt_cuda_driver_entry(const char *name) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
        fn = NULL;
    cudaGetLastError();
    return fn;
}

/* The driver's primary-context query, reached through the runtime. */
typedef int (*cu_device_get_fn)(int *device, int ordinal);
typedef int (*cu_primary_ctx_state_fn)(int device, unsigned int *flags, int *active);
static pthread_once_t driver_entries_once = PTHREAD_ONCE_INIT;
static cu_device_get_fn cu_device_get;
static cu_primary_ctx_state_fn cu_primary_ctx_state;

static void load_driver_entries(void) {
    cu_device_get = (cu_device_get_fn)glt_cuda_driver_entry("cuDeviceGet");
    cu_primary_ctx_state = (cu_primary_ctx_state_fn)glt_cuda_driver_entry("cuDevicePrimaryCtxGetState");
}

/* 1 when making `device` current creates no CUDA context (its primary context is active already), or
 * when that cannot be told. */
static int primary_context_active(int device) {
    pthread_once(&driver_entries_once, load_driver_entries);
    int dev = 0, active = 0;
    unsigned int flags = 0;
    if (!cu_device_get || !cu_primary_ctx_state || cu_device_get(&dev, device) != 0 ||
        cu_primary_ctx_state(dev, &flags, &active) != 0)
        return 1;
    return active;
}

void glt_device_guard_exit(glt_device_guard *g) {
    /* The caller gets its device back unless no CUDA context exists there yet: since CUDA 12,
     * cudaSetDevice creates the device's context, so restoring a device the thread never used (0, by
     * default) would make every process that captures on GPU k also hold a context on GPU 0. The thread
     * then stays on the capture's device, as torch's own device guard leaves it. */
    if (g->changed && primary_context_active(g->previous)) cudaSetDevice(g->previous);
    g->changed = 0;
}

glt_status glt_cuda_fail(cudaError_t e, const char *call, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    cudaGetLastError(); /* clear the sticky-free error so later calls are not blamed */
    return glt_fail(GLT_CUDA_ERROR, "%s failed (%s: %s): %s", call, cudaGetErrorName(e), cudaGetErrorString(e), what);
}

void glt_cuda_settle(cudaStream_t stream) {
    if ((uintptr_t)stream <= 2) cudaStreamSynchronize(stream);
    else cudaDeviceSynchronize();
}

cudaError_t glt_cuda_raw_texture(const struct cudaResourceDesc *res, cudaTextureObject_t *out) {
    struct cudaTextureDesc tex;
    memset(&tex, 0, sizeof tex);
    tex.addressMode[0] = tex.addressMode[1] = cudaAddressModeClamp;
    tex.filterMode = cudaFilterModePoint;
    tex.readMode = cudaReadModeElementType; /* raw values: no normalisation of 8/16-bit channels */
    tex.normalizedCoords = 0;
    return cudaCreateTextureObject(out, res, &tex, NULL);
}

/* Device-agnostic queries (no object, no device yet): cudaGetDeviceCount and cudaGLGetDevices create no
 * CUDA context, so they run on whatever device is current without touching it. */
/* What cudaGetDeviceCount's failure means for the user. No advice to "use the CPU backend" here: with backend='auto'
 * the CPU backend is already in use when this is read (as the backend's reason); backend_choice.c adds that advice
 * where it fits, to backend='cuda' requests. */
static const char *cuda_unavailable_hint(cudaError_t e) {
    if (access("/proc/driver/nvidia/version", F_OK) != 0)
        return "no NVIDIA driver is loaded on this machine; for GPU tensors use a machine with an NVIDIA GPU and "
               "its driver (in a container: --gpus all)";
    if (e == cudaErrorInsufficientDriver)
        return "the NVIDIA driver is older than the CUDA runtime this gltensor was built with; update the driver "
               "(python -m gltensor.doctor names the version needed)";
    return "the NVIDIA driver is loaded but CUDA cannot start; python -m gltensor.doctor tells why";
}

glt_status glt_cuda_probe(int *device_count) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (device_count) *device_count = (e == cudaSuccess) ? n : 0;
    if (e != cudaSuccess) {
        cudaGetLastError();
        return glt_fail(GLT_CUDA_UNAVAILABLE,
                        "CUDA is unavailable: cudaGetDeviceCount failed (%s: %s): %s", cudaGetErrorName(e),
                        cudaGetErrorString(e), cuda_unavailable_hint(e));
    }
    if (n == 0)
        return glt_fail(GLT_CUDA_UNAVAILABLE, "CUDA is unavailable: no CUDA device is visible (check "
                                              "CUDA_VISIBLE_DEVICES)");
    /* A child forked after its parent used CUDA inherits the runtime's state: cudaGetDeviceCount still answers,
     * but every call that needs the driver fails with cudaErrorInitializationError (a SubprocVecEnv worker forked
     * from a trainer that already used torch.cuda). An attribute query, which creates no context, tells. */
    int major = 0;
    e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (device_count) *device_count = 0;
        return glt_fail(GLT_CUDA_UNAVAILABLE, "CUDA is unavailable in this process (%s: %s)%s", cudaGetErrorName(e),
                        cudaGetErrorString(e),
                        e == cudaErrorInitializationError
                            ? ": it was forked after its parent used CUDA, and CUDA does not survive fork; start "
                              "workers with spawn or forkserver (GL-only work, e.g. shared-slot writes, still runs "
                              "here)"
                            : "");
    }
    return GLT_OK;
}

glt_status glt_cuda_device_of_current_context(int *cuda_device) {
    glt_status st = glt_cuda_probe(NULL);
    if (st != GLT_OK) return st;
    unsigned int count = 0;
    int devices[16];
    cudaError_t e = cudaGLGetDevices(&count, devices, 16, glt_cudaGLDeviceListAll);
    if (e != cudaSuccess || count == 0) {
        cudaGetLastError();
        const glt_gl *gl = glt_gl_load();
        const GLubyte *r = gl ? gl->GetString(GL_RENDERER) : NULL;
        return glt_fail(GLT_WRONG_DEVICE,
                        "the current OpenGL context (renderer \"%s\") does not run on a CUDA device "
                        "(cudaGLGetDevices: %s); create the context on the NVIDIA GPU (gltensor.Context.headless, "
                        "or EGL device with EGL_CUDA_DEVICE_NV) or use the CPU backend",
                        r ? (const char *)r : "unknown", e == cudaSuccess ? "no device" : cudaGetErrorName(e));
    }
    *cuda_device = devices[0];
    return GLT_OK;
}

int glt_cuda_build_runtime_version(void) { return CUDART_VERSION; }

int glt_cuda_driver_version(void) {
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return v;
}

/* Attribute queries and cudaDeviceGetPCIBusId create no context, so no device guard is needed. */
glt_status glt_cuda_describe_device(int cuda_device, char *name, size_t name_size, char *pci_bus_id,
                                    size_t pci_size, int *cc_major, int *cc_minor) {
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, cuda_device);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaGetDeviceProperties", "CUDA device %d", cuda_device);
    snprintf(name, name_size, "%s", prop.name);
    *cc_major = prop.major;
    *cc_minor = prop.minor;
    e = cudaDeviceGetPCIBusId(pci_bus_id, (int)pci_size, cuda_device);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaDeviceGetPCIBusId", "CUDA device %d", cuda_device);
    return GLT_OK;
}

glt_status glt_cuda_device_identity(int device, unsigned char uuid[16], char *name, size_t name_size) {
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaGetDeviceProperties", "CUDA device %d", device);
    memcpy(uuid, p.uuid.bytes, 16);
    if (name_size) snprintf(name, name_size, "%s", p.name);
    return GLT_OK;
}

#endif
