/*
 * Device memory that other processes' GL can write: the shared slots' pixels (slots.c), allocated with
 * CUDA's virtual memory API (cuMemCreate with a POSIX file descriptor handle) so that it can be exported
 * to workers, which import it with GL_EXT_memory_object_fd. Also what the trainer's read needs around it:
 * pitched texture objects over the slots, the gather launch, and waiting for a copy.
 *
 * The driver API is reached through the runtime's entry-point lookup (glt_cuda_driver_entry, cuda_device.h):
 * linking libcuda would make the library unloadable without a driver, and the wheel must import anywhere.
 *
 * The allocation is made compressible (CU_MEM_ALLOCATION_COMP_GENERIC). Measured on an H100 (driver 580):
 * NVIDIA's GL imports such memory as compressible whatever CUDA allocated, so into memory allocated without
 * compression GL's writes land compressed and CUDA reads raw sectors: 25% of an 84x84 slot's pixels (75%
 * after a buffer copy) kept their old values, at every alignment tried, long after the fence. Where the
 * device cannot compress (the attribute is 0, or the allocation comes back uncompressed) the slots are
 * refused with GLT_UNSUPPORTED rather than risk that: the CPU backend (shared host memory) is the fallback.
 */
#include "cuda/cuda_api.h"

#ifdef GLT_WITH_CUDA

#include "cuda/cuda_device.h"

#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*pfn_cuDeviceGet)(CUdevice *, int);
typedef CUresult (*pfn_cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*pfn_cuMemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *,
                                                      CUmemAllocationGranularity_flags);
typedef CUresult (*pfn_cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                                    unsigned long long);
typedef CUresult (*pfn_cuMemGetAllocationPropertiesFromHandle)(CUmemAllocationProp *, CUmemGenericAllocationHandle);
typedef CUresult (*pfn_cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*pfn_cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*pfn_cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*pfn_cuMemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                                     unsigned long long);
typedef CUresult (*pfn_cuMemUnmap)(CUdeviceptr, size_t);
typedef CUresult (*pfn_cuMemAddressFree)(CUdeviceptr, size_t);
typedef CUresult (*pfn_cuMemRelease)(CUmemGenericAllocationHandle);
typedef CUresult (*pfn_cuGetErrorName)(CUresult, const char **);

static struct {
    pfn_cuDeviceGet DeviceGet;
    pfn_cuDeviceGetAttribute DeviceGetAttribute;
    pfn_cuMemGetAllocationGranularity MemGetAllocationGranularity;
    pfn_cuMemCreate MemCreate;
    pfn_cuMemGetAllocationPropertiesFromHandle MemGetAllocationPropertiesFromHandle;
    pfn_cuMemAddressReserve MemAddressReserve;
    pfn_cuMemMap MemMap;
    pfn_cuMemSetAccess MemSetAccess;
    pfn_cuMemExportToShareableHandle MemExportToShareableHandle;
    pfn_cuMemUnmap MemUnmap;
    pfn_cuMemAddressFree MemAddressFree;
    pfn_cuMemRelease MemRelease;
    pfn_cuGetErrorName GetErrorName;
    const char *missing; /* the first entry point not found, or NULL */
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void load_vmm_entries(void) {
#define ENTRY(fn)                                                                                          \
    do {                                                                                                   \
        drv.fn = (pfn_cu##fn)glt_cuda_driver_entry("cu" #fn);                                              \
        if (!drv.fn && !drv.missing) drv.missing = "cu" #fn;                                               \
    } while (0)
    ENTRY(DeviceGet);
    ENTRY(DeviceGetAttribute);
    ENTRY(MemGetAllocationGranularity);
    ENTRY(MemCreate);
    ENTRY(MemGetAllocationPropertiesFromHandle);
    ENTRY(MemAddressReserve);
    ENTRY(MemMap);
    ENTRY(MemSetAccess);
    ENTRY(MemExportToShareableHandle);
    ENTRY(MemUnmap);
    ENTRY(MemAddressFree);
    ENTRY(MemRelease);
    ENTRY(GetErrorName);
#undef ENTRY
}

static glt_status drv_fail(CUresult r, const char *call, const char *what) {
    const char *name = NULL;
    if (!drv.GetErrorName || drv.GetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    return glt_fail(GLT_CUDA_ERROR, "%s failed (%s, %d): %s", call, name ? name : "unknown CUresult", (int)r, what);
}

struct glt_cuda_vmm {
    int device;
    CUmemGenericAllocationHandle handle;
    CUdeviceptr ptr;
    size_t size;
};

static int attribute(CUdevice dev, CUdevice_attribute a) {
    int v = 0;
    return drv.DeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? v : 0;
}



/* Whether `device` can hold shared slots (VMM, POSIX fd export, compressible memory), the reason when not;
 * *dev_out (may be NULL) is its driver handle. Called with the device entered. */
static glt_status check_support(int device, CUdevice *dev_out) {
    pthread_once(&drv_once, load_vmm_entries);
    if (drv.missing)
        return glt_fail(GLT_UNSUPPORTED,
                        "the CUDA driver has no %s (virtual memory management, CUDA 10.2+ drivers); shared slots "
                        "need it to export GPU memory to worker processes: update the NVIDIA driver, or use "
                        "backend='cpu' (shared host memory)",
                        drv.missing);
    cudaError_t e = cudaFree(0); /* the runtime's primary context, which the driver calls below act in */
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaFree(0)", "initialising CUDA device %d for shared slots", device);
    CUdevice dev;
    CUresult r = drv.DeviceGet(&dev, device);
    if (r != CUDA_SUCCESS) return drv_fail(r, "cuDeviceGet", "looking up the slots' device");
    if (!attribute(dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) ||
        !attribute(dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED))
        return glt_fail(GLT_UNSUPPORTED,
                        "CUDA device %d cannot export memory as a POSIX file descriptor (virtual memory management "
                        "or POSIX fd handles unsupported); shared slots need it: use backend='cpu' (shared host "
                        "memory), or read per worker",
                        device);
    glt_status env = glt_env_check();
    if (env != GLT_OK) return env;
    /* GLTENSOR_SLOTS_COMPRESSION=none allocates without compression: a diagnostic that shows the stale sectors
     * described above (tools/slots_probe.py), never a setting to run with. */
    int compress = glt_env_choice(GLT_ENV_SLOTS_COMPRESSION) == 0;
    if (compress && !attribute(dev, CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED))
        return glt_fail(GLT_UNSUPPORTED,
                        "CUDA device %d cannot allocate compressible memory (CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_"
                        "SUPPORTED is 0); NVIDIA's GL writes imported memory compressed, and CUDA reading an "
                        "uncompressed allocation then sees stale pixels, so shared CUDA slots are refused here: use "
                        "backend='cpu' (shared host memory, one host->device copy per step for all workers)",
                        device);
    if (dev_out) *dev_out = dev;
    return GLT_OK;
}

glt_status glt_cuda_vmm_supported(int device) {
    ON_DEVICE(device);
    return check_support(device, NULL);
}

glt_status glt_cuda_vmm_alloc(int device, size_t bytes, glt_cuda_vmm **out) {
    ON_DEVICE(device);
    CUdevice dev;
    glt_status support = check_support(device, &dev);
    if (support != GLT_OK) return support;
    int compress = glt_env_choice(GLT_ENV_SLOTS_COMPRESSION) == 0;
    CUresult r;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.allocFlags.compressionType = compress ? CU_MEM_ALLOCATION_COMP_GENERIC : CU_MEM_ALLOCATION_COMP_NONE;
    size_t granularity = 0;
    r = drv.MemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS || granularity == 0) return drv_fail(r, "cuMemGetAllocationGranularity", "shared slots");
    if (bytes > SIZE_MAX - granularity)
        return glt_fail(GLT_INVALID_ARGUMENT, "shared slots of %zu bytes are too large", bytes);
    size_t size = (bytes + granularity - 1) / granularity * granularity;
    glt_cuda_vmm *m = calloc(1, sizeof *m);
    if (!m) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    m->device = device;
    m->size = size;
    r = drv.MemCreate(&m->handle, size, &prop, 0);
    if (r != CUDA_SUCCESS) {
        free(m);
        if (r == CUDA_ERROR_OUT_OF_MEMORY)
            return glt_fail(GLT_OUT_OF_MEMORY, "cuMemCreate: out of device memory for %zu bytes of shared slots on "
                                               "CUDA device %d", size, device);
        return drv_fail(r, "cuMemCreate", "allocating exportable memory for shared slots");
    }
    CUmemAllocationProp got;
    memset(&got, 0, sizeof got);
    if (compress && (drv.MemGetAllocationPropertiesFromHandle(&got, m->handle) != CUDA_SUCCESS ||
                     got.allocFlags.compressionType != CU_MEM_ALLOCATION_COMP_GENERIC)) {
        drv.MemRelease(m->handle);
        free(m);
        return glt_fail(GLT_UNSUPPORTED,
                        "CUDA device %d gave uncompressed memory where compressible memory was asked for; NVIDIA's "
                        "GL writes imported memory compressed, so CUDA would read stale pixels: shared CUDA slots "
                        "are refused here; use backend='cpu'",
                        device);
    }
    r = drv.MemAddressReserve(&m->ptr, size, 0, 0, 0);
    if (r == CUDA_SUCCESS) {
        r = drv.MemMap(m->ptr, size, 0, m->handle, 0);
        if (r == CUDA_SUCCESS) {
            CUmemAccessDesc access;
            memset(&access, 0, sizeof access);
            access.location = prop.location;
            access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            r = drv.MemSetAccess(m->ptr, size, &access, 1);
            if (r != CUDA_SUCCESS) drv.MemUnmap(m->ptr, size);
        }
        if (r != CUDA_SUCCESS) drv.MemAddressFree(m->ptr, size);
    }
    if (r != CUDA_SUCCESS) {
        drv.MemRelease(m->handle);
        free(m);
        return drv_fail(r, "cuMemAddressReserve/cuMemMap/cuMemSetAccess", "mapping the shared slots");
    }
    /* The workers copy into it on the GPU; zeros make a slot never written recognisable in a dump. */
    cudaError_t e = cudaMemset((void *)(uintptr_t)m->ptr, 0, size);
    if (e == cudaSuccess) e = cudaDeviceSynchronize(); /* before any worker can write into it */
    if (e != cudaSuccess) {
        glt_cuda_vmm_free(m);
        return glt_cuda_fail(e, "cudaMemset", "clearing the shared slots");
    }
    *out = m;
    return GLT_OK;
}

void *glt_cuda_vmm_ptr(const glt_cuda_vmm *m) { return (void *)(uintptr_t)m->ptr; }
size_t glt_cuda_vmm_size(const glt_cuda_vmm *m) { return m->size; }

glt_status glt_cuda_vmm_export(glt_cuda_vmm *m, int *fd) {
    ON_DEVICE(m->device);
    int out = -1;
    CUresult r = drv.MemExportToShareableHandle(&out, m->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS) return drv_fail(r, "cuMemExportToShareableHandle", "exporting the shared slots");
    /* Close-on-exec: a program the trainer starts must not inherit (and keep alive) the GPU allocation. */
    if (fcntl(out, F_SETFD, FD_CLOEXEC) != 0) {
        int err = errno;
        close(out);
        return glt_fail(GLT_INVALID_ARGUMENT, "making the shared slots' memory descriptor close-on-exec failed (%s)",
                        strerror(err));
    }
    *fd = out;
    return GLT_OK;
}

void glt_cuda_vmm_free(glt_cuda_vmm *m) {
    if (!m) return;
    ON_DEVICE_OR(m->device, );
    cudaDeviceSynchronize(); /* reads queued on any stream may still use it */
    drv.MemUnmap(m->ptr, m->size);
    drv.MemAddressFree(m->ptr, m->size);
    /* Workers that imported it keep it alive through their own references until they release them. */
    drv.MemRelease(m->handle);
    free(m);
}

glt_status glt_cuda_pitched_texture(int device, void *ptr, int width, int height, size_t pitch, const glt_format *fmt,
                                    unsigned long long *texture) {
    ON_DEVICE(device);
    int bits = (int)glt_dtype_size(fmt->dtype) * 8;
    enum cudaChannelFormatKind kind = fmt->dtype == GLT_DTYPE_FLOAT16 || fmt->dtype == GLT_DTYPE_FLOAT32
                                          ? cudaChannelFormatKindFloat
                                          : cudaChannelFormatKindUnsigned;
    struct cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypePitch2D;
    res.res.pitch2D.devPtr = ptr;
    res.res.pitch2D.desc = cudaCreateChannelDesc(bits, fmt->channels > 1 ? bits : 0, fmt->channels > 2 ? bits : 0,
                                                 fmt->channels > 3 ? bits : 0, kind);
    res.res.pitch2D.width = (size_t)width;
    res.res.pitch2D.height = (size_t)height;
    res.res.pitch2D.pitchInBytes = pitch;
    cudaTextureObject_t t = 0;
    cudaError_t e = glt_cuda_raw_texture(&res, &t);
    if (e != cudaSuccess)
        return glt_cuda_fail(e, "cudaCreateTextureObject", "a %dx%d %s slot (pitch %zu)", width, height, fmt->name,
                             pitch);
    *texture = (unsigned long long)t;
    return GLT_OK;
}

void glt_cuda_texture_destroy(int device, unsigned long long texture) {
    if (!texture) return;
    ON_DEVICE_OR(device, );
    cudaDestroyTextureObject((cudaTextureObject_t)texture);
}

glt_status glt_cuda_slots_gather(int device, const glt_gather_item *items, int count, const glt_gather_spec *spec,
                                 void *stream, void *const *events, int n_events) {
    ON_DEVICE(device);
    int rc = glt_launch_gather(items, count, spec, stream);
    if (rc != 0) return glt_cuda_fail((cudaError_t)rc, "copy kernel launch", "reading %d shared slot(s)", count);
    for (int i = 0; i < n_events; ++i) {
        if (!events[i]) continue;
        cudaError_t e = cudaEventRecord((cudaEvent_t)events[i], (cudaStream_t)stream);
        if (e != cudaSuccess) return glt_cuda_fail(e, "cudaEventRecord", "marking the slots' copy as done");
    }
    return GLT_OK;
}

#endif
