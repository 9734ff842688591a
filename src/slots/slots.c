/*
 * Shared slots, the trainer's side: N images of one size and format that worker processes write with GL
 * alone (slot_writer.c) and the trainer reads as one (N, H, W, C) frame.
 *
 * Why this shape: the GPU spends ~300 us switching from graphics to compute work, once per step per process
 * that hands GL output to CUDA, and those switches queue on the one GPU. Workers that each read their frame
 * into CUDA pay N switches per step (2x slower than host readback at 4-16 workers, measured on an H200) and
 * hold a CUDA context each. Here only the trainer touches CUDA: one switch per step serves every worker.
 *
 * A read copies the slots into a frame from a pool (the conversions fused into the copy, as for captures),
 * so a frame is never overwritten by the workers' next step. The slots are triple-buffered by default:
 * workers write set (reads % 3) while the copy of another set may still be queued on the trainer's stream,
 * so a read never blocks on the GPU. Before workers are let into a set again (the read count they see moves
 * on at the end of a read), the copy that last read that set must be complete: with several sets that copy
 * was queued a step or more earlier and is normally long done; with one set every read waits for its own copy.
 *
 * A zero-copy read (glt_slots_read_view) hands out the set itself, as a frame over memory the pool does not own
 * (glt_block_wrap). That set comes back to the workers only once its frame is dead and the work its consumers
 * queued by then is complete (events recorded when it died, waited for here); a read that would let them into a
 * set whose view still lives fails with GLT_SLOTS_BUSY before it changes anything. Three sets let a loop keep
 * the previous step's view while it reads the next one. Views keep the slots alive: the object is freed when the
 * trainer destroyed it and its last view died, whichever comes last.
 *
 * Slots hold rows top row first (what a default read returns), so that a view needs no flip.
 */
#include "slots/slots_shared.h"
#include "device/device.h"
#include "read/read.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#define MAX_SLOTS GLT_SLOTS_MAX_COUNT
#define MAX_SIDE GLT_SLOTS_MAX_SIDE
#define PID_LIMIT 4194304 /* PID_MAX_LIMIT: no process has a larger pid */

struct glt_slots {
    glt_slots_control *h; /* the control page, mapped writable (the only writable mapping of it: it is sealed) */
    char *records;        /* every slot's record page, side by side (slot i's memfd, page 0), mapped read-only */
    char *pixels;         /* CPU backend: every set's images, set by set (slot i's image of set k comes from slot
                           * i's memfd), mapped writable: count * slot_bytes contiguous bytes per set */
    int *slot_fds;        /* each slot's memfd */
    unsigned char *ever;  /* each slot was seen written (a record of zeros later was cleared, not never written) */
    char tamper[320];     /* what the read in progress found done to the control page, or "" */
    glt_slots_geometry g; /* the trainer's own copy: nothing is sized or placed from shared memory */
    glt_slots_header hdr; /* what the workers get, sealed into geometry_fd once complete */
    int geometry_fd;
    uint64_t reads;       /* the trainer's own read count (published in the control page for the workers) */
    uint64_t *seen;       /* each record's seq when the read in progress checked it (slots_shared.h) */
    int pid;              /* the trainer: a forked child's copy of this object frees only its own mappings */
    size_t control_bytes;
    int control_fd;
    const glt_format *fmt;
    glt_backend backend;
    char backend_reason[320];
    int cuda_device;
    glt_cuda_vmm *vmm;                 /* CUDA backend: the pixels */
    unsigned long long *textures;      /* CUDA backend: buffers * count texture objects */
    void *set_done[3];                 /* CUDA backend: recorded after the copy that last read each set */
    int set_pending[3];                /* an event was recorded and not yet waited for */
    uint64_t read_waits;               /* reads that found that copy still queued, and waited for it */
    double read_wait_us;               /* the time they waited */
    glt_pool *pool;
    /* Zero-copy views (glt_slots_read_view). They die in whatever thread drops them: the lock guards these. */
    pthread_mutex_t lock;
    atomic_int refs;       /* the trainer's own reference, plus one per live view */
    int destroyed;         /* glt_slots_destroy ran in the trainer (counted in closed_alive until freed) */
    glt_block *view[3];    /* the live view of each set */
    glt_block *retired[3]; /* a view that died: its consumers' events must be complete before workers enter the set */
    glt_block *spare[3];   /* a settled view block of each set, handed out again by its next view */
};

/* Slot i's record: the trainer's layout, never the header's. */
static glt_slot_record *record_of(const glt_slots *s, unsigned i) {
    return (glt_slot_record *)(s->records + (size_t)i * s->g.page);
}

const glt_format *glt_slot_format(unsigned gl_internal_format) {
    const glt_format *f = glt_format_find(gl_internal_format);
    if (!f || f->depth || f->channels == 3) {
        glt_fail(GLT_UNSUPPORTED_FORMAT,
                 "a shared slot cannot store %s: slot formats are colour formats of 1, 2 or 4 channels (GL_RGBA8, "
                 "GL_R8, GL_RG8, GL_R16, GL_RG16, GL_RGBA16, GL_R16F, GL_RG16F, GL_RGBA16F, GL_R32F, GL_RG32F, "
                 "GL_RGBA32F and their unsigned integer forms); for RGB images use GL_RGBA8 and read "
                 "channels='rgb'",
                 glt_format_name(gl_internal_format));
        return NULL;
    }
    return f;
}

void glt_slots_desc_init(glt_slots_desc *d) {
    memset(d, 0, sizeof *d);
    d->size = sizeof *d;
    d->gl_internal_format = 0x8058; /* GL_RGBA8 */
    d->backend = GLT_BACKEND_AUTO;
    d->cuda_device = GLT_CUDA_DEVICE_AUTO;
    d->buffers = 3;
}

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static glt_status check_desc(const glt_slots_desc *d, const glt_format **fmt) {
    if (d->count < 1 || d->count > MAX_SLOTS)
        return glt_fail(GLT_INVALID_ARGUMENT, "shared slots: count must be 1 to %d slots, got %d", MAX_SLOTS, d->count);
    if (d->width < 1 || d->height < 1 || d->width > MAX_SIDE || d->height > MAX_SIDE)
        return glt_fail(GLT_INVALID_ARGUMENT, "shared slots: width and height must be 1 to %d pixels, got %dx%d",
                        MAX_SIDE, d->width, d->height);
    if (d->buffers < 1 || d->buffers > 3)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "shared slots: buffers must be 1, 2 or 3 (3, the default: workers write one set while the "
                        "trainer's copies or views of the other two may still be in use; 1: each read waits for its "
                        "copy, and zero-copy reads are refused), got %d",
                        d->buffers);
    if (d->backend != GLT_BACKEND_AUTO && d->backend != GLT_BACKEND_CUDA && d->backend != GLT_BACKEND_CPU)
        return glt_fail(GLT_INVALID_ARGUMENT, "shared slots: backend must be auto, cuda or cpu");
    *fmt = glt_slot_format(d->gl_internal_format);
    return *fmt ? GLT_OK : GLT_UNSUPPORTED_FORMAT;
}

/* For tests (_gltensor._slots_weak_control_for_testing): slots made while set leave the control page without
 * F_SEAL_FUTURE_WRITE, as on a kernel before 5.1, so that the trainer's recovery from a changed control page runs. */
static atomic_int weak_control;

void glt_slots_weak_control_for_testing(int on) { atomic_store(&weak_control, on != 0); }

/* A range of address space nothing is mapped in yet (the slots' pieces are mapped into it, MAP_FIXED). */
static char *reserve(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* One descriptor per slot: where the process's limit of open files is too low for them, the soft limit is raised
 * towards the hard one (as Go's runtime does at start), once, and the creation tried again. */
static int raise_file_limit(size_t more) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY || r.rlim_cur >= r.rlim_max) return 0;
    rlim_t want = r.rlim_cur + (rlim_t)more + 64;
    r.rlim_cur = r.rlim_max == RLIM_INFINITY || want < r.rlim_max ? want : r.rlim_max;
    return setrlimit(RLIMIT_NOFILE, &r) == 0;
}

/* Slot i's memfd: sized, sealed, its record mapped (read-only) into s->records and, on the CPU backend, its image
 * of each set into s->pixels. */
static glt_status make_slot(glt_slots *s, unsigned i, int *raised) {
    const glt_slots_geometry *g = &s->g;
    char name[40], what[48];
    snprintf(name, sizeof name, "gltensor-slot-%u", i);
    snprintf(what, sizeof what, "slot %u's memory", i);
    glt_status st = glt_memfd_sized(name, g->slot_file_bytes, &s->slot_fds[i]);
    if (st != GLT_OK && !*raised && raise_file_limit(g->count - i)) {
        *raised = 1;
        glt_clear_error();
        st = glt_memfd_sized(name, g->slot_file_bytes, &s->slot_fds[i]);
    }
    if (st == GLT_OK) st = glt_memfd_seal(s->slot_fds[i], what, 0, NULL);
    if (st != GLT_OK) return st;
    int fd = s->slot_fds[i];
    void *p = mmap(s->records + (size_t)i * g->page, (size_t)g->page, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    for (unsigned set = 0; p != MAP_FAILED && s->pixels && set < g->buffers; ++set)
        p = mmap(s->pixels + glt_slot_offset(g, set, i), (size_t)g->slot_bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_FIXED, fd, (off_t)(g->pixel_offset + set * g->slot_bytes));
    if (p == MAP_FAILED)
        return glt_fail(GLT_OUT_OF_MEMORY, "mapping %s failed (%s); raise vm.max_map_count or make fewer slots", what,
                        strerror(errno));
    return GLT_OK;
}

/* The memory the workers share: the control page (a memfd of its own, sealed), and one memfd per slot holding its
 * record and (CPU backend) its images. */
static glt_status make_memory(glt_slots *s) {
    glt_slots_geometry *g = &s->g;
    size_t page = (size_t)g->page;
    int cpu = s->backend == GLT_BACKEND_CPU;
    g->control_bytes = page;
    g->pixel_offset = cpu ? page : 0;
    g->slot_file_bytes = page + (cpu ? (uint64_t)g->buffers * g->slot_bytes : 0);
    glt_status st = glt_memfd_sized("gltensor-slots-control", page, &s->control_fd);
    if (st != GLT_OK) return st;
    void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, s->control_fd, 0);
    if (p == MAP_FAILED)
        return glt_fail(GLT_OUT_OF_MEMORY, "mapping the slots' control page failed (%s)", strerror(errno));
    s->h = p;
    s->control_bytes = page;
    /* Data, not a hole: a hole found there later was punched (check_control says so). */
    atomic_store(&s->h->reads, 0);
    atomic_store(&s->h->closed, 0u);
    atomic_store(&s->h->marker, GLT_SLOTS_CONTROL_MARKER);
    st = glt_memfd_seal(s->control_fd, "control page", !atomic_load(&weak_control), &g->control_seals);
    if (st != GLT_OK) return st;
    s->slot_fds = malloc(sizeof *s->slot_fds * g->count);
    s->ever = calloc(g->count, 1);
    s->records = reserve(page * g->count);
    if (cpu) s->pixels = reserve((size_t)g->buffers * g->count * g->slot_bytes);
    for (unsigned i = 0; s->slot_fds && i < g->count; ++i) s->slot_fds[i] = -1;
    if (!s->slot_fds || !s->ever || !s->records || (cpu && !s->pixels))
        return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory or address space for %u shared slots", g->count);
    int raised = 0;
    for (unsigned i = 0; i < g->count && st == GLT_OK; ++i) st = make_slot(s, i, &raised);
    return st;
}

/* Waits for the consumers of a dead view of each set (their work must finish before the memory is freed). */
static void retire_views(glt_slots *s) {
    for (int k = 0; k < 3; ++k) {
        glt_block_retire(s->retired[k]);
        glt_block_retire(s->spare[k]);
        s->retired[k] = s->spare[k] = NULL;
    }
}

static void free_cuda(glt_slots *s) {
    for (int k = 0; k < (int)(sizeof s->set_done / sizeof *s->set_done); ++k) {
        if (s->set_pending[k]) glt_cuda_event_sync(s->cuda_device, s->set_done[k]);
        glt_cuda_event_destroy(s->cuda_device, s->set_done[k]);
        s->set_done[k] = NULL;
    }
    if (s->textures) {
        for (unsigned i = 0; i < s->g.buffers * s->g.count; ++i) glt_cuda_texture_destroy(s->cuda_device, s->textures[i]);
        free(s->textures);
        s->textures = NULL;
    }
    glt_cuda_vmm_free(s->vmm);
    s->vmm = NULL;
}

static glt_status setup_cuda(glt_slots *s) {
    glt_slots_header *h = &s->hdr;
    const glt_slots_geometry *g = &s->g;
    glt_status st = glt_cuda_vmm_alloc(s->cuda_device, (size_t)g->buffers * g->count * g->slot_bytes, &s->vmm);
    if (st != GLT_OK) return st;
    s->g.memory_bytes = glt_cuda_vmm_size(s->vmm);
    st = glt_cuda_device_identity(s->cuda_device, h->device_uuid, h->device_name, sizeof h->device_name);
    if (st != GLT_OK) return st;
    s->textures = calloc((size_t)g->buffers * g->count, sizeof *s->textures);
    if (!s->textures) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    char *base = glt_cuda_vmm_ptr(s->vmm);
    for (unsigned set = 0; set < g->buffers; ++set)
        for (unsigned i = 0; i < g->count; ++i) {
            st = glt_cuda_pitched_texture(s->cuda_device, base + glt_slot_offset(g, set, i), g->width, g->height,
                                          g->row_pitch, s->fmt, &s->textures[set * g->count + i]);
            if (st != GLT_OK) return st;
        }
    for (unsigned k = 0; k < g->buffers; ++k) {
        st = glt_cuda_event_create(s->cuda_device, &s->set_done[k]);
        if (st != GLT_OK) return st;
    }
    return GLT_OK;
}

/* The trainer's slots closed (glt_slots_destroy) but not yet freed, in this process: a zero-copy view still holds
 * them. Tests check it returns to zero once every view is dropped; one that never does keeps the whole allocation,
 * GPU memory included, until exit (memcheck reports it as a leak). */
static atomic_int closed_alive;

int glt_slots_closed_alive_for_testing(void) { return atomic_load(&closed_alive); }

glt_status glt_slots_create(const glt_slots_desc *d, glt_slots **out) {
    if (!d || !out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_slots_create: NULL argument");
    *out = NULL;
    GLT_CHECK_STRUCT_SIZE(d, glt_slots_desc);
    const glt_format *fmt = NULL;
    glt_status st = check_desc(d, &fmt);
    if (st == GLT_OK) st = glt_env_check(); /* GLTENSOR_SLOTS_ALIGN below, the others where they are read */
    if (st != GLT_OK) return st;
    glt_slots *s = calloc(1, sizeof *s);
    if (!s) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    s->fmt = fmt;
    s->control_fd = -1;
    s->geometry_fd = -1;
    s->cuda_device = -1;
    pthread_mutex_init(&s->lock, NULL);
    atomic_init(&s->refs, 1);
    st = glt_choose_slots_backend(d->backend, d->cuda_device, &s->backend, &s->cuda_device, s->backend_reason,
                                  sizeof s->backend_reason);
    if (st != GLT_OK) {
        free(s);
        return st;
    }
    size_t bpp = glt_dtype_size(fmt->dtype) * (size_t)fmt->channels;
    size_t pitch = align_up((size_t)d->width * bpp, GLT_SLOT_PITCH_ALIGN);
    static const size_t aligns[] = {GLT_SLOT_ALIGN, 64u << 10, 2u << 20};
    size_t page = (size_t)glt_page_size();
    size_t align = aligns[glt_env_choice(GLT_ENV_SLOTS_ALIGN)];
    /* Host slots are page-aligned too: each worker maps only its own slot of each set writable. */
    if (s->backend == GLT_BACKEND_CPU && align < page) align = page;
    size_t slot_bytes = align_up(pitch * (size_t)d->height, align);
    size_t pixels = slot_bytes * (size_t)d->count * (size_t)d->buffers;
    s->pid = (int)getpid();
    s->g.backend = (uint32_t)s->backend;
    s->g.count = (uint32_t)d->count;
    s->g.buffers = (uint32_t)d->buffers;
    s->g.width = d->width;
    s->g.height = d->height;
    s->g.gl_internal_format = fmt->internal_format;
    s->g.page = page;
    s->g.row_pitch = pitch;
    s->g.slot_bytes = slot_bytes;
    s->g.memory_bytes = pixels;
    s->seen = calloc((size_t)d->count, sizeof *s->seen);
    st = s->seen ? make_memory(s) : glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    if (st != GLT_OK) {
        glt_slots_destroy(s);
        return st;
    }
    glt_slots_header *h = &s->hdr;
    h->version = GLT_SLOTS_VERSION;
    h->cuda_device = s->cuda_device;
    h->trainer_pid = (int32_t)s->pid;
    h->trainer_start = glt_process_start_time(s->pid);
    if (s->backend == GLT_BACKEND_CUDA) {
        st = setup_cuda(s);
    } else {
        /* Host slots on a machine with CUDA: the GPU the workers' contexts should render on is still the
         * trainer's (its UUID lets them find it without CUDA); none without CUDA. */
        int dev = -1;
        if (glt_cuda_compiled() && glt_default_cuda_device(&dev) == GLT_OK && dev >= 0 &&
            glt_cuda_device_identity(dev, h->device_uuid, h->device_name, sizeof h->device_name) != GLT_OK)
            memset(h->device_uuid, 0, sizeof h->device_uuid);
        glt_clear_error();
    }
    if (st == GLT_OK) {
        s->pool = glt_pool_create(s->backend == GLT_BACKEND_CUDA ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST, s->cuda_device);
        if (!s->pool) st = glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    }
    if (st != GLT_OK) {
        glt_slots_destroy(s);
        return st;
    }
    /* Last: the workers' copy of the geometry (memory_bytes is known now), sealed before any descriptor leaves. */
    h->geo = s->g;
    h->magic = GLT_SLOTS_MAGIC;
    st = glt_slots_header_seal(h, &s->geometry_fd);
    if (st != GLT_OK) {
        glt_slots_destroy(s);
        return st;
    }
    *out = s;
    return GLT_OK;
}

static void slots_free(glt_slots *s) {
    /* In a forked child's copy (a worker started with fork that inherited the trainer's object, freed when the child
     * dropped it and its last inherited view died), the memory, the CUDA objects and the closed flag are the
     * trainer's, and CUDA must not be called: only this process's mappings and descriptors go. */
    if (s->pid == (int)getpid()) {
        retire_views(s);
        if (s->backend == GLT_BACKEND_CUDA && s->h) free_cuda(s);
        glt_pool_release(s->pool);
        if (s->destroyed) atomic_fetch_sub(&closed_alive, 1);
    }
    if (s->h) munmap(s->h, s->control_bytes);
    if (s->records) munmap(s->records, (size_t)s->g.page * s->g.count);
    if (s->pixels) munmap(s->pixels, (size_t)s->g.buffers * s->g.count * s->g.slot_bytes);
    for (unsigned i = 0; s->slot_fds && i < s->g.count; ++i)
        if (s->slot_fds[i] >= 0) close(s->slot_fds[i]);
    if (s->control_fd >= 0) close(s->control_fd);
    if (s->geometry_fd >= 0) close(s->geometry_fd);
    pthread_mutex_destroy(&s->lock);
    free(s->slot_fds);
    free(s->ever);
    free(s->seen);
    free(s);
}

/* The trainer's destroy and each view's death drop one reference; the last frees. */
static void slots_unref(glt_slots *s) {
    if (atomic_fetch_sub(&s->refs, 1) == 1) slots_free(s);
}

void glt_slots_destroy(glt_slots *s) {
    if (!s) return;
    /* In a forked child the views it inherited still hold references: the last of them frees (slots_free). */
    if (s->h && s->pid == (int)getpid()) {
        atomic_store(&s->h->closed, 1u);
        s->destroyed = 1;
        atomic_fetch_add(&closed_alive, 1);
    }
    slots_unref(s);
}

glt_status glt_slots_get_info(const glt_slots *s, glt_slots_info *info) {
    if (!s || !info) return glt_fail(GLT_INVALID_ARGUMENT, "glt_slots_get_info: NULL argument");
    info->size = sizeof *info;
    const glt_slots_geometry *g = &s->g;
    info->count = (int)g->count;
    info->width = g->width;
    info->height = g->height;
    info->channels = s->fmt->channels;
    info->dtype = s->fmt->dtype;
    info->gl_internal_format = s->fmt->internal_format;
    info->format_name = s->fmt->name;
    info->backend = s->backend;
    info->backend_reason = s->backend_reason;
    info->cuda_device = s->backend == GLT_BACKEND_CUDA ? s->cuda_device : -1;
    info->buffers = (int)g->buffers;
    info->read_waits = s->read_waits;
    info->read_wait_us = s->read_wait_us;
    info->slot_bytes = g->slot_bytes;
    info->row_pitch = g->row_pitch;
    info->memory_bytes = g->memory_bytes;
    info->reads = s->reads;
    memcpy(info->device_uuid, s->hdr.device_uuid, sizeof info->device_uuid);
    return GLT_OK;
}

glt_status glt_slots_export(glt_slots *s, int *memory_fd, int *control_fd) {
    if (!s || !memory_fd || !control_fd) return glt_fail(GLT_INVALID_ARGUMENT, "glt_slots_export: NULL argument");
    *memory_fd = -1;
    *control_fd = fcntl(s->control_fd, F_DUPFD_CLOEXEC, 0);
    if (*control_fd < 0)
        return glt_fail(GLT_INVALID_ARGUMENT, "duplicating the slots' control descriptor failed (%s); too many open "
                                              "files?", strerror(errno));
    if (s->backend == GLT_BACKEND_CUDA) {
        glt_status st = glt_cuda_vmm_export(s->vmm, memory_fd);
        if (st != GLT_OK) {
            close(*control_fd);
            *control_fd = -1;
            return st;
        }
    }
    return GLT_OK;
}

glt_status glt_slots_export_slot(glt_slots *s, int slot, int *slot_fd) {
    if (!s || !slot_fd) return glt_fail(GLT_INVALID_ARGUMENT, "glt_slots_export_slot: NULL argument");
    *slot_fd = -1;
    if (slot < 0 || (unsigned)slot >= s->g.count)
        return glt_fail(GLT_INVALID_ARGUMENT, "slot %d does not exist: there are %u slots (0 to %u)", slot, s->g.count,
                        s->g.count - 1);
    *slot_fd = fcntl(s->slot_fds[slot], F_DUPFD_CLOEXEC, 0);
    if (*slot_fd < 0)
        return glt_fail(GLT_INVALID_ARGUMENT, "duplicating slot %d's descriptor failed (%s); too many open files?",
                        slot, strerror(errno));
    return GLT_OK;
}

glt_status glt_slots_export_geometry(glt_slots *s, int *geometry_fd) {
    if (!s || !geometry_fd) return glt_fail(GLT_INVALID_ARGUMENT, "glt_slots_export_geometry: NULL argument");
    *geometry_fd = fcntl(s->geometry_fd, F_DUPFD_CLOEXEC, 0);
    if (*geometry_fd < 0)
        return glt_fail(GLT_INVALID_ARGUMENT, "duplicating the slots' geometry descriptor failed (%s); too many open "
                                              "files?", strerror(errno));
    return GLT_OK;
}

/* What slot i's record says at read `reads`, checked as input from another process: any value out of range
 * makes the slot stale, and `why` (when given) says which and what was wrong. *seq_out: the record's seq. */
static glt_slot_state state_of(const glt_slots *s, unsigned i, uint64_t reads, int *pid_out, uint64_t *seq_out,
                               char *why, size_t why_size) {
    glt_slot_record *r = record_of(s, i);
    uint64_t seq = atomic_load_explicit(&r->seq, memory_order_acquire);
    uint64_t written = atomic_load_explicit(&r->written, memory_order_acquire);
    int pid = atomic_load_explicit(&r->writer_pid, memory_order_relaxed);
    uint64_t start = atomic_load_explicit(&r->writer_start, memory_order_relaxed);
    if (pid_out) *pid_out = pid;
    if (seq_out) *seq_out = seq;
    if (why && why_size) why[0] = '\0';
    if (!pid && !seq && !written && s->ever[i]) {
        /* Written before, a record of zeros now: a process holding the slot's memory cleared it. (Whether by a
         * punched hole cannot be told any more: the loads above filled the hole with a page of zeros.) */
        if (why && why_size)
            snprintf(why, why_size,
                     "its record was cleared since it was last written (all zeros: a hole punched in slot %u's "
                     "memory with fallocate PUNCH_HOLE, or zeros written over it, by a process holding it); its "
                     "worker's next write makes it fresh again",
                     i);
        return GLT_SLOT_STALE;
    }
    const char *bad = NULL;
    char detail[160];
    if (pid < 0 || pid > PID_LIMIT || (!pid && (seq || written))) {
        snprintf(detail, sizeof detail, "its record names pid %d, which no writer can have", pid);
        bad = detail;
    } else if (written > reads + 2) {
        /* reads + 2: a write that began during a read refused by the claim (slots_shared.h) saw reads + 1. */
        snprintf(detail, sizeof detail, "its record says it was written for read %llu, but only %llu reads were done",
                 (unsigned long long)written, (unsigned long long)reads);
        bad = detail;
    }
    if (bad) {
        if (why && why_size) snprintf(why, why_size, "its record is corrupt (%s): its worker wrote outside its image", bad);
        if (pid_out && (pid < 0 || pid > PID_LIMIT)) *pid_out = 0;
        return GLT_SLOT_STALE;
    }
    if (written == reads + 2 && why && why_size && !(seq & 1))
        snprintf(why, why_size, "its last write (pid %d) began during a refused read and went to the next step's "
                                "images: write again", pid);
    int fresh = !(seq & 1) && written == reads + 1;
    /* The process checks (a read of /proc) only where the slot is not fresh: never on the read's fast path. */
    if (!fresh && pid && !glt_process_running(pid, start)) return GLT_SLOT_WRITER_GONE;
    if (seq & 1) return GLT_SLOT_WRITING;
    return fresh ? GLT_SLOT_FRESH : GLT_SLOT_STALE;
}

glt_status glt_slots_state(const glt_slots *s, int slot, glt_slot_state *state, int *writer_pid) {
    if (!s || !state) return glt_fail(GLT_INVALID_ARGUMENT, "glt_slots_state: NULL argument");
    if (slot < 0 || (unsigned)slot >= s->g.count)
        return glt_fail(GLT_INVALID_ARGUMENT, "slot %d does not exist: there are %u slots (0 to %u)", slot,
                        s->g.count, s->g.count - 1);
    *state = state_of(s, (unsigned)slot, s->reads, writer_pid, NULL, NULL, 0);
    return GLT_OK;
}

/* GLT_STALE_SLOT naming every slot that is not fresh and why, or GLT_OK; notes each record's seq in s->seen. */
static glt_status check_fresh(glt_slots *s, uint64_t reads) {
    char msg[1400];
    size_t used = 0;
    int bad = 0;
    for (unsigned i = 0; i < s->g.count; ++i) {
        int pid = 0;
        char corrupt[320]; /* what is wrong with the record, or why else it is stale, when the state says too little */
        glt_slot_state st = state_of(s, i, reads, &pid, &s->seen[i], corrupt, sizeof corrupt);
        if (pid) s->ever[i] = 1;
        if (st == GLT_SLOT_FRESH) continue;
        if (++bad > 6) continue;
        char why[340];
        if (s->tamper[0] && pid > 0 && st == GLT_SLOT_STALE)
            snprintf(why, sizeof why, "its writer (pid %d) last wrote by the changed read count: write again", pid);
        else if (corrupt[0] && st != GLT_SLOT_WRITER_GONE)
            snprintf(why, sizeof why, "%s", corrupt);
        else if (st == GLT_SLOT_WRITING)
            snprintf(why, sizeof why, "a write by pid %d is under way", pid);
        else if (st == GLT_SLOT_WRITER_GONE)
            snprintf(why, sizeof why, "its writer (pid %d) has exited", pid);
        else if (pid)
            snprintf(why, sizeof why, "its writer (pid %d) has not written since the last read", pid);
        else
            snprintf(why, sizeof why, "never written");
        if (used < sizeof msg)
            used += (size_t)snprintf(msg + used, sizeof msg - used, "%sslot %u: %s", bad > 1 ? "; " : "", i, why);
    }
    if (!bad) return GLT_OK;
    if (s->tamper[0])
        return glt_fail(GLT_STALE_SLOT, "%s; %d of %u shared slots are not fresh (%s%s)", s->tamper, bad, s->g.count,
                        msg, bad > 6 ? "; ..." : "");
    return glt_fail(GLT_STALE_SLOT,
                    "%d of %u shared slots were not written since the last read (%s%s); every worker must write its "
                    "slot once per step before the trainer reads (restart the workers that died; the other slots' "
                    "images are intact)",
                    bad, s->g.count, msg, bad > 6 ? "; ..." : "");
}

/* Step 2/3 of the protocol (slots_shared.h): GLT_STALE_SLOT naming the first slot whose record's seq moved since
 * check_fresh (a write began meanwhile and may be in the set being read), or GLT_OK. */
static glt_status check_unmoved(glt_slots *s) {
    for (unsigned i = 0; i < s->g.count; ++i) {
        glt_slot_record *r = record_of(s, i);
        uint64_t seq = atomic_load_explicit(&r->seq, memory_order_seq_cst);
        if (seq == s->seen[i]) continue;
        int pid = atomic_load_explicit(&r->writer_pid, memory_order_relaxed);
        return glt_fail(GLT_STALE_SLOT,
                        "slot %u: its worker (pid %d) began another write while the trainer read the slots, into the "
                        "images being read; the read is refused rather than return a frame mixing two writes (write "
                        "each slot once per step, before the read; that write, once complete, is fresh for the next "
                        "read)",
                        i, pid > 0 && pid <= PID_LIMIT ? pid : 0);
    }
    return GLT_OK;
}
static glt_status copy_cuda(glt_slots *s, unsigned set, const glt_read_dest *d, int flip, void *stream) {
    const glt_slots_geometry *h = &s->g;
    glt_gather_item local[64];
    glt_gather_item *items = h->count <= 64 ? local : malloc(sizeof *items * h->count);
    if (!items) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    for (unsigned i = 0; i < h->count; ++i) {
        items[i].texture = s->textures[set * h->count + i];
        items[i].x0 = 0;
        items[i].y0 = 0;
        items[i].dst = (char *)d->data + d->strides.image * i;
    }
    glt_gather_spec sp;
    sp.array_channels = s->fmt->channels;
    sp.elem_bytes = (int)glt_dtype_size(s->fmt->dtype);
    sp.array_is_float = s->fmt->dtype == GLT_DTYPE_FLOAT16 || s->fmt->dtype == GLT_DTYPE_FLOAT32;
    sp.kind = d->spec.kind;
    sp.out_type = d->spec.out_type;
    sp.out_channels = d->spec.channels;
    for (int c = 0; c < 4; ++c) sp.map[c] = d->spec.map[c];
    sp.chw = d->spec.order == GLT_LAYOUT_CHW;
    sp.width = h->width;
    sp.height = h->height;
    sp.flip = !flip; /* slots hold rows top first; the kernel's flip reverses the stored order */
    sp.pitch = d->strides.pitch;
    sp.plane = d->strides.plane;
    void *events[2] = {d->ready_event, s->set_done[set]};
    glt_status st = glt_cuda_slots_gather(s->cuda_device, items, (int)h->count, &sp, stream, events, 2);
    if (items != local) free(items);
    if (st == GLT_OK) s->set_pending[set] = 1;
    return st;
}

static void copy_host(glt_slots *s, unsigned set, const glt_read_dest *d, int flip) {
    const glt_slots_geometry *h = &s->g;
    const char *base = s->pixels;
    ptrdiff_t pitch = (ptrdiff_t)h->row_pitch;
    for (unsigned i = 0; i < h->count; ++i) {
        const char *slot = base + glt_slot_offset(h, set, i);
        /* Slots hold rows top first: GL's bottom-up order (flip 0) reads them backwards. */
        const char *first = flip ? slot : slot + pitch * (h->height - 1);
        glt_convert_host(s->fmt, &d->spec, first, flip ? pitch : -pitch, h->width, h->height,
                         (char *)d->data + d->strides.image * i, d->strides.pitch, d->strides.plane);
    }
}

/* The workers may enter `set` once the copy that last read it is complete. */
static void count_wait(glt_slots *s, const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s->read_waits++;
    s->read_wait_us += (double)(t1.tv_sec - t0->tv_sec) * 1e6 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e3;
}

/* GLT_SLOTS_BUSY when a live view holds the set the workers would write next (checked before a read changes
 * anything). */
static glt_status check_not_viewed(glt_slots *s, unsigned set) {
    pthread_mutex_lock(&s->lock);
    int busy = s->view[set] != NULL;
    pthread_mutex_unlock(&s->lock);
    if (!busy) return GLT_OK;
    unsigned sets = s->g.buffers;
    return glt_fail(GLT_SLOTS_BUSY,
                    "this read would let the workers overwrite the %u shared slots of set %u, which a zero-copy view "
                    "(read(copy=False) / glt_slots_read_view) from %u reads ago still holds: with %u sets, a read "
                    "finds at most %u earlier view(s) alive, so at most %u views may be alive at once; drop the "
                    "older view, copy what you keep (.clone()), or create the slots with more buffers (at most 3)",
                    s->g.count, set, sets - 1, sets, sets - 2, sets - 1);
}

/* The workers may enter `set` once every read of it is complete: the copy that last read it, and the work the
 * consumers of a view of it queued before the view died. */
static glt_status release_set(glt_slots *s, unsigned set) {
    pthread_mutex_lock(&s->lock);
    glt_block *dead = s->retired[set];
    s->retired[set] = NULL;
    pthread_mutex_unlock(&s->lock);
    if (dead) {
        int busy = !glt_block_idle(dead); /* counted: a wait here blocks the trainer for the GPU */
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        glt_block_settle(dead);
        if (busy) count_wait(s, &t0);
        s->spare[set] = dead; /* only this thread (the reader) touches spare[] */
    }
    if (s->backend != GLT_BACKEND_CUDA || !s->set_pending[set]) return GLT_OK;
    glt_status st = GLT_OK;
    if (!glt_cuda_event_done(s->cuda_device, s->set_done[set])) {
        /* Counted: a read that waits here blocks the trainer for the GPU (SharedSlots.read_waits says how often). */
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = glt_cuda_event_sync(s->cuda_device, s->set_done[set]);
        count_wait(s, &t0);
    }
    if (st == GLT_OK) s->set_pending[set] = 0;
    return st;
}

/* The control page holds what the trainer published (its read count, not closed) between reads. Where the kernel
 * could not seal it against other processes' writes (before Linux 5.1), one that maps its descriptor itself may
 * have changed it, or punched a hole in it (it then reads as zeros): the trainer puts its own values back, so that
 * the workers' next writes go where the next read looks, and s->tamper says what it found, for the error of a read
 * that finds slots written by the changed values. */
static void check_control(glt_slots *s) {
    s->tamper[0] = '\0';
    uint64_t reads = atomic_load_explicit(&s->h->reads, memory_order_seq_cst);
    uint32_t closed = atomic_load_explicit(&s->h->closed, memory_order_relaxed);
    uint32_t marker = atomic_load_explicit(&s->h->marker, memory_order_relaxed);
    if (reads == s->reads && !closed && marker == GLT_SLOTS_CONTROL_MARKER) return;
    /* A punched page reads as zeros, like one zeros were written over; it is still a hole only until a process
     * touches it again (a worker's write does). */
    const char *what = glt_memfd_hole_at(s->control_fd, 0) ? "punched out (fallocate PUNCH_HOLE: it read as zeros)"
                       : !marker && !reads && !closed ? "cleared (every byte read as zero: a hole punched in it with "
                                                        "fallocate PUNCH_HOLE, or zeros written over it)"
                                                      : "overwritten";
    snprintf(s->tamper, sizeof s->tamper,
             "the slots' control page was %s by a process holding its descriptor (read count %llu where the trainer's "
             "is %llu%s); the trainer restored it, and the workers' writes made by it went to other images than the "
             "next read's",
             what, (unsigned long long)reads, (unsigned long long)s->reads, closed ? ", closed flag set" : "");
    atomic_store_explicit(&s->h->marker, GLT_SLOTS_CONTROL_MARKER, memory_order_relaxed);
    atomic_store_explicit(&s->h->closed, 0u, memory_order_relaxed);
    atomic_store_explicit(&s->h->reads, s->reads, memory_order_seq_cst);
}

/* The read path's prepare step (read_path.c): the trainer's process, its stream, every slot of the set the
 * workers finished (c->note: the read count, whose set is read). */
static glt_status prepare_read(glt_slots *s, glt_read_call *c) {
    if (!s) return glt_fail(GLT_INVALID_ARGUMENT, "glt_slots_read: slots is NULL");
    const glt_slots_geometry *g = &s->g;
    if (s->pid != (int)getpid())
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "shared slots are read by the process that created them (pid %d), not by this one (pid %d, a "
                        "forked copy): workers write, the trainer reads",
                        s->pid, (int)getpid());
    if (s->backend == GLT_BACKEND_CUDA) {
        c->stream = c->opts.cuda_stream ? c->opts.cuda_stream : glt_pool_stream(s->pool);
        if (c->opts.cuda_stream) {
            glt_status st = glt_cuda_check_stream(c->opts.cuda_stream, s->cuda_device);
            if (st != GLT_OK) return st;
        }
    }
    uint64_t reads = s->reads;
    check_control(s);
    glt_status st = check_fresh(s, reads);
    if (st == GLT_OK) st = check_not_viewed(s, (unsigned)((reads + 1) % g->buffers));
    if (st != GLT_OK) return st;
    c->note = reads;
    c->fmt = s->fmt;
    c->pool = s->pool;
    snprintf(c->what, sizeof c->what, "shared slots");
    glt_dest_shape shape = {s->backend == GLT_BACKEND_CUDA ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST, s->cuda_device, NULL,
                            (int)g->count, g->height, g->width};
    c->shape = shape;
    return GLT_OK;
}

/* Step 2 of the protocol (slots_shared.h), buffers >= 2: lets the workers into the next set and claims set
 * reads % buffers from them; refused (nothing changed) when a write began since check_fresh. */
static glt_status claim_set(glt_slots *s, uint64_t reads) {
    glt_status st = release_set(s, (unsigned)((reads + 1) % s->g.buffers));
    if (st != GLT_OK) return st;
    atomic_store_explicit(&s->h->reads, reads + 1, memory_order_seq_cst);
    st = check_unmoved(s);
    if (st != GLT_OK) atomic_store_explicit(&s->h->reads, reads, memory_order_seq_cst);
    return st;
}

static glt_status copy_read(void *obj, const glt_read_call *c, const glt_read_dest *d) {
    glt_slots *s = obj;
    uint64_t reads = c->note;
    unsigned sets = s->g.buffers, set = (unsigned)(reads % sets);
    glt_status st = sets > 1 ? claim_set(s, reads) : GLT_OK;
    if (st != GLT_OK) return st;
    if (s->backend == GLT_BACKEND_CUDA)
        st = copy_cuda(s, set, d, c->opts.flip != 0, c->stream);
    else
        copy_host(s, set, d, c->opts.flip != 0);
    if (sets == 1) {
        /* Step 3: the workers' next set is this one; the copy must be complete (release_set waits for it on the
         * GPU) and no write may have begun during it. */
        if (st == GLT_OK) st = release_set(s, 0);
        if (st == GLT_OK) st = check_unmoved(s);
        if (st == GLT_OK) atomic_store_explicit(&s->h->reads, reads + 1, memory_order_seq_cst);
    } else if (st != GLT_OK) {
        /* Nothing was read: the workers go back to this read's set (writes begun meanwhile are stale). */
        atomic_store_explicit(&s->h->reads, reads, memory_order_seq_cst);
    }
    if (st == GLT_OK) s->reads = reads + 1;
    return st;
}

glt_status glt_slots_read(glt_slots *s, const glt_read_options *opts, glt_frame **out) {
    glt_read_call c;
    glt_status st = glt_read_begin_frame(&c, "glt_slots_read", opts, out);
    return glt_read_finish(&c, st == GLT_OK ? prepare_read(s, &c) : st, copy_read, s);
}

glt_status glt_slots_read_into(glt_slots *s, const glt_read_options *opts, const glt_buffer_view *dst) {
    glt_read_call c;
    glt_status st = glt_read_begin_into(&c, "glt_slots_read_into", opts, dst);
    return glt_read_finish(&c, st == GLT_OK ? prepare_read(s, &c) : st, copy_read, s);
}

/* A dead view's block, from whatever thread dropped its frame: the set it held waits for its consumers' events
 * (release_set) before the workers may enter it again. */
static void view_died(void *ctx, glt_block *b) {
    glt_slots *s = ctx;
    pthread_mutex_lock(&s->lock);
    for (int k = 0; k < 3; ++k)
        if (s->view[k] == b) {
            s->view[k] = NULL;
            s->retired[k] = b;
        }
    pthread_mutex_unlock(&s->lock);
    slots_unref(s);
}

/* A view hands out the slots as stored: their format's channels and dtype, HWC, top row first. */
static glt_status check_view_options(const glt_slots *s, const glt_read_options *opts, const glt_out_spec *spec) {
    const char *why = !opts->flip                                ? "flip=False (GL's bottom-up rows)"
                      : spec->order != GLT_LAYOUT_HWC           ? "layout='chw'"
                      : spec->dtype != s->fmt->dtype            ? "another dtype"
                      : !spec->raw || spec->channels != s->fmt->channels ? "other channels"
                                                                          : NULL;
    if (!why) return GLT_OK;
    return glt_fail(GLT_INVALID_ARGUMENT,
                    "a zero-copy read of shared slots hands out the slots as stored (%s, %d channels, %s, HWC, top "
                    "row first) and cannot convert: %s asks for a copy; read with copy=True (glt_slots_read), which "
                    "fuses the conversion into its copy",
                    s->fmt->name, s->fmt->channels, glt_dtype_name(s->fmt->dtype), why);
}

glt_status glt_slots_read_view(glt_slots *s, const glt_read_options *opts, glt_frame **out) {
    glt_read_call c;
    glt_status st = glt_read_begin_frame(&c, "glt_slots_read_view", opts, out);
    if (st == GLT_OK) st = prepare_read(s, &c);
    if (st != GLT_OK) return st;
    const glt_slots_geometry *g = &s->g;
    if (g->buffers < 2)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "a zero-copy read needs slots with buffers=2 or 3: with one set the workers' next step would "
                        "overwrite the view (these slots have buffers=1; read with copy=True)");
    glt_out_spec spec;
    st = glt_out_spec_make(s->fmt, &c.opts, c.what, &spec);
    if (st == GLT_OK) st = check_view_options(s, &c.opts, &spec);
    if (st != GLT_OK) return st;
    uint64_t reads = c.note;
    unsigned set = (unsigned)(reads % g->buffers);
    /* Claimed first: from here on no worker writes this set until a later read lets them in again. */
    st = claim_set(s, reads);
    if (st != GLT_OK) return st;
    char *base = s->backend == GLT_BACKEND_CUDA ? glt_cuda_vmm_ptr(s->vmm) : s->pixels;
    glt_block *b = s->spare[set]; /* the set's last view block, settled: its events are reused */
    s->spare[set] = NULL;
    if (!b)
        st = glt_block_wrap(s->pool, base + glt_slot_offset(g, set, 0), (size_t)g->count * g->slot_bytes, view_died,
                            s, &b);
    if (st != GLT_OK) {
        atomic_store_explicit(&s->h->reads, reads, memory_order_seq_cst); /* nothing read: the set goes back */
        return st;
    }
    atomic_fetch_add(&s->refs, 1); /* dropped by view_died */
    pthread_mutex_lock(&s->lock);
    s->view[set] = b;
    pthread_mutex_unlock(&s->lock);
    glt_frame *f = NULL;
    st = glt_frame_wrap(b, c.stream, c.shape.memory, c.shape.cuda_device, s->fmt, (int)g->count, g->height, g->width,
                        g->row_pitch, g->slot_bytes, &f);
    if (st != GLT_OK) {
        glt_pool_give_back(b); /* as if its frame died: the set goes back to the workers' rotation */
        atomic_store_explicit(&s->h->reads, reads, memory_order_seq_cst);
        return st;
    }
    s->reads = reads + 1;
    *out = f;
    return GLT_OK;
}
