/*
 * The build without CUDA (no toolkit at build time): every CUDA entry of the core says so, and captures use
 * the CPU backend. The real functions live in src/cuda_*.c, each compiled only with GLT_WITH_CUDA.
 */
#include "cuda/cuda_api.h"

#ifndef GLT_WITH_CUDA

static glt_status no_cuda(void) {
    return glt_fail(GLT_CUDA_UNAVAILABLE, "this gltensor was built without CUDA (no CUDA toolkit found at build "
                                          "time); reinstall with nvcc on PATH or CUDA_HOME set, or use backend='cpu'");
}

/* For what only shared slots use: without CUDA the slots live in host memory, served by the CPU backend. */
static glt_status no_cuda_slots(void) {
    return glt_fail(GLT_CUDA_UNAVAILABLE, "this gltensor was built without CUDA, so shared slots live in host "
                                          "memory: use backend='cpu' (or 'auto')");
}

/* ---- cuda_device.c ---- */
glt_status glt_cuda_probe(int *device_count) {
    if (device_count) *device_count = 0;
    return no_cuda();
}
glt_status glt_cuda_device_of_current_context(int *cuda_device) {
    (void)cuda_device;
    return no_cuda();
}
int glt_cuda_build_runtime_version(void) { return 0; }
int glt_cuda_driver_version(void) { return 0; }
glt_status glt_cuda_describe_device(int cuda_device, char *name, size_t name_size, char *pci_bus_id,
                                    size_t pci_size, int *cc_major, int *cc_minor) {
    (void)cuda_device, (void)name, (void)name_size, (void)pci_bus_id, (void)pci_size, (void)cc_major, (void)cc_minor;
    return no_cuda();
}
glt_status glt_cuda_device_identity(int device, unsigned char uuid[16], char *name, size_t name_size) {
    (void)device, (void)uuid, (void)name, (void)name_size;
    return no_cuda_slots();
}

/* ---- cuda_stream.c ---- */
glt_status glt_cuda_wait_event(void *consumer, void *event, int cuda_device) {
    (void)consumer, (void)event, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_wait_events(void *consumer, void *const *events, int n, int cuda_device) {
    (void)consumer, (void)events, (void)n, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_record_event(void *event, void *stream, int cuda_device) {
    (void)event, (void)stream, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_stream_sync(void *stream, int cuda_device) {
    (void)stream, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_device_sync(int cuda_device) {
    (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_copy_linear(void *dst, const void *src, size_t bytes, void *stream, int cuda_device) {
    (void)dst, (void)src, (void)bytes, (void)stream, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_check_stream(void *stream, int cuda_device) {
    (void)stream, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_pointer_device(const void *ptr, int query_device, int *cuda_device) {
    (void)ptr, (void)query_device, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_check_source(const void *ptr, int cuda_device, const char *what) {
    (void)ptr, (void)cuda_device, (void)what;
    return no_cuda();
}
glt_status glt_cuda_alloc(int cuda_device, size_t bytes, void **out) {
    (void)cuda_device, (void)bytes;
    *out = NULL;
    return no_cuda();
}
void glt_cuda_block_free(int cuda_device, void *data, void *const *events, int n_events, int n_pending, void *ready) {
    (void)cuda_device, (void)data, (void)events, (void)n_events, (void)n_pending, (void)ready;
}
glt_status glt_cuda_event_create(int cuda_device, void **event) {
    (void)cuda_device;
    *event = NULL;
    return no_cuda();
}
int glt_cuda_event_done(int cuda_device, void *event) {
    (void)cuda_device, (void)event;
    return 1;
}
glt_status glt_cuda_event_sync(int device, void *event) {
    (void)device, (void)event;
    return no_cuda_slots();
}
void glt_cuda_event_destroy(int device, void *event) { (void)device, (void)event; }
int glt_cuda_mark_stream_uses(int cuda_device, int sync_device, void *const *streams, int n_streams, void **events) {
    (void)cuda_device, (void)sync_device, (void)streams, (void)n_streams, (void)events;
    return 0;
}

/* ---- cuda_capture.c ---- */
glt_status glt_cuda_image_register(GLuint name, GLenum target, int cuda_device, const glt_format *fmt, int width,
                                   int height, glt_cuda_image **out) {
    (void)name, (void)target, (void)cuda_device, (void)fmt, (void)width, (void)height, (void)out;
    return no_cuda();
}
void glt_cuda_image_unregister(glt_cuda_image *img) { (void)img; }
void glt_cuda_image_forget(glt_cuda_image *img) { (void)img; }
glt_status glt_cuda_copy_regions(glt_cuda_image *const *images, int n_images, const glt_cuda_region *regions,
                                 int n_regions, int flip, void *stream, void *const *ready_events, int n_ready) {
    (void)images, (void)n_images, (void)regions, (void)n_regions, (void)flip, (void)stream, (void)ready_events,
        (void)n_ready;
    return no_cuda();
}
glt_status glt_cuda_buffer_register(GLuint buffer, int cuda_device, glt_cuda_buffer **out) {
    (void)buffer, (void)cuda_device, (void)out;
    return no_cuda();
}
void glt_cuda_buffer_unregister(glt_cuda_buffer *b) { (void)b; }
void glt_cuda_buffer_forget(glt_cuda_buffer *b) { (void)b; }
glt_status glt_cuda_depth_copy(glt_cuda_buffer *b, int width, int height, const glt_out_spec *spec, int flip,
                               void *dst, size_t pitch, void *stream, void *ready_event) {
    (void)b, (void)width, (void)height, (void)spec, (void)flip, (void)dst, (void)pitch, (void)stream, (void)ready_event;
    return no_cuda();
}

/* ---- cuda_upload.c ---- */

glt_status glt_cuda_surface_register(GLuint name, GLenum target, int cuda_device, const glt_format *fmt, int width,
                                     int height, glt_cuda_surface **out) {
    (void)name, (void)target, (void)cuda_device, (void)fmt, (void)width, (void)height, (void)out;
    return no_cuda();
}
void glt_cuda_surface_unregister(glt_cuda_surface *s) { (void)s; }
void glt_cuda_surface_forget(glt_cuda_surface *s) { (void)s; }
glt_status glt_cuda_surface_write(glt_cuda_surface *s, glt_scatter_spec *spec, int whole, void *stream) {
    (void)s, (void)spec, (void)whole, (void)stream;
    return no_cuda();
}

/* ---- cuda_buffer_map.c ---- */
glt_status glt_cuda_mapbuf_register(GLuint name, int cuda_device, glt_cuda_mapbuf **out) {
    (void)name, (void)cuda_device, (void)out;
    return no_cuda();
}
void glt_cuda_mapbuf_unregister(glt_cuda_mapbuf *b) { (void)b; }
void glt_cuda_mapbuf_forget(glt_cuda_mapbuf *b) { (void)b; }
glt_status glt_cuda_mapbuf_map(glt_cuda_mapbuf *b, int mode, void *stream, void **data, size_t *size) {
    (void)b, (void)mode, (void)stream, (void)data, (void)size;
    return no_cuda();
}
glt_status glt_cuda_mapbuf_consumer(glt_cuda_mapbuf *b, void *consumer) {
    (void)b, (void)consumer;
    return no_cuda();
}
glt_status glt_cuda_mapbuf_unmap(glt_cuda_mapbuf *b) {
    (void)b;
    return GLT_OK;
}
glt_status glt_cuda_mapbuf_copy(glt_cuda_mapbuf *b, size_t offset, size_t bytes, void *dst, void *stream,
                                void *ready_event) {
    (void)b, (void)offset, (void)bytes, (void)dst, (void)stream, (void)ready_event;
    return no_cuda();
}

/* ---- cuda_vmm.c ---- */
glt_status glt_cuda_vmm_supported(int device) {
    (void)device;
    return no_cuda_slots();
}
glt_status glt_cuda_vmm_alloc(int device, size_t bytes, glt_cuda_vmm **out) {
    (void)device, (void)bytes, (void)out;
    return no_cuda_slots();
}
void *glt_cuda_vmm_ptr(const glt_cuda_vmm *m) { (void)m; return NULL; }
size_t glt_cuda_vmm_size(const glt_cuda_vmm *m) { (void)m; return 0; }
glt_status glt_cuda_vmm_export(glt_cuda_vmm *m, int *fd) {
    (void)m, (void)fd;
    return no_cuda_slots();
}
void glt_cuda_vmm_free(glt_cuda_vmm *m) { (void)m; }
glt_status glt_cuda_pitched_texture(int device, void *ptr, int width, int height, size_t pitch, const glt_format *fmt,
                                    unsigned long long *texture) {
    (void)device, (void)ptr, (void)width, (void)height, (void)pitch, (void)fmt, (void)texture;
    return no_cuda_slots();
}
void glt_cuda_texture_destroy(int device, unsigned long long texture) { (void)device, (void)texture; }
glt_status glt_cuda_slots_gather(int device, const glt_gather_item *items, int count, const glt_gather_spec *spec,
                                 void *stream, void *const *events, int n_events) {
    (void)device, (void)items, (void)count, (void)spec, (void)stream, (void)events, (void)n_events;
    return no_cuda_slots();
}

#endif
