/* Memory handed to callers (frames/README.md): the pool of blocks behind frames, frames, and the checks of a
 * destination the caller owns. */
#ifndef GLT_FRAMES_H
#define GLT_FRAMES_H

#include "convert/convert.h"

/* ---- pool.c: buffers handed out as frames, reused only after their consumers finish ---- */
typedef struct glt_pool glt_pool;
typedef struct glt_block glt_block;

#define GLT_BLOCK_MAX_STREAMS 4

/* A CUDA pool also owns the stream its frames are copied on by default, so that stream outlives
 * every frame that names it. NULL on failure (message set). */
glt_pool *glt_pool_create(glt_memory memory, int cuda_device);
void *glt_pool_stream(const glt_pool *pool);
void glt_pool_retain(glt_pool *pool);
void glt_pool_release(glt_pool *pool); /* frees the pool and its idle blocks at zero */
/* A block of exactly `bytes`, whose earlier users' work `stream` is made to wait for. */
glt_status glt_pool_acquire(glt_pool *pool, size_t bytes, void *stream, glt_block **out);
void *glt_block_data(const glt_block *block);
/* CUDA pools: the block's "copy done" event (created on first use; NULL for host pools). Recorded
 * right after the copy and before the unmap, so a consumer's wait never includes the hand-back to GL:
 * waiting past an unmap ties the consumer's stream to GL's work and costs a GPU context time slice. */
void *glt_block_ready_event(glt_block *block);
glt_pool *glt_block_pool(const glt_block *block);
size_t glt_block_size(const glt_block *block);
/* Remembers a stream whose queued work must finish before the block is reused. */
glt_status glt_block_add_stream(glt_block *block, void *stream);
void glt_pool_give_back(glt_block *block);
/* A block over memory the pool does not own (a zero-copy view of shared slots), handed out as any block: its
 * frame's consumer streams are tracked the same way. When its frame dies, an event is recorded on every stream
 * that used it (the pool's own too) and `release(ctx, block)` is called, from whatever thread dropped the frame;
 * the owner then holds the block until it calls glt_block_retire. It has no ready event: the memory is complete
 * when it is handed out. */
glt_status glt_block_wrap(glt_pool *pool, void *data, size_t bytes, void (*release)(void *ctx, glt_block *b),
                          void *ctx, glt_block **out);
int glt_block_wrapped(const glt_block *block);
/* A released wrapped block: 1 when the work its consumers queued is done (queried, not waited for). */
int glt_block_idle(glt_block *block);
/* Waits for that work and makes the block ready to be handed out again over the same memory, keeping its events
 * (creating and destroying them per view cost more than the copy a view saves). */
void glt_block_settle(glt_block *block);
/* Waits for that work, and frees the descriptor (never the memory). */
void glt_block_retire(glt_block *block);
/* Drops idle blocks (e.g. after a resize made their size useless). */
void glt_pool_trim(glt_pool *pool);

/* ---- frame.c, view.c: shared by captures, batches, atlases and shared slots ---- */
struct glt_frame {
    glt_block *block;
    glt_memory memory;
    int cuda_device;
    glt_dtype dtype;
    int count, height, width, channels;
    glt_layout order;
    int flipped;
    void *stream;
    /* 0: compact (rows width * pixel bytes apart, images height rows apart). A zero-copy view of shared slots
     * keeps the slots' padded layout instead. */
    size_t row_pitch, image_stride;
};

/* A frame of `count` (0: single) images of spec's layout, its buffer from `pool`. */
glt_status glt_frame_create(glt_pool *pool, void *stream, glt_memory memory, int cuda_device, const glt_out_spec *spec,
                            int count, int height, int width, int flipped, glt_frame **out);
void *glt_frame_data(const glt_frame *f);
size_t glt_frame_image_bytes(const glt_frame *f);
/* A frame over `block` (glt_block_wrap) holding `count` images of the format's own pixels (no conversion: HWC, the
 * format's channels and dtype, top row first), rows `row_pitch` and images `image_stride` bytes apart. */
glt_status glt_frame_wrap(glt_block *block, void *stream, glt_memory memory, int cuda_device, const glt_format *fmt,
                          int count, int height, int width, size_t row_pitch, size_t image_stride, glt_frame **out);

/* What a destination must be: count 0 means one image, N a batch of N; axes per spec->order. */
typedef struct glt_dest_shape {
    glt_memory memory;
    int cuda_device;
    const glt_out_spec *spec;
    int count, height, width;
} glt_dest_shape;

/* Where a validated destination puts rows, channel planes and images (bytes). */
typedef struct glt_dest_strides {
    size_t pitch, plane, image;
} glt_dest_strides;

/* Validates a caller's destination against `want`. */
glt_status glt_view_check(const glt_buffer_view *v, const glt_dest_shape *want, const char *what,
                          glt_dest_strides *out);

#endif
