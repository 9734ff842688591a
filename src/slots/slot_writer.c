/*
 * Shared slots, a worker's side: write what this process rendered into its slot of the trainer's memory,
 * with GL alone. No CUDA call is made here, so a worker never creates a CUDA context (hundreds of MiB of
 * device memory each, and a GL->CUDA switch per step that would queue behind every other worker's).
 *
 * CUDA backend: the trainer's device memory is imported once (GL_EXT_memory_object_fd) as a buffer object;
 * each write packs the source image into the imported buffer at the slot's offset on the GPU and waits on a
 * fence, so that when write() returns the pixels are in the trainer's memory and the worker's usual reply is the
 * trainer's signal. The pack is a compute shader where GL 4.3 offers one (slot_pack.c says why), otherwise
 * glReadPixels into a buffer of the writer's own and glCopyBufferSubData into the slot. CPU backend: glReadPixels
 * into the shared host memory (or, GLTENSOR_SLOTS_WRITE=shader, the shader into a buffer of ours, then read back).
 *
 * Slots hold rows top row first, so that the trainer can hand a set out without a copy (torch refuses the
 * negative strides a bottom-up view would need). The shader writes rows in that order; glReadPixels into CUDA
 * slots reads a flipped blit of the source (a renderbuffer of the slot's format, kept between writes), as the
 * shader write's own blit does the format conversion; glReadPixels into host slots reverses the rows on the CPU. Multisampled sources are resolved by a blit into a renderbuffer
 * kept between writes.
 */
#include "slots/slots_shared.h"
#include "convert/convert.h"
#include "device/device.h"
#include "objects/objects.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


/* How a write moves the pixels (GLTENSOR_SLOTS_WRITE; auto picks shader where possible, else copy). */
typedef enum write_mode {
    WRITE_SHADER, /* blit + compute shader straight into the slot (CPU backend: into `stage`, then read back) */
    WRITE_COPY,   /* glReadPixels into `stage`, glCopyBufferSubData into the slot (CPU backend: into host memory) */
    WRITE_DIRECT, /* glReadPixels straight into the imported memory: a diagnostic, wrong on NVIDIA's driver 580 */
} write_mode;

struct glt_slot_writer {
    const glt_slots_control *h; /* the control memory's page 0 (read count, closed flag), mapped read-only */
    glt_slots_header hdr;      /* the sealed header, read once at attach */
    glt_slots_geometry g;      /* its geometry, checked at attach */
    glt_slot_record *rec;      /* this slot's record: the one page of the control memory mapped writable */
    char *pixels[3];           /* CPU backend: this slot of each set, mapped writable (nothing else is) */
    int trainer_pid;
    uint64_t trainer_start;
    int trainer_fd;            /* a pidfd of the trainer; -1 where the kernel has none (then: kill and /proc) */
    int trainer_stat_fd;       /* the trainer's /proc/<pid>/stat, open; -1 where /proc is not mounted */
    double trainer_checked;    /* no pidfd: when /proc last said the trainer runs (CLOCK_MONOTONIC, s) */
    uint64_t start;            /* this process's start time, written into the record with its pid */
    unsigned slot;
    const glt_format *fmt;
    glt_backend backend;
    glt_gl_context_id gl_context;
    GLuint memory_object, buffer; /* CUDA backend: the imported memory */
    GLuint read_fbo;              /* the source attached for glReadPixels */
    GLuint resolve_fbo, resolve_rb; /* multisampled sources */
    GLuint flip_fbo, flip_rb;       /* glReadPixels writes: the source flipped, rows top first */
    /* WRITE_COPY: glReadPixels packs into this buffer of our own, which is then copied into the slot. Packing
     * straight into the imported memory at the slot's offset was wrong on an H100 (driver 580): per step only
     * one slot of three held its image, the others 99.6% other bytes; the copy made every slot exact
     * (tools/slots_probe.py; GLTENSOR_SLOTS_WRITE=direct reproduces it). WRITE_SHADER on the CPU backend packs
     * into it too. */
    GLuint stage;
    write_mode mode;
    glt_slot_packer *packer; /* WRITE_SHADER */
    uint64_t writes;
    uint64_t direct_writes; /* shader writes that read the caller's texture itself (no blit) */
    /* One writer per slot (slot_owner.c): the process that holds the slot through this writer, and its word. A forked
     * child's copy finds another pid here and takes the slot for itself before it writes. */
    int pid;
    uint64_t owner;
    uint64_t slot_dev, slot_ino; /* the slot's memfd: this process's registry of attached writers */
    int registered;
    atomic_int busy; /* a write in progress: the writer is used by one thread at a time */
};

static void unmap_all(glt_slot_writer *w) {
    if (w->h) munmap((void *)w->h, (size_t)w->g.page);
    if (w->rec) munmap(w->rec, (size_t)w->g.page);
    for (int k = 0; k < 3; ++k)
        if (w->pixels[k]) munmap(w->pixels[k], (size_t)w->g.slot_bytes);
    w->h = NULL;
    w->rec = NULL;
    memset(w->pixels, 0, sizeof w->pixels);
}

/* The slot a memfd was made for, from its name (gltensor-slot-<i>): -1 where it is not a slot's memfd, -2 where this
 * process cannot tell (no /proc). A handle's descriptor writes its own slot only: a slot index that differs from the
 * memory's is refused, not written into the wrong record. */
static int slot_of_memfd(int fd) {
    char path[64], target[128];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0) return -2;
    target[n] = '\0';
    static const char prefix[] = "/memfd:gltensor-slot-";
    unsigned slot = 0;
    if (strncmp(target, prefix, sizeof prefix - 1) || sscanf(target + sizeof prefix - 1, "%u", &slot) != 1) return -1;
    return slot <= GLT_SLOTS_MAX_COUNT ? (int)slot : -1;
}

/* Reads the sealed header (geometry_fd) and checks its geometry, checks the seals and sizes of the control page
 * (control_fd) and of the slot's own memfd (slot_fd), then maps what this worker may see (the control page,
 * read-only) and write (its record and, on the CPU backend, its image of each set): nothing is mapped or placed by
 * a geometry the trainer could not have made, or in a file another process could resize. */
static glt_status map_control(glt_slot_writer *w, int geometry_fd, int fd, int slot_fd, int slot) {
    glt_status status = glt_slots_header_read(geometry_fd, &w->hdr);
    if (status != GLT_OK) return status;
    const char *bad = glt_slots_geometry_check(&w->hdr.geo, glt_page_size());
    if (bad)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "the shared slots' geometry (descriptor %d) is not one a trainer of this gltensor makes: %s; "
                        "pass the descriptors of one SharedSlots",
                        geometry_fd, bad);
    w->g = w->hdr.geo;
    w->trainer_pid = w->hdr.trainer_pid;
    w->trainer_start = w->hdr.trainer_start;
    if (slot < 0 || (unsigned)slot >= w->g.count)
        return glt_fail(GLT_INVALID_ARGUMENT, "slot %d does not exist: the trainer made %u slots (0 to %u)", slot,
                        w->g.count, w->g.count - 1);
    if (slot_fd < 0)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "glt_slot_writer_create: desc.slot_fd is not set: a writer writes the memory of its own slot; "
                        "pass glt_slots_export_slot's descriptor of slot %d",
                        slot);
    int made_for = slot_of_memfd(slot_fd);
    if (made_for == -1 || (made_for >= 0 && made_for != slot)) {
        char whose[48] = "no shared slot's memory";
        if (made_for >= 0) snprintf(whose, sizeof whose, "slot %d's memory", made_for);
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "descriptor %d is %s, not slot %d's: a slot's descriptor writes that slot only; pass the "
                        "handle of slot %d (SharedSlots.handle(%d)), or glt_slots_export_slot's descriptor of it",
                        slot_fd, whose, slot, slot, slot);
    }
    status = glt_memfd_check(fd, "control page", w->g.control_seals, w->g.control_bytes);
    if (status == GLT_OK) {
        char what[48];
        snprintf(what, sizeof what, "slot %d's memory", slot);
        status = glt_memfd_check(slot_fd, what, GLT_SEALS_SIZE, w->g.slot_file_bytes);
    }
    if (status != GLT_OK) return status;
    struct stat st;
    if (fstat(slot_fd, &st) == 0) {
        w->slot_dev = (uint64_t)st.st_dev;
        w->slot_ino = (uint64_t)st.st_ino;
    }
    const char *what = "control page";
    /* The control page through a read-only descriptor of the same memfd: a mapping this process cannot make writable
     * (mprotect refuses with EACCES), not just one it did not (sealed F_SEAL_FUTURE_WRITE, no process can anyway). */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int ro = open(path, O_RDONLY | O_CLOEXEC);
    void *p = mmap(NULL, (size_t)w->g.page, PROT_READ, MAP_SHARED, ro >= 0 ? ro : fd, 0);
    if (ro >= 0) close(ro);
    if (p != MAP_FAILED) {
        w->h = p;
        what = "record";
        p = mmap(NULL, (size_t)w->g.page, PROT_READ | PROT_WRITE, MAP_SHARED, slot_fd, 0);
    }
    if (p != MAP_FAILED) {
        w->rec = p;
        what = "pixels";
        for (unsigned set = 0; set < w->g.buffers && w->g.backend == GLT_BACKEND_CPU && p != MAP_FAILED; ++set) {
            p = mmap(NULL, (size_t)w->g.slot_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, slot_fd,
                     (off_t)(w->g.pixel_offset + set * w->g.slot_bytes));
            if (p != MAP_FAILED) w->pixels[set] = p;
        }
    }
    if (p == MAP_FAILED) {
        int err = errno;
        unmap_all(w);
        return glt_fail(GLT_OUT_OF_MEMORY, "mapping the %s of shared slot %d failed (%s)", what, slot, strerror(err));
    }
    return GLT_OK;
}

/* Takes the slot for this process (slot_owner.c): at attach, and in a forked child at its first write through the
 * writer it inherited. */
static glt_status take_slot(glt_slot_writer *w, int inherited) {
    int pid = (int)getpid();
    uint64_t start = glt_process_start_time(pid);
    uint64_t word = glt_slot_owner_word(pid, start);
    if (!inherited) {
        if (!glt_slot_owner_register(w->slot_dev, w->slot_ino))
            return glt_fail(GLT_SLOTS_BUSY,
                            "shared slot %u already has a writer in this process (pid %d): one writer writes each slot "
                            "(two would tear its images); use that one, or close it first",
                            w->slot, pid);
        w->registered = 1;
    }
    glt_status st = glt_slot_owner_take(w->rec, w->slot, word, inherited);
    if (st != GLT_OK) return st;
    w->pid = pid;
    w->start = start;
    w->owner = word;
    return GLT_OK;
}

static int has_extension(const glt_gl *gl, const char *name) {
    GLint n = 0;
    gl->GetIntegerv(GL_NUM_EXTENSIONS, &n);
    for (GLint i = 0; i < n; ++i) {
        const GLubyte *e = gl->GetStringi(GL_EXTENSIONS, (GLuint)i);
        if (e && !strcmp((const char *)e, name)) return 1;
    }
    return 0;
}

static void uuid_text(const unsigned char u[16], char out[40]) {
    for (int i = 0; i < 16; ++i) snprintf(out + 2 * i, 3, "%02x", u[i]);
}

/* The trainer's GPU must be the one this GL context runs on: GL can import only its own device's memory. */
static glt_status check_device(const glt_gl *gl, const glt_slots_header *h) {
    GLint n = 0;
    gl->GetIntegerv(GL_NUM_DEVICE_UUIDS_EXT, &n);
    const char *renderer = (const char *)gl->GetString(GL_RENDERER);
    unsigned char uuid[GL_UUID_SIZE_EXT];
    for (GLint i = 0; i < n; ++i) {
        memset(uuid, 0, sizeof uuid);
        gl->GetUnsignedBytei_vEXT(GL_DEVICE_UUID_EXT, (GLuint)i, uuid);
        if (!memcmp(uuid, h->device_uuid, sizeof uuid)) return GLT_OK;
    }
    char want[40], got[40] = "none";
    uuid_text(h->device_uuid, want);
    if (n > 0) uuid_text(uuid, got);
    return glt_fail(GLT_WRONG_DEVICE,
                    "the shared slots live on the trainer's CUDA device %d (%s, UUID %s), but this worker's GL "
                    "context runs on another GPU (%s, UUID %s): GL can write only into its own GPU's memory; make "
                    "the worker's context on the trainer's GPU (gltensor.Context.headless(cuda_device=...) with the "
                    "worker's ordinal of that GPU, or the engine's EGL device index from gltensor.egl_device_index)",
                    h->cuda_device, h->device_name, want, renderer ? renderer : "unknown renderer", got);
}

/* Whether the current GL context can write CUDA shared slots (GL_EXT_memory_object_fd and fences). */
static glt_status gl_supported(const glt_gl *gl) {
    const char *missing = !gl->CreateMemoryObjectsEXT || !gl->ImportMemoryFdEXT || !gl->BufferStorageMemEXT ||
                                  !gl->DeleteMemoryObjectsEXT || !gl->GetUnsignedBytei_vEXT
                              ? "entry points"
                          : !gl->GetStringi || !gl->FenceSync || !gl->ClientWaitSync || !gl->DeleteSync ? "GL 3.2"
                          : !has_extension(gl, "GL_EXT_memory_object_fd") ? "extension"
                                                                          : NULL;
    if (missing)
        return glt_fail(GLT_UNSUPPORTED,
                        "this GL driver (%s) lacks GL_EXT_memory_object_fd (%s missing), which a worker needs to "
                        "write into the trainer's CUDA memory; run the worker on NVIDIA's GL (EGL vendor "
                        "libEGL_nvidia), or create the slots with backend='cpu' (shared host memory)",
                        (const char *)gl->GetString(GL_RENDERER), missing);
    return GLT_OK;
}

glt_status glt_slot_writer_gl_supported(void) {
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    if (glt_current_gl_context().api == GLT_API_NONE)
        return glt_fail(GLT_NO_CONTEXT, "no OpenGL context is current in this thread");
    return gl_supported(gl);
}

static glt_status import_memory(glt_slot_writer *w, const glt_gl *gl, int memory_fd) {
    glt_status support = gl_supported(gl);
    if (support != GLT_OK) return support;
    glt_status st = check_device(gl, &w->hdr);
    if (st != GLT_OK) return st;
    if (memory_fd < 0)
        return glt_fail(GLT_INVALID_ARGUMENT, "the slots are CUDA memory but no memory descriptor was given");
    int fd = fcntl(memory_fd, F_DUPFD_CLOEXEC, 0); /* GL takes ownership of the descriptor it imports */
    if (fd < 0)
        return glt_fail(GLT_INVALID_ARGUMENT, "duplicating the slots' memory descriptor %d failed (%s)", memory_fd,
                        strerror(errno));
    glt_gl_drain_errors(gl);
    gl->CreateMemoryObjectsEXT(1, &w->memory_object);
    gl->ImportMemoryFdEXT(w->memory_object, (GLuint64)w->g.memory_bytes, GL_HANDLE_TYPE_OPAQUE_FD_EXT, fd);
    GLenum err = gl->GetError();
    if (err != GL_NO_ERROR) {
        close(fd); /* not imported: still ours */
        return glt_fail(GLT_GL_ERROR,
                        "glImportMemoryFdEXT of the shared slots (%llu bytes) failed with %s; the trainer and this "
                        "worker must use the same GPU and driver",
                        (unsigned long long)w->g.memory_bytes, glt_gl_error_name(err));
    }
    GLint prev = 0;
    gl->GetIntegerv(GL_PIXEL_PACK_BUFFER_BINDING, &prev);
    gl->GenBuffers(1, &w->buffer);
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, w->buffer);
    gl->BufferStorageMemEXT(GL_PIXEL_PACK_BUFFER, (GLsizeiptr)w->g.memory_bytes, w->memory_object, 0);
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, (GLuint)prev);
    err = gl->GetError();
    if (err != GL_NO_ERROR)
        return glt_fail(GLT_GL_ERROR, "glBufferStorageMemEXT over the imported slots failed with %s",
                        glt_gl_error_name(err));
    return GLT_OK;
}

static void release_gl(glt_slot_writer *w) {
    const glt_gl *gl = glt_gl_load();
    if (!gl) return;
    if (w->read_fbo) gl->DeleteFramebuffers(1, &w->read_fbo);
    if (w->resolve_fbo) gl->DeleteFramebuffers(1, &w->resolve_fbo);
    if (w->resolve_rb) gl->DeleteRenderbuffers(1, &w->resolve_rb);
    if (w->flip_fbo) gl->DeleteFramebuffers(1, &w->flip_fbo);
    if (w->flip_rb) gl->DeleteRenderbuffers(1, &w->flip_rb);
    if (w->stage) gl->DeleteBuffers(1, &w->stage);
    glt_slot_packer_destroy(w->packer);
    w->packer = NULL;
    if (w->buffer) gl->DeleteBuffers(1, &w->buffer);
    if (w->memory_object && gl->DeleteMemoryObjectsEXT) gl->DeleteMemoryObjectsEXT(1, &w->memory_object);
    w->read_fbo = w->resolve_fbo = w->resolve_rb = w->buffer = w->memory_object = w->stage = 0;
    w->flip_fbo = w->flip_rb = 0;
}

/* The write mode, and the shader packer where it is used. `auto` takes the shader for CUDA slots wherever the
 * context has GL 4.3 compute, and glReadPixels straight into the host memory for CPU slots. */
static glt_status choose_mode(glt_slot_writer *w, const glt_gl *gl) {
    int choice = glt_env_choice(GLT_ENV_SLOTS_WRITE); /* auto, shader, copy, direct */
    if (choice == 2) w->mode = WRITE_COPY;
    else if (choice == 3) w->mode = WRITE_DIRECT;
    else if (choice == 1) w->mode = WRITE_SHADER;
    else
        w->mode = w->backend == GLT_BACKEND_CUDA && glt_slot_packer_possible(gl, w->fmt) ? WRITE_SHADER : WRITE_COPY;
    /* A CPU-slot writer without a GL context writes host arrays only (GL writes attach again in a context). */
    if (w->gl_context.api == GLT_API_NONE) w->mode = WRITE_COPY;
    if (w->mode != WRITE_SHADER) return GLT_OK;
    return glt_slot_packer_create(w->fmt, w->g.width, w->g.height, &w->packer);
}

glt_status glt_slot_writer_create(const glt_slot_writer_desc *d, glt_slot_writer **out) {
    if (!d || !out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_slot_writer_create: NULL argument");
    *out = NULL;
    GLT_CHECK_STRUCT_SIZE(d, glt_slot_writer_desc);
    glt_status st = glt_egl_fork_check();
    if (st != GLT_OK) return st;
    glt_slot_writer *w = calloc(1, sizeof *w);
    if (!w) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    w->trainer_fd = -1;
    w->trainer_stat_fd = -1;
    int geometry_fd = d->geometry_fd;
    st = geometry_fd < 0 ? glt_fail(GLT_INVALID_ARGUMENT,
                                    "glt_slot_writer_create: desc.geometry_fd is not set: a writer attaches by the "
                                    "slots' sealed geometry; pass glt_slots_export_geometry's descriptor with "
                                    "desc.size = sizeof(glt_slot_writer_desc) (GLT_SLOT_WRITER_DESC_INIT)")
                         : map_control(w, geometry_fd, d->control_fd, d->slot_fd, d->slot);
    if (st != GLT_OK) {
        free(w);
        return st;
    }
    w->slot = (unsigned)d->slot;
    st = take_slot(w, 0);
    if (st != GLT_OK) {
        glt_slot_writer_destroy(w);
        return st;
    }
    w->backend = (glt_backend)w->g.backend;
    w->fmt = glt_format_find(w->g.gl_internal_format);
    if (!glt_process_running(w->trainer_pid, w->trainer_start)) {
        st = glt_fail(GLT_CLOSED, "attaching to shared slot %d: the trainer process (pid %d) has exited; stop this "
                                  "worker", d->slot, w->trainer_pid);
        glt_slot_writer_destroy(w);
        return st;
    }
    w->trainer_fd = glt_process_watch(w->trainer_pid, w->trainer_start);
    w->trainer_stat_fd = glt_process_stat_open(w->trainer_pid, w->trainer_start);
    const glt_gl *gl = glt_gl_load();
    if (!gl || !w->fmt) {
        glt_slot_writer_destroy(w);
        return gl ? glt_fail(GLT_INVALID_ARGUMENT, "the slots' format is unknown to this gltensor") : GLT_GL_ERROR;
    }
    w->gl_context = glt_current_gl_context();
    /* The CPU backend's slots are host memory: a writer of host images (environments whose observations are
     * arrays) needs no GL context. Its GL writes then refuse with GLT_WRONG_CONTEXT until it is attached again
     * where a context is current (SlotClient.write does that). */
    if (w->gl_context.api == GLT_API_NONE && w->backend == GLT_BACKEND_CUDA) {
        glt_slot_writer_destroy(w);
        return glt_fail(GLT_NO_CONTEXT,
                        "attaching to shared slot %d: no OpenGL context is current in this thread; attach in the "
                        "worker, after its engine made its context current",
                        d->slot);
    }
    st = glt_env_check();
    if (st == GLT_OK && w->backend == GLT_BACKEND_CUDA) st = import_memory(w, gl, d->memory_fd);
    if (st == GLT_OK) st = choose_mode(w, gl);
    if (st != GLT_OK) {
        glt_slot_writer_destroy(w);
        return st;
    }
    *out = w;
    return GLT_OK;
}

void glt_slot_writer_destroy(glt_slot_writer *w) {
    if (!w) return;
    if (w->read_fbo || w->resolve_fbo || w->resolve_rb || w->flip_fbo || w->flip_rb || w->buffer || w->memory_object ||
        w->stage || w->packer) {
        glt_gl_context_saved saved;
        /* Release in the writer's own context; where it is gone, the driver freed the objects with it. */
        if (glt_gl_context_enter(w->gl_context, &saved)) release_gl(w);
        glt_gl_context_leave(&saved);
    }
    /* A forked child's copy of a writer its parent holds releases nothing of the parent's. */
    if (w->rec && w->owner && w->pid == (int)getpid()) glt_slot_owner_release(w->rec, w->owner);
    if (w->registered) glt_slot_owner_unregister(w->slot_dev, w->slot_ino);
    unmap_all(w);
    if (w->trainer_fd >= 0) close(w->trainer_fd);
    if (w->trainer_stat_fd >= 0) close(w->trainer_stat_fd);
    free(w);
}

glt_status glt_slot_writer_get_info(const glt_slot_writer *w, glt_slot_writer_info *info) {
    if (!w || !info) return glt_fail(GLT_INVALID_ARGUMENT, "glt_slot_writer_get_info: NULL argument");
    info->size = sizeof *info;
    info->slot = (int)w->slot;
    info->count = (int)w->g.count;
    info->width = w->g.width;
    info->height = w->g.height;
    info->channels = w->fmt->channels;
    info->dtype = w->fmt->dtype;
    info->format_name = w->fmt->name;
    info->backend = w->backend;
    info->writes = w->writes;
    info->direct_writes = w->direct_writes;
    info->write_path = w->mode == WRITE_SHADER                                     ? "shader"
                       : w->mode == WRITE_COPY && w->backend == GLT_BACKEND_CUDA ? "copy"
                                                                                 : "readpixels";
    return GLT_OK;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Whether the trainer still runs, at every write: its pidfd polled (readable once it exits, on kernels that report a
 * zombie so), then its /proc/<pid>/stat read through the descriptor opened at attach (a zombie's state 'Z', a reaped
 * process's ESRCH; a later process that reuses the pid is another file): a zombie trainer is noticed at the next write
 * wherever /proc is mounted, ~1 µs. Without either: kill(pid, 0) at every write (a reaped trainer is noticed at once),
 * /proc/<pid>/stat by path at most every 100 ms (a zombie, or its pid reused: noticed within 100 ms). */
static int trainer_running(glt_slot_writer *w) {
    if (w->trainer_fd >= 0 && glt_process_exited(w->trainer_fd)) return 0;
    if (w->trainer_stat_fd >= 0) return !glt_process_stat_exited(w->trainer_stat_fd);
    if (w->trainer_fd >= 0) return 1;
    if (kill(w->trainer_pid, 0) != 0 && errno != EPERM) return 0;
    double t = now_s();
    if (w->trainer_checked && t - w->trainer_checked < 0.1) return 1;
    if (!glt_process_running(w->trainer_pid, w->trainer_start)) return 0;
    w->trainer_checked = t;
    return 1;
}

/* Writes are refused once the trainer is gone: its memory may be freed, and nobody would read them. */
static glt_status check_trainer(glt_slot_writer *w) {
    if (atomic_load(&w->h->closed))
        return glt_fail(GLT_CLOSED,
                        "shared slot %u: the trainer (pid %d) closed the slots; this worker's writes go nowhere: "
                        "stop the worker, or attach it to the trainer's new slots",
                        w->slot, w->trainer_pid);
    if (!trainer_running(w))
        return glt_fail(GLT_CLOSED, "shared slot %u: the trainer process (pid %d) has exited; stop this worker",
                        w->slot, w->trainer_pid);
    return GLT_OK;
}

/* GL state a write changes, saved and put back as it was. */
typedef struct write_state {
    glt_pack_state pack;
    GLint read_fbo, draw_fbo;
    GLboolean scissor, srgb;
} write_state;

static void state_push(const glt_gl *gl, write_state *s) {
    glt_pack_push(gl, &s->pack);
    gl->GetIntegerv(GL_READ_FRAMEBUFFER_BINDING, &s->read_fbo);
    gl->GetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &s->draw_fbo);
    s->scissor = gl->IsEnabled(GL_SCISSOR_TEST);
    s->srgb = gl->IsEnabled(GL_FRAMEBUFFER_SRGB);
    /* Blits obey the scissor and sRGB conversion; a copy of the stored values must not. */
    if (s->scissor) gl->Disable(GL_SCISSOR_TEST);
    if (s->srgb) gl->Disable(GL_FRAMEBUFFER_SRGB);
}

static void state_pop(const glt_gl *gl, const write_state *s) {
    if (s->scissor) gl->Enable(GL_SCISSOR_TEST);
    if (s->srgb) gl->Enable(GL_FRAMEBUFFER_SRGB);
    gl->BindFramebuffer(GL_READ_FRAMEBUFFER, (GLuint)s->read_fbo);
    gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, (GLuint)s->draw_fbo);
    glt_pack_pop(gl, &s->pack);
}

static void attach(const glt_gl *gl, GLenum fbo_target, GLuint name, GLenum target) {
    if (target == GL_RENDERBUFFER)
        gl->FramebufferRenderbuffer(fbo_target, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, name);
    else
        gl->FramebufferTexture2D(fbo_target, GL_COLOR_ATTACHMENT0, target, name, 0);
}

/* A single-sample renderbuffer of the slot's size and format and its framebuffer, made at first use and kept. */
static void ensure_target(const glt_slot_writer *w, const glt_gl *gl, GLuint *fbo, GLuint *rb) {
    if (*fbo) return;
    GLint prev = 0;
    gl->GetIntegerv(GL_RENDERBUFFER_BINDING, &prev);
    gl->GenRenderbuffers(1, rb);
    gl->BindRenderbuffer(GL_RENDERBUFFER, *rb);
    gl->RenderbufferStorage(GL_RENDERBUFFER, w->fmt->internal_format, w->g.width, w->g.height);
    gl->BindRenderbuffer(GL_RENDERBUFFER, (GLuint)prev);
    gl->GenFramebuffers(1, fbo);
}

/* Binds the framebuffer to read the region from: the source itself, or its resolve; with `flip`, a copy of it
 * upside down (rows top first for glReadPixels). Sets *x, *y. */
static glt_status bind_source(glt_slot_writer *w, const glt_gl *gl, GLuint name, GLenum target, int samples,
                              const glt_rect *r, int flip, int *x, int *y) {
    if (!w->read_fbo) gl->GenFramebuffers(1, &w->read_fbo);
    gl->BindFramebuffer(GL_READ_FRAMEBUFFER, w->read_fbo);
    attach(gl, GL_READ_FRAMEBUFFER, name, target);
    gl->ReadBuffer(GL_COLOR_ATTACHMENT0);
    if (gl->CheckFramebufferStatus(GL_READ_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
        return glt_fail(GLT_INVALID_OBJECT,
                        "%s %u (%s) cannot be read through a framebuffer; pass a colour texture or renderbuffer",
                        target == GL_RENDERBUFFER ? "renderbuffer" : "texture", name, glt_target_name(target));
    *x = r->x;
    *y = r->y;
    if (samples > 1) {
        /* Resolved as it is (a resolve blit may not flip); flipped by the blit below. */
        ensure_target(w, gl, &w->resolve_fbo, &w->resolve_rb);
        gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, w->resolve_fbo);
        gl->FramebufferRenderbuffer(GL_DRAW_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, w->resolve_rb);
        gl->DrawBuffer(GL_COLOR_ATTACHMENT0);
        gl->BlitFramebuffer(r->x, r->y, r->x + r->width, r->y + r->height, 0, 0, r->width, r->height,
                            GL_COLOR_BUFFER_BIT, GL_NEAREST);
        gl->BindFramebuffer(GL_READ_FRAMEBUFFER, w->resolve_fbo);
        gl->ReadBuffer(GL_COLOR_ATTACHMENT0);
        *x = 0;
        *y = 0;
    }
    if (!flip) return GLT_OK;
    ensure_target(w, gl, &w->flip_fbo, &w->flip_rb);
    gl->BindFramebuffer(GL_DRAW_FRAMEBUFFER, w->flip_fbo);
    gl->FramebufferRenderbuffer(GL_DRAW_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, w->flip_rb);
    gl->DrawBuffer(GL_COLOR_ATTACHMENT0);
    /* Destination rows in reverse: the region's top row lands at row 0, which glReadPixels returns first. */
    gl->BlitFramebuffer(*x, *y, *x + r->width, *y + r->height, 0, r->height, r->width, 0, GL_COLOR_BUFFER_BIT,
                        GL_NEAREST);
    gl->BindFramebuffer(GL_READ_FRAMEBUFFER, w->flip_fbo);
    gl->ReadBuffer(GL_COLOR_ATTACHMENT0);
    *x = 0;
    *y = 0;
    return GLT_OK;
}

/* Waits until GL has finished the commands issued so far (the copy into the slot). */
static glt_status wait_gl(const glt_gl *gl, unsigned slot) {
    GLsync sync = gl->FenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
    if (!sync) return glt_fail(GLT_GL_ERROR, "shared slot %u: glFenceSync failed", slot);
    GLenum r;
    /* Flush on the first wait only; a hung GPU is reported after ten seconds, not waited on forever. */
    int tries = 0;
    do {
        r = gl->ClientWaitSync(sync, tries == 0 ? GL_SYNC_FLUSH_COMMANDS_BIT : 0, 100000000ull); /* 100 ms */
    } while (r == GL_TIMEOUT_EXPIRED && ++tries < 100);
    gl->DeleteSync(sync);
    if (r == GL_ALREADY_SIGNALED || r == GL_CONDITION_SATISFIED) return GLT_OK;
    return glt_fail(GLT_GL_ERROR, "shared slot %u: waiting for the copy into the slot failed (%s)", slot,
                    r == GL_TIMEOUT_EXPIRED ? "not done after 10 s: the GPU is hung or lost" : "glClientWaitSync failed");
}

/* Starts a write (the protocol in slots_shared.h): the record's seq goes odd, then the trainer's read count is
 * loaded, whose set is written. Both seq_cst: the trainer's claim of a set relies on that order. */
static uint64_t begin_write(glt_slot_writer *w) {
    glt_slot_record *rec = w->rec;
    glt_slot_owner_keep(rec, w->owner);
    atomic_store_explicit(&rec->writer_pid, (int32_t)w->pid, memory_order_relaxed);
    atomic_store_explicit(&rec->writer_start, w->start, memory_order_relaxed);
    atomic_store_explicit(&rec->writing, 1u, memory_order_relaxed);
    /* Odd whatever was there (the record is this process's own memory: a wild write may have left anything). */
    uint64_t seq = atomic_load_explicit(&rec->seq, memory_order_relaxed);
    atomic_store_explicit(&rec->seq, seq | 1u, memory_order_seq_cst);
    return atomic_load_explicit(&w->h->reads, memory_order_seq_cst);
}

/* Ends it: fresh for the read after `reads` when the copy is complete; a failed write leaves the slot stale
 * (written = reads is never fresh), even where an earlier write of this step had made it fresh. */
static void end_write(glt_slot_writer *w, uint64_t reads, int done) {
    glt_slot_record *rec = w->rec;
    atomic_store_explicit(&rec->written, done ? reads + 1 : reads, memory_order_relaxed);
    if (done) {
        atomic_fetch_add_explicit(&rec->writes, 1, memory_order_relaxed);
        w->writes++;
    }
    atomic_store_explicit(&rec->writing, 0u, memory_order_relaxed);
    uint64_t seq = atomic_load_explicit(&rec->seq, memory_order_relaxed);
    atomic_store_explicit(&rec->seq, (seq | 1u) + 1u, memory_order_release);
}

static glt_status check_source(const glt_slot_writer *w, GLuint name, GLenum target, const glt_format *src,
                               const glt_rect *r) {
    int src_int = glt_format_kind(src) == GLT_KIND_UINT, slot_int = glt_format_kind(w->fmt) == GLT_KIND_UINT;
    const char *kind = target == GL_RENDERBUFFER ? "renderbuffer" : "texture";
    if (src->depth || src_int != slot_int)
        return glt_fail(GLT_UNSUPPORTED_FORMAT,
                        "%s %u is %s, which cannot be written into shared slots of %s: %s", kind, name, src->name,
                        w->fmt->name,
                        src->depth ? "depth images are not slot formats (write a colour image)"
                                   : "integer formats go only into integer slots, and colour formats into colour slots");
    if (r->width != w->g.width || r->height != w->g.height)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "%s %u: the image (or region) written is %dx%d, but shared slot %u is %dx%d; pass "
                        "region=(x, y, %d, %d) or render at the slots' size",
                        kind, name, r->width, r->height, w->slot, w->g.width, w->g.height, w->g.width, w->g.height);
    return GLT_OK;
}

/* The writer's own buffer of one slot's bytes, made at the first write that needs it. Immutable storage without
 * any map or client bit: the driver keeps it in video memory (a glBufferData buffer may live in system memory,
 * which made each write two PCIe crossings). Leaves GL_PIXEL_PACK_BUFFER's binding as it was. */
static void ensure_stage(glt_slot_writer *w, const glt_gl *gl) {
    if (w->stage) return;
    GLint prev = 0;
    gl->GetIntegerv(GL_PIXEL_PACK_BUFFER_BINDING, &prev);
    gl->GenBuffers(1, &w->stage);
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, w->stage);
    if (gl->BufferStorage)
        gl->BufferStorage(GL_PIXEL_PACK_BUFFER, (GLsizeiptr)w->g.slot_bytes, NULL, 0);
    else
        gl->BufferData(GL_PIXEL_PACK_BUFFER, (GLsizeiptr)w->g.slot_bytes, NULL, 0x88EA /* GL_STREAM_COPY */);
    gl->BindBuffer(GL_PIXEL_PACK_BUFFER, (GLuint)prev);
}

/* Host slots: GL's bottom-up rows, as glReadPixels left them, turned into the slots' top-first order in place. */
static void reverse_rows(void *pixels, size_t pitch, int height) {
    unsigned char tmp[4096];
    for (int y = 0; y < height / 2; ++y) {
        unsigned char *a = (unsigned char *)pixels + (size_t)y * pitch;
        unsigned char *b = (unsigned char *)pixels + (size_t)(height - 1 - y) * pitch;
        for (size_t done = 0; done < pitch; done += sizeof tmp) {
            size_t n = pitch - done < sizeof tmp ? pitch - done : sizeof tmp;
            memcpy(tmp, a + done, n);
            memcpy(a + done, b + done, n);
            memcpy(b + done, tmp, n);
        }
    }
}

/* Test-only fault injection (_gltensor._slots_fail_next_write_for_testing): the next GL write of this process fails
 * as a GL error in its copy does, after the slot was marked being written and before anything reached it. No GL
 * driver here fails a copy on demand (every input that could fail is refused before the write starts), and a failed
 * write must still leave the slot stale with its last image intact: tests/test_slots_failed_write.py. */
static atomic_int fail_next_write;

void glt_slot_writer_fail_next_write_for_testing(void) { atomic_store(&fail_next_write, 1); }

static glt_status write_gl(glt_slot_writer *w, unsigned name, unsigned target, const glt_rect *region) {
    char what[64];
    snprintf(what, sizeof what, "shared slot %u's writer", w->slot);
    glt_status st = glt_check_gl_context(w->gl_context, what);
    if (st == GLT_OK) st = check_trainer(w);
    if (st != GLT_OK) return st;
    if (target != GL_TEXTURE_2D && target != GL_TEXTURE_RECTANGLE && target != GL_TEXTURE_2D_MULTISAMPLE &&
        target != GL_RENDERBUFFER)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "target %#x is not GL_TEXTURE_2D, GL_TEXTURE_RECTANGLE, GL_TEXTURE_2D_MULTISAMPLE or "
                        "GL_RENDERBUFFER", target);
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    int width, height, samples;
    const glt_format *src;
    st = glt_gl_image_query(gl, name, target, &width, &height, &src, &samples);
    if (st != GLT_OK) return st;
    glt_rect r = region ? *region : (glt_rect){0, 0, 0, 0};
    st = glt_gl_region_check(&r, target, name, width, height);
    if (st != GLT_OK) return st;
    if (r.width == 0 && r.height == 0) r = (glt_rect){0, 0, width, height};
    st = check_source(w, name, target, src, &r);
    if (st != GLT_OK) return st;

    uint64_t reads = begin_write(w);
    unsigned set = (unsigned)(reads % w->g.buffers);
    write_state saved;
    state_push(gl, &saved);
    glt_gl_drain_errors(gl);
    int x = r.x, y = r.y;
    /* A copy GL refused writes nothing; the steps after it (row reversal, the staged copy, the host readback)
     * must not run either, or they would change the slot's last image. */
    GLenum read_err = atomic_exchange(&fail_next_write, 0) ? GL_INVALID_OPERATION : GL_NO_ERROR;
    /* The shader write reads the caller's texture itself where that is exact: no blit, no framebuffer. */
    GLuint direct = w->mode == WRITE_SHADER && glt_slot_packer_reads_directly(w->packer, name, target, samples, src)
                        ? name
                        : 0;
    /* glReadPixels into CUDA slots reads a flipped blit; into host slots it reads GL's rows and reverses them on
     * the CPU afterwards (below): a blit in a child forked from a process that drew with llvmpipe waits forever
     * for the parent's rasteriser threads, and a host copy of the rows is cheap beside the readback itself. */
    int flip_blit = w->mode != WRITE_SHADER && w->backend == GLT_BACKEND_CUDA;
    if (!direct) st = bind_source(w, gl, name, target, samples, &r, flip_blit, &x, &y);
    /* Host slots: a blit GL refused (a resolve) stops the write before the readback lands in the slot. */
    if (st == GLT_OK && read_err == GL_NO_ERROR && w->backend == GLT_BACKEND_CPU && !direct) read_err = gl->GetError();
    if (st == GLT_OK) {
        uint64_t offset = glt_slot_offset(&w->g, set, w->slot);
        uint64_t bytes = w->g.row_pitch * (uint64_t)r.height;
        if (read_err != GL_NO_ERROR) {
            /* Nothing is copied. */
        } else if (w->mode == WRITE_SHADER) {
            w->direct_writes += direct != 0;
            if (w->backend == GLT_BACKEND_CUDA) {
                glt_slot_packer_run(w->packer, direct, x, y, w->buffer, offset, w->g.row_pitch, 0);
            } else {
                ensure_stage(w, gl);
                glt_slot_packer_run(w->packer, direct, x, y, w->stage, 0, w->g.row_pitch, 1);
                read_err = gl->GetError(); /* a failed pack leaves the stage as it was: not read back */
                if (read_err == GL_NO_ERROR) {
                    GLint prev = 0;
                    gl->GetIntegerv(GL_COPY_READ_BUFFER, &prev); /* the binding query shares the target's enum */
                    gl->BindBuffer(GL_COPY_READ_BUFFER, w->stage);
                    gl->GetBufferSubData(GL_COPY_READ_BUFFER, 0, (GLsizeiptr)bytes, w->pixels[set]);
                    gl->BindBuffer(GL_COPY_READ_BUFFER, (GLuint)prev);
                }
            }
        } else {
            size_t bpp = glt_dtype_size(w->fmt->dtype) * (size_t)w->fmt->channels;
            gl->PixelStorei(GL_PACK_ALIGNMENT, 1);
            gl->PixelStorei(GL_PACK_ROW_LENGTH, (GLint)(w->g.row_pitch / bpp));
            gl->PixelStorei(GL_PACK_SKIP_ROWS, 0);
            gl->PixelStorei(GL_PACK_SKIP_PIXELS, 0);
            gl->PixelStorei(GL_PACK_SWAP_BYTES, 0);
            void *dst;
            int staged = w->backend == GLT_BACKEND_CUDA && w->mode == WRITE_COPY;
            if (staged) {
                ensure_stage(w, gl);
                gl->BindBuffer(GL_PIXEL_PACK_BUFFER, w->stage);
                dst = NULL;
            } else if (w->backend == GLT_BACKEND_CUDA) {
                gl->BindBuffer(GL_PIXEL_PACK_BUFFER, w->buffer);
                dst = (void *)(uintptr_t)offset;
            } else {
                gl->BindBuffer(GL_PIXEL_PACK_BUFFER, 0);
                dst = w->pixels[set];
            }
            gl->ReadPixels(x, y, r.width, r.height, w->fmt->read_format, w->fmt->read_type, dst);
            /* Rows reversed only after a read that worked (a failed one left the slot as it was). */
            read_err = gl->GetError();
            if (w->backend == GLT_BACKEND_CPU && read_err == GL_NO_ERROR) reverse_rows(dst, w->g.row_pitch, r.height);
            if (staged && read_err == GL_NO_ERROR) {
                GLint prev_read = 0, prev_write = 0;
                gl->GetIntegerv(GL_COPY_READ_BUFFER, &prev_read);
                gl->GetIntegerv(GL_COPY_WRITE_BUFFER, &prev_write);
                gl->BindBuffer(GL_COPY_READ_BUFFER, w->stage);
                gl->BindBuffer(GL_COPY_WRITE_BUFFER, w->buffer);
                gl->CopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, (GLintptr)offset,
                                      (GLsizeiptr)bytes);
                gl->BindBuffer(GL_COPY_READ_BUFFER, (GLuint)prev_read);
                gl->BindBuffer(GL_COPY_WRITE_BUFFER, (GLuint)prev_write);
            }
        }
        if (!direct) {
            /* Detach: an attachment would keep a texture the program deletes alive until the next write. */
            gl->BindFramebuffer(GL_READ_FRAMEBUFFER, w->read_fbo);
            attach(gl, GL_READ_FRAMEBUFFER, 0, target == GL_RENDERBUFFER ? GL_RENDERBUFFER : GL_TEXTURE_2D);
        }
        GLenum err = read_err != GL_NO_ERROR ? read_err : gl->GetError();
        if (err != GL_NO_ERROR)
            st = glt_fail(GLT_GL_ERROR,
                          "writing %s %u (%s) into shared slot %u (%s) failed with %s; the slot keeps its last "
                          "image and the trainer's next read will report it stale",
                          target == GL_RENDERBUFFER ? "renderbuffer" : "texture", name, src->name, w->slot,
                          w->fmt->name, glt_gl_error_name(err));
    }
    state_pop(gl, &saved);
    if (st == GLT_OK && w->backend == GLT_BACKEND_CUDA) st = wait_gl(gl, w->slot);
    end_write(w, reads, st == GLT_OK);
    return st;
}

static glt_status write_host(glt_slot_writer *w, const void *pixels, size_t row_stride) {
    size_t row = glt_dtype_size(w->fmt->dtype) * (size_t)w->fmt->channels * (size_t)w->g.width;
    if (row_stride < row)
        return glt_fail(GLT_INVALID_ARGUMENT, "shared slot %u: rows of %zu bytes are %zu bytes apart, less than a row",
                        w->slot, row, row_stride);
    glt_status st = check_trainer(w);
    const glt_gl *gl = NULL;
    if (st == GLT_OK && w->backend == GLT_BACKEND_CUDA) {
        char what[64];
        snprintf(what, sizeof what, "shared slot %u's writer", w->slot);
        st = glt_check_gl_context(w->gl_context, what);
        if (st == GLT_OK && !(gl = glt_gl_load())) st = GLT_GL_ERROR;
        if (st == GLT_OK && !gl->BufferSubData)
            st = glt_fail(GLT_UNSUPPORTED, "glBufferSubData is missing from this GL driver");
    }
    if (st != GLT_OK) return st;
    uint64_t reads = begin_write(w);
    unsigned set = (unsigned)(reads % w->g.buffers);
    uint64_t offset = glt_slot_offset(&w->g, set, w->slot);
    int height = w->g.height;
    /* Host images come top row first, as slots hold them. */
    if (w->backend == GLT_BACKEND_CPU) {
        char *slot = w->pixels[set];
        for (int y = 0; y < height; ++y)
            memcpy(slot + (size_t)y * w->g.row_pitch, (const char *)pixels + (size_t)y * row_stride, row);
    } else {
        GLint prev = 0;
        gl->GetIntegerv(GL_COPY_WRITE_BUFFER, &prev); /* the binding query shares the target's enum */
        gl->BindBuffer(GL_COPY_WRITE_BUFFER, w->buffer);
        glt_gl_drain_errors(gl);
        for (int y = 0; y < height; ++y)
            gl->BufferSubData(GL_COPY_WRITE_BUFFER, (GLintptr)(offset + (size_t)y * w->g.row_pitch),
                              (GLsizeiptr)row, (const char *)pixels + (size_t)y * row_stride);
        gl->BindBuffer(GL_COPY_WRITE_BUFFER, (GLuint)prev);
        GLenum err = gl->GetError();
        if (err != GL_NO_ERROR)
            st = glt_fail(GLT_GL_ERROR, "writing host pixels into shared slot %u failed with %s", w->slot,
                          glt_gl_error_name(err));
        if (st == GLT_OK) st = wait_gl(gl, w->slot);
    }
    end_write(w, reads, st == GLT_OK);
    return st;
}

/* Every write runs here: one thread at a time (two writes of one writer at once would be two writers of the slot),
 * and in a forked child only once the slot is the child's (take_slot), so that the record names the child. */
static glt_status enter_write(glt_slot_writer *w) {
    int inherited = w->pid != (int)getpid();
    if (inherited) atomic_store(&w->busy, 0); /* a write of the parent's other thread, copied by fork mid-write */
    if (atomic_exchange(&w->busy, 1))
        return glt_fail(GLT_SLOTS_BUSY,
                        "shared slot %u's writer is already writing in another thread: use a writer from one thread "
                        "at a time",
                        w->slot);
    glt_status st = inherited ? take_slot(w, 1) : GLT_OK;
    if (st != GLT_OK) atomic_store(&w->busy, 0);
    return st;
}

glt_status glt_slot_writer_write(glt_slot_writer *w, unsigned name, unsigned target, const glt_rect *region) {
    if (!w) return glt_fail(GLT_INVALID_ARGUMENT, "glt_slot_writer_write: writer is NULL");
    glt_status st = enter_write(w);
    if (st != GLT_OK) return st;
    st = write_gl(w, name, target, region);
    atomic_store(&w->busy, 0);
    return st;
}

glt_status glt_slot_writer_write_host(glt_slot_writer *w, const void *pixels, size_t row_stride) {
    if (!w || !pixels) return glt_fail(GLT_INVALID_ARGUMENT, "glt_slot_writer_write_host: NULL argument");
    glt_status st = enter_write(w);
    if (st != GLT_OK) return st;
    st = write_host(w, pixels, row_stride);
    atomic_store(&w->busy, 0);
    return st;
}
