/*
 * Buffers handed out as frames. A frame is never overwritten by a later read, so
 * each read takes a block of its own; blocks come back here when their frame dies
 * and are handed out again only once every stream that used them has finished the
 * work queued on it until then (an event per stream, waited on by the next user's
 * stream on the GPU, so the CPU never blocks). Steady-state reads therefore
 * allocate nothing.
 */
#include "frames/frames.h"
#include "cuda/cuda_api.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* No CUDA call is made here: device memory and events go through cuda_stream.c, whose every entry point
 * runs on the pool's device, so a pool of device 1 never touches whatever device the calling
 * thread happens to have current (v0.1 allocated frames of device-1 captures on device 0). */

/* Idle blocks kept per pool: enough for frames held a few steps, without hoarding memory. */
#define GLT_POOL_MAX_IDLE 8

struct glt_block {
    glt_pool *pool;
    glt_block *next;
    void *data;
    size_t size;
    void *streams[GLT_BLOCK_MAX_STREAMS]; /* users since the block was handed out */
    int nstreams;
    int overflow;                        /* more users than slots: synchronise the device on return */
    void *events[GLT_BLOCK_MAX_STREAMS]; /* recorded on give-back, one per user stream */
    int nevents_pending;
    /* The block was used on the pool's own stream and no event was recorded for that use: a copy on that stream
     * is ordered after it anyway, and a copy on another stream records one on it then (it always exists). */
    int home_pending;
    void *ready; /* recorded after each copy into the block, before the unmap: what consumers wait for */
    /* A wrapped block (glt_block_wrap): memory the pool does not own, handed to `release` when its frame dies. */
    void (*release)(void *ctx, glt_block *b);
    void *release_ctx;
};

struct glt_pool {
    pthread_mutex_t mutex;
    atomic_int refs;
    glt_memory memory;
    int cuda_device;
    glt_block *idle;
    int idle_count;
    void *stream; /* CUDA pools: the default copy stream of reads into this pool */
};

glt_pool *glt_pool_create(glt_memory memory, int cuda_device) {
    glt_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_init(&p->mutex, NULL);
    atomic_init(&p->refs, 1);
    p->memory = memory;
    p->cuda_device = cuda_device;
    /* Frames are copied by default on CUDA's legacy default stream (handle 1): the stream PyTorch and
     * CuPy use unless told otherwise, so handing a frame to them needs no cross-stream wait. Measured on
     * an H200: a consumer stream waiting on an event of a separate copy stream, whose map waits on GL,
     * costs ~2 ms per step (a GPU time slice) against ~0.35 ms on one stream. It also always exists, so
     * frames can name it after their capture is gone. */
    p->stream = memory == GLT_MEMORY_CUDA ? (void *)(uintptr_t)1 : NULL;
    return p;
}

void *glt_pool_stream(const glt_pool *pool) { return pool->stream; }

void glt_pool_retain(glt_pool *pool) { atomic_fetch_add(&pool->refs, 1); }

static void block_free(glt_block *b) {
    if (b->pool->memory == GLT_MEMORY_HOST) {
        free(b->data);
    } else {
        /* Work still queued on the block must finish before its memory goes back to CUDA. */
        if (b->home_pending) glt_cuda_stream_sync(b->pool->stream, b->pool->cuda_device);
        glt_cuda_block_free(b->pool->cuda_device, b->data, b->events, GLT_BLOCK_MAX_STREAMS, b->nevents_pending,
                            b->ready);
    }
    free(b);
}

void glt_pool_trim(glt_pool *pool) {
    pthread_mutex_lock(&pool->mutex);
    glt_block *list = pool->idle;
    pool->idle = NULL;
    pool->idle_count = 0;
    pthread_mutex_unlock(&pool->mutex);
    while (list) {
        glt_block *next = list->next;
        block_free(list);
        list = next;
    }
}

void glt_pool_release(glt_pool *pool) {
    if (!pool || atomic_fetch_sub(&pool->refs, 1) != 1) return;
    glt_pool_trim(pool);
    pthread_mutex_destroy(&pool->mutex);
    free(pool);
}

static glt_status block_alloc(glt_pool *pool, size_t bytes, glt_block **out) {
    glt_block *b = calloc(1, sizeof *b);
    if (!b) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory for a frame descriptor");
    b->pool = pool;
    b->size = bytes;
    if (pool->memory == GLT_MEMORY_HOST) {
        /* 256-byte alignment: what DLPack consumers (and SIMD loops) prefer. */
        if (posix_memalign(&b->data, 256, bytes ? bytes : 1) != 0) {
            free(b);
            return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory for a %zu-byte frame", bytes);
        }
    } else {
        glt_status st = glt_cuda_alloc(pool->cuda_device, bytes ? bytes : 1, &b->data);
        if (st != GLT_OK) {
            free(b);
            return st;
        }
    }
    *out = b;
    return GLT_OK;
}

/* 1 when a copy on `stream` may use the block without waiting: every other stream that used it has finished
 * with it (queried, never waited for), and its use on the pool's own stream, if any, is on `stream` itself. */
static int block_idle_on_gpu(glt_block *b, void *stream) {
    if (b->home_pending && stream != b->pool->stream) return 0;
    for (int i = 0; i < b->nevents_pending; ++i)
        if (!glt_cuda_event_done(b->pool->cuda_device, b->events[i])) return 0;
    b->nevents_pending = 0;
    return 1;
}

/* Orders a copy on `stream` after every use of the block: the events recorded at its give-back, and its use on
 * the pool's own stream (recorded now: that stream's work up to here includes it). */
static glt_status order_block(glt_block *b, void *stream) {
    glt_pool *pool = b->pool;
    if (b->home_pending && stream != pool->stream) {
        /* A free event slot: the home stream took one of the streams counted at the give-back. */
        b->nevents_pending += glt_cuda_mark_stream_uses(pool->cuda_device, 0, &pool->stream, 1,
                                                        &b->events[b->nevents_pending]);
    }
    b->home_pending = 0;
    if (b->nevents_pending == 0) return GLT_OK;
    glt_status st = glt_cuda_wait_events(stream, b->events, b->nevents_pending, pool->cuda_device);
    b->nevents_pending = 0;
    return st;
}

glt_status glt_pool_acquire(glt_pool *pool, size_t bytes, void *stream, glt_block **out) {
    glt_block *b = NULL;
    /* Prefer a block the GPU is done with: reusing it needs no cross-stream wait, which would
     * otherwise tie the next copy to the consumers' streams. Fall back to the oldest-freed match. */
    pthread_mutex_lock(&pool->mutex);
    glt_block **match = NULL;
    for (glt_block **pp = &pool->idle; *pp; pp = &(*pp)->next) {
        if ((*pp)->size != bytes) continue;
        if (pool->memory == GLT_MEMORY_HOST || block_idle_on_gpu(*pp, stream)) {
            match = pp;
            break;
        }
        match = pp; /* keep looking for an idle one; remember the last candidate (freed longest ago) */
    }
    if (match) {
        b = *match;
        *match = b->next;
        pool->idle_count--;
    }
    pthread_mutex_unlock(&pool->mutex);
    if (!b) {
        glt_status st = block_alloc(pool, bytes, &b);
        if (st != GLT_OK) return st;
    }
    if (pool->memory == GLT_MEMORY_CUDA) {
        glt_status st = order_block(b, stream);
        if (st != GLT_OK) {
            /* Ordering after its last consumers failed: never hand the block out unordered. */
            block_free(b);
            return st;
        }
    }
    b->nevents_pending = 0;
    b->nstreams = 0;
    b->overflow = 0;
    b->next = NULL;
    glt_pool_retain(pool);
    *out = b;
    return GLT_OK;
}

glt_status glt_block_wrap(glt_pool *pool, void *data, size_t bytes, void (*release)(void *ctx, glt_block *b),
                          void *ctx, glt_block **out) {
    glt_block *b = calloc(1, sizeof *b);
    if (!b) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory for a frame descriptor");
    b->pool = pool;
    b->data = data;
    b->size = bytes;
    b->release = release;
    b->release_ctx = ctx;
    glt_pool_retain(pool);
    *out = b;
    return GLT_OK;
}

int glt_block_wrapped(const glt_block *b) { return b->release != NULL; }

int glt_block_idle(glt_block *b) {
    if (b->pool->memory != GLT_MEMORY_CUDA) return 1;
    for (int i = 0; i < b->nevents_pending; ++i)
        if (!glt_cuda_event_done(b->pool->cuda_device, b->events[i])) return 0;
    return 1;
}

void glt_block_settle(glt_block *b) {
    if (b->pool->memory == GLT_MEMORY_CUDA)
        for (int i = 0; i < b->nevents_pending; ++i)
            if (b->events[i]) glt_cuda_event_sync(b->pool->cuda_device, b->events[i]);
    b->nevents_pending = 0;
    b->nstreams = 0;
    b->overflow = 0;
}

void glt_block_retire(glt_block *b) {
    if (!b) return;
    /* Waits for the events its give-back recorded, destroys them; the memory stays its owner's. */
    if (b->pool->memory == GLT_MEMORY_CUDA)
        glt_cuda_block_free(b->pool->cuda_device, NULL, b->events, GLT_BLOCK_MAX_STREAMS, b->nevents_pending, b->ready);
    glt_pool_release(b->pool);
    free(b);
}

void *glt_block_data(const glt_block *block) { return block->data; }

void *glt_block_ready_event(glt_block *b) {
    if (b->release) return NULL; /* wrapped memory is ready when it is handed out: no copy to wait for */
    if (b->pool->memory == GLT_MEMORY_CUDA && !b->ready && glt_cuda_event_create(b->pool->cuda_device, &b->ready) != GLT_OK)
        b->ready = NULL;
    return b->ready;
}
size_t glt_block_size(const glt_block *block) { return block->size; }
glt_pool *glt_block_pool(const glt_block *block) { return block->pool; }

glt_status glt_block_add_stream(glt_block *block, void *stream) {
    if (block->pool->memory == GLT_MEMORY_HOST) return GLT_OK;
    for (int i = 0; i < block->nstreams; ++i)
        if (block->streams[i] == stream) return GLT_OK;
    if (block->nstreams == GLT_BLOCK_MAX_STREAMS) {
        block->overflow = 1;
        return GLT_OK;
    }
    block->streams[block->nstreams++] = stream;
    return GLT_OK;
}

void glt_pool_give_back(glt_block *b) {
    if (!b) return;
    glt_pool *pool = b->pool;
    if (b->release) {
        /* Wrapped memory: an event on every stream that used it, the pool's own included (no later copy into it
         * on that stream follows those uses: its owner's next user is another process's GL), then to its owner. */
        if (pool->memory == GLT_MEMORY_CUDA)
            b->nevents_pending = glt_cuda_mark_stream_uses(pool->cuda_device, b->overflow, b->streams, b->nstreams,
                                                           b->events);
        b->nstreams = 0;
        b->release(b->release_ctx, b); /* the owner retires it (glt_block_retire), which drops the pool reference */
        return;
    }
    if (pool->memory == GLT_MEMORY_CUDA) {
        /* An event per stream that used the block, except the pool's own stream (the copy stream of default
         * reads and the stream torch and CuPy use by default): recording and later querying an event costs
         * ~2 + ~5 us of CPU per read on an H100, and the next copy on that stream needs no event to follow it. */
        void *others[GLT_BLOCK_MAX_STREAMS];
        int n = 0;
        b->home_pending = 0;
        for (int i = 0; i < b->nstreams; ++i) {
            if (b->streams[i] == pool->stream && !b->overflow)
                b->home_pending = 1;
            else
                others[n++] = b->streams[i];
        }
        b->nevents_pending = glt_cuda_mark_stream_uses(pool->cuda_device, b->overflow, others, n, b->events);
    }
    b->nstreams = 0;
    int keep;
    pthread_mutex_lock(&pool->mutex);
    keep = pool->idle_count < GLT_POOL_MAX_IDLE;
    if (keep) {
        b->next = pool->idle;
        pool->idle = b;
        pool->idle_count++;
    }
    pthread_mutex_unlock(&pool->mutex);
    if (!keep) block_free(b);
    glt_pool_release(pool);
}
