/* What the core asks of CUDA: the functions of cuda/cuda_*.c, the only files that call CUDA (each enters the
 * object's device itself, cuda_device.h). Built without CUDA, cuda_none.c gives every one of them, saying so.
 * The one CUDA header the folders above cuda/ include; not part of the public API. */
#ifndef GLT_CUDA_API_H
#define GLT_CUDA_API_H

#include "convert/convert.h"
#include "cuda/kernels.h"

#include <stddef.h>

/* ---- cuda_device.c: the device of a GL context, and the doctor's queries ---- */
/* Reason text when CUDA cannot serve this context; GLT_OK and the device otherwise. */
glt_status glt_cuda_device_of_current_context(int *cuda_device);

/* For `python -m gltensor doctor`: the CUDA runtime version this build links (CUDART_VERSION, e.g. 13000;
 * 0 without CUDA), the driver's CUDA version (cudaDriverGetVersion; 0 when no driver is loaded), and one
 * visible device's name, PCI bus id and compute capability (no CUDA context is created). */
int glt_cuda_build_runtime_version(void);
int glt_cuda_driver_version(void);
glt_status glt_cuda_describe_device(int cuda_device, char *name, size_t name_size, char *pci_bus_id,
                                    size_t pci_size, int *cc_major, int *cc_minor);
/* The device's UUID (as GL_EXT_memory_object reports it) and name; creates no context. */
glt_status glt_cuda_device_identity(int device, unsigned char uuid[16], char *name, size_t name_size);

/* ---- cuda_stream.c: events, streams, synchronisation, the frame pool's device memory ---- */
/* consumer waits for an event (recorded by a copy) on the GPU. */
glt_status glt_cuda_wait_event(void *consumer, void *event, int cuda_device);
/* consumer waits on the GPU for each non-NULL event of events[0..n). */
glt_status glt_cuda_wait_events(void *consumer, void *const *events, int n, int cuda_device);
glt_status glt_cuda_record_event(void *event, void *stream, int cuda_device);
glt_status glt_cuda_stream_sync(void *stream, int cuda_device);
glt_status glt_cuda_device_sync(int cuda_device);
glt_status glt_cuda_copy_linear(void *dst, const void *src, size_t bytes, void *stream, int cuda_device);
/* GLT_INVALID_ARGUMENT unless stream is a live stream of cuda_device (0, 1 and 2 are CUDA's defaults). */
glt_status glt_cuda_check_stream(void *stream, int cuda_device);
/* The device a pointer's memory lives on, or GLT_INVALID_ARGUMENT when it is not CUDA device memory
 * (asked on query_device, the device the caller works on). */
glt_status glt_cuda_pointer_device(const void *ptr, int query_device, int *cuda_device);
/* GLT_OK when ptr is CUDA memory of cuda_device; else GLT_WRONG_DEVICE / GLT_INVALID_ARGUMENT naming `what`. */
glt_status glt_cuda_check_source(const void *ptr, int cuda_device, const char *what);

/* Device memory and events of the frame pool, each made and used on cuda_device. */
glt_status glt_cuda_alloc(int cuda_device, size_t bytes, void **out);
/* Waits for the first n_pending events, destroys every event (and `ready`), frees data. */
void glt_cuda_block_free(int cuda_device, void *data, void *const *events, int n_events, int n_pending, void *ready);
glt_status glt_cuda_event_create(int cuda_device, void **event);
int glt_cuda_event_done(int cuda_device, void *event); /* 1 unless the event's work is still queued */
glt_status glt_cuda_event_sync(int device, void *event); /* blocks until the event's work is done */
void glt_cuda_event_destroy(int device, void *event);
/* Records events[0..k) on the streams that used a block (creating events as needed; waits on the CPU
 * for a stream whose event cannot be made, or for the whole device when sync_device) and returns k. */
int glt_cuda_mark_stream_uses(int cuda_device, int sync_device, void *const *streams, int n_streams, void **events);

/* ---- cuda_capture.c: GL images (and depth packed into a buffer) copied into linear device memory ---- */
typedef struct glt_cuda_image glt_cuda_image; /* a registered GL image */

glt_status glt_cuda_image_register(GLuint name, GLenum target, int cuda_device, const glt_format *fmt,
                                   int width, int height, glt_cuda_image **out);
/* Work queued on the image must be complete or on a stream synchronised before this. */
void glt_cuda_image_unregister(glt_cuda_image *img);
/* Frees without unregistering: for when the image's GL context cannot be made current (the driver drops
 * the registration with the context). */
void glt_cuda_image_forget(glt_cuda_image *img);

/* A width x height region of an image (origin in GL's bottom-left convention) and where it goes. */
typedef struct glt_cuda_region {
    glt_cuda_image *img;
    const glt_out_spec *spec; /* conversions for this region */
    int x0, y0, width, height;
    void *dst;
    size_t pitch; /* bytes between output rows */
    size_t plane; /* bytes between channel planes (CHW) */
} glt_cuda_region;

/* Maps the distinct `images` with one call, copies every region (top row first when flip, converted
 * per its spec), and unmaps them with one call, all on `stream`: one GL->CUDA handoff. */
glt_status glt_cuda_copy_regions(glt_cuda_image *const *images, int n_images, const glt_cuda_region *regions,
                                 int n_regions, int flip, void *stream, void *const *ready_events, int n_ready);

/* Depth through a registered pixel-pack buffer. */
typedef struct glt_cuda_buffer glt_cuda_buffer;
glt_status glt_cuda_buffer_register(GLuint buffer, int cuda_device, glt_cuda_buffer **out);
void glt_cuda_buffer_unregister(glt_cuda_buffer *b);
void glt_cuda_buffer_forget(glt_cuda_buffer *b); /* as glt_cuda_image_forget */
/* Maps the buffer (one handoff), converts width x height float depths into dst, unmaps. */
glt_status glt_cuda_depth_copy(glt_cuda_buffer *b, int width, int height, const glt_out_spec *spec, int flip,
                               void *dst, size_t pitch, void *stream, void *ready_event);

/* ---- cuda_upload.c: a texture registered with CUDA for writing (surface load/store) ---- */
typedef struct glt_cuda_surface glt_cuda_surface;
glt_status glt_cuda_surface_register(GLuint name, GLenum target, int cuda_device, const glt_format *fmt, int width,
                                     int height, glt_cuda_surface **out);
void glt_cuda_surface_unregister(glt_cuda_surface *s); /* synchronises the last write's stream first */
/* Frees what CUDA allocated for s (surface, staging) but leaves its registration to the driver: for a
 * texture whose GL context cannot be entered any more. */
void glt_cuda_surface_forget(glt_cuda_surface *s);
/* Maps the texture (write-discard when `whole`), writes spec's region in one kernel (spec's array
 * layout fields are filled from the mapped array), and unmaps, all on stream. */
glt_status glt_cuda_surface_write(glt_cuda_surface *s, glt_scatter_spec *spec, int whole, void *stream);

/* ---- cuda_buffer_map.c: a buffer object registered with CUDA for mapping as linear memory ---- */
typedef struct glt_cuda_mapbuf glt_cuda_mapbuf;
glt_status glt_cuda_mapbuf_register(GLuint name, int cuda_device, glt_cuda_mapbuf **out);
void glt_cuda_mapbuf_unregister(glt_cuda_mapbuf *b);
void glt_cuda_mapbuf_forget(glt_cuda_mapbuf *b); /* as glt_cuda_surface_forget */
/* Maps for mode (glt_map_mode) on stream; *data and *size: the whole buffer's device memory. */
glt_status glt_cuda_mapbuf_map(glt_cuda_mapbuf *b, int mode, void *stream, void **data, size_t *size);
/* consumer waits for the map; the unmap will wait for work queued on consumer until then. */
glt_status glt_cuda_mapbuf_consumer(glt_cuda_mapbuf *b, void *consumer);
glt_status glt_cuda_mapbuf_unmap(glt_cuda_mapbuf *b);
/* Maps read-only, copies bytes at offset into dst, records ready_event (if any), unmaps: on stream. */
glt_status glt_cuda_mapbuf_copy(glt_cuda_mapbuf *b, size_t offset, size_t bytes, void *dst, void *stream,
                                void *ready_event);

/* ---- cuda_vmm.c: exportable device memory for shared slots (slots.c) ---- */
typedef struct glt_cuda_vmm glt_cuda_vmm;
/* GLT_OK where `device` can hold CUDA shared slots; else GLT_UNSUPPORTED (or a CUDA error) saying what is missing. */
glt_status glt_cuda_vmm_supported(int device);
/* Compressible device memory of `device` exportable as a POSIX fd; GLT_UNSUPPORTED (with the reason and the
 * fallback) where the driver or device cannot export it or cannot compress it. */
glt_status glt_cuda_vmm_alloc(int device, size_t bytes, glt_cuda_vmm **out);
void *glt_cuda_vmm_ptr(const glt_cuda_vmm *m);
size_t glt_cuda_vmm_size(const glt_cuda_vmm *m);
glt_status glt_cuda_vmm_export(glt_cuda_vmm *m, int *fd); /* a new fd each call; the caller closes it */
void glt_cuda_vmm_free(glt_cuda_vmm *m);                  /* waits for the device's queued work first */
/* A texture object over width x height pixels of fmt at ptr, rows pitch bytes apart (pitch-linear memory). */
glt_status glt_cuda_pitched_texture(int device, void *ptr, int width, int height, size_t pitch, const glt_format *fmt,
                                    unsigned long long *texture);
void glt_cuda_texture_destroy(int device, unsigned long long texture);
/* The gather kernel over slots' textures on stream, then ready_event (if any) recorded there. */
glt_status glt_cuda_slots_gather(int device, const glt_gather_item *items, int count, const glt_gather_spec *spec,
                                 void *stream, void *const *events, int n_events);

#endif
