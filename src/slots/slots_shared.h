/*
 * What the trainer (slots.c) and its workers (slot_writer.c) share, and the protocol between them.
 *
 * Trust: a worker runs engine code that can make wild writes; the trainer holds hours of training state. So
 * nothing that sizes or places memory is ever read by the trainer from memory a worker can write: the trainer
 * keeps its own copy of the geometry (glt_slots_geometry) from creation on. What workers must know is in memfds,
 * all close-on-exec, handed over by descriptor passing only, each sealed against shrinking and growing (and against
 * new seals) once sized, before any descriptor leaves the trainer: a process holding one cannot make another's
 * mapping run past the file's end (SIGBUS). Both sides check the seals (F_GET_SEALS): the trainer after sealing,
 * a worker before it maps anything.
 *   the geometry memfd    glt_slots_header (geometry, the trainer's identity, its GPU): written once by the trainer
 *                         with write() before any descriptor leaves it, then sealed against writing too (F_SEAL_WRITE,
 *                         SHRINK, GROW, SEAL; slots_seal.c). A worker reads it once at attach and checks the
 *                         geometry against the sizes of the other descriptors it got.
 *   the control memfd     one page, glt_slots_control: the trainer's read count and closed flag, written by the
 *                         trainer only, through the mapping it made before sealing. On Linux 5.1 or newer it is
 *                         also sealed F_SEAL_FUTURE_WRITE: no other process can write it, map it writable or punch
 *                         a hole in it, whatever descriptor it holds (geo.control_seals says what the trainer set;
 *                         a worker requires those seals). On older kernels a process that maps its descriptor
 *                         itself can change it: the trainer republishes its own values at every read and names
 *                         what it found (slots.c, check_control).
 *   a slot's memfd        one per slot (glt_slots_export_slot): page 0 is the slot's record (glt_slot_record),
 *                         written by that slot's writer only; on the CPU backend the slot's image of each set
 *                         follows at pixel_offset + set * slot_bytes. A worker gets its own slot's memfd and no
 *                         other, so even with raw access to what it holds it cannot touch another slot's record or
 *                         (CPU) pixels. The trainer maps every slot's images side by side into one range of its
 *                         address space (a set is count * slot_bytes contiguous bytes, as views need) and treats
 *                         every field of a record as untrusted input: a value out of range makes that slot stale
 *                         with a message naming it, nothing else.
 *   CUDA backend          the pixels are the trainer's GPU memory, one allocation exported as a descriptor
 *                         (close-on-exec) and imported by the workers' GL: a worker that imports it itself could
 *                         write any slot's pixels there (docs/shared-slots.md, trust model).
 * What a worker can still do to memory it holds: write anything into its own record and (CPU) pixels, punch holes
 * in them (fallocate(PUNCH_HOLE): they then read as zeros; only F_SEAL_WRITE stops that, and the worker must
 * write). The trainer still never crashes or reads out of bounds (it sizes nothing from shared memory, and no
 * file it maps can shrink).
 *
 * One writer per slot (slot_owner.c): a writer takes its slot at attach by a compare-exchange of the record's owner
 * word (the writer's pid and start time), refused while another writer's process runs; released at destroy; taken
 * over from a process that exited. A forked child's inherited writer takes the slot for the child first. Two
 * writers of one slot would tear frames: the seqlock below assumes one writer per record.
 *
 * Freshness and torn frames, per slot record (a seqlock plus a claim of the set being read):
 *   worker write:  seq <- odd (seq_cst); r <- control.reads (seq_cst); write set r % buffers;
 *                  written <- r + 1 on success, r on failure (never fresh); seq <- even (release).
 *   trainer read r (private count r; control.reads == r):
 *     1. for each slot: q_i <- seq (acquire); fresh iff q_i even and written == r + 1 (else: stale, named).
 *     2. with buffers >= 2: the set the workers write next ((r + 1) % buffers) is released (the copy or view
 *        that read it last is done), then control.reads <- r + 1 (seq_cst): writers that start from now on
 *        write another set. Then each seq is loaded again (seq_cst): if one moved since step 1, a writer
 *        started before the claim and may be writing set r % buffers: control.reads goes back to r and the read
 *        is refused naming the slot (that write, once complete, is fresh for the next read). Otherwise no
 *        writer can touch set r % buffers until the trainer itself lets them in again (release_set), so the
 *        copy (synchronous on the CPU, queued on the GPU) and a zero-copy view of it see whole writes.
 *        Why it holds: a writer's seq store and load of reads, and the trainer's store of reads and reload of
 *        seq, are all seq_cst: either the trainer's reload sees the writer's odd seq, or the writer's load
 *        sees r + 1 (Dekker).
 *     3. with buffers == 1 the workers' next set is the one being read: the copy is done first (on the GPU,
 *        waited for), then the seqs are checked again (moved: refused, naming the slot), then reads <- r + 1.
 * The trainer commits its private read count only when the read succeeds. Between reads the control page holds
 * the trainer's values (reads, not closed, the marker); a read that finds others there (a kernel without
 * F_SEAL_FUTURE_WRITE let a process change or punch the page) puts them back before step 1 and names the change in
 * its refusal: a changed page never stalls reads for good, and no honest worker is blamed for it.
 *
 * Processes are named by pid and start time (/proc/<pid>/stat), so that a reused pid is not taken for the
 * writer or the trainer; a zombie counts as gone. A worker holds a pidfd of the trainer (pidfd_open at attach,
 * checked against the start time), which polls readable as soon as the trainer exits, zombie or reaped: every
 * write polls it (no /proc read). Where the kernel has no pidfd_open (before Linux 5.3): kill(pid, 0) at every
 * write and /proc at most every 100 ms. The trainer reads /proc only for a slot that is not fresh.
 */
#ifndef GLT_SLOTS_SHARED_H
#define GLT_SLOTS_SHARED_H

#include "gl/gl.h"
#include "slots/slots.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define GLT_SLOTS_MAGIC 0x73746f6c73746c67ull /* "gltslots" */
/* GLT_SLOTS_VERSION (gltensor.h): the layout below; the header carries it. */

/* Bounds a geometry must respect (the trainer's checks at creation; a worker's checks at attach). */
#define GLT_SLOTS_MAX_COUNT 4096
#define GLT_SLOTS_MAX_SIDE 32768

/* Everything that sizes or places memory. The trainer's copy is the truth; the sealed header's is what workers
 * see. */
typedef struct glt_slots_geometry {
    uint32_t backend; /* glt_backend: CUDA or CPU */
    uint32_t count, buffers;
    int32_t width, height;
    uint32_t gl_internal_format;
    uint64_t page;            /* the unit of the layout (>= the system page size) */
    uint64_t row_pitch;       /* bytes between a slot's rows (GL_PACK_ROW_LENGTH * pixel size) */
    uint64_t slot_bytes;      /* one slot, padded to GLT_SLOT_ALIGN (and to `page` on the CPU backend) */
    uint64_t memory_bytes;    /* the pixel memory: buffers * count * slot_bytes, rounded up as CUDA needs */
    uint64_t control_bytes;   /* the control memfd's size: one page */
    uint64_t slot_file_bytes; /* each slot's memfd: its record page, then (CPU) its image of each set */
    uint64_t pixel_offset;    /* CPU backend: where a slot's image of set 0 is in its memfd (one page); 0 on CUDA */
    uint32_t control_seals;   /* the seals the trainer put on the control memfd: workers require them */
    uint32_t pad_;
} glt_slots_geometry;

typedef struct glt_slot_record {
    _Atomic uint64_t seq;        /* odd while a write is under way (see the protocol above) */
    /* The trainer's read count when the slot was last written, plus one: fresh while it equals reads + 1. */
    _Atomic uint64_t written;
    _Atomic int32_t writer_pid;  /* the process that wrote (or is writing) last; 0: never written */
    _Atomic uint32_t writing;    /* 1 from the start of a write until its copy is complete (diagnostics) */
    _Atomic uint64_t writer_start; /* the writer's start time (/proc/<pid>/stat field 22): a reused pid differs */
    _Atomic uint64_t writes;     /* writes done, for diagnostics */
    _Atomic uint64_t owner;      /* the attached writer (slot_owner.c): start time << 22 | pid; 0: none */
} glt_slot_record;

/* The geometry memfd's whole content: written once, then sealed (nothing in it changes after creation). */
typedef struct glt_slots_header {
    uint64_t magic;
    uint32_t version;
    uint32_t pad_;
    glt_slots_geometry geo;
    int32_t cuda_device; /* the trainer's ordinal, for messages (ordinals differ between processes) */
    int32_t trainer_pid;
    uint64_t trainer_start; /* the trainer's start time (/proc/<pid>/stat field 22); 0: unknown */
    uint8_t device_uuid[16]; /* CUDA backend: the GPU's UUID, compared with the worker's GL device */
    char device_name[96];
} glt_slots_header;

/* Page 0 of the control memfd: what the trainer changes after creation. */
typedef struct glt_slots_control {
    _Atomic uint32_t closed; /* the trainer closed the slots: writes fail */
    _Atomic uint32_t marker; /* GLT_SLOTS_CONTROL_MARKER: zero once the page was cleared (a hole punched in it) */
    _Atomic uint64_t reads; /* reads done: the set workers write is reads % buffers */
} glt_slots_control;

#define GLT_SLOTS_CONTROL_MARKER 0x6374726cu /* "ctrl" */

/* Every slot starts on this boundary: CUDA texture objects over pitched memory need 512 bytes. */
#define GLT_SLOT_ALIGN 4096u
/* Row pitch alignment: CUDA's pitched textures need 32 (Hopper) .. 256 bytes; 256 is also a multiple of
 * every pixel size (1 .. 16 bytes), so GL_PACK_ROW_LENGTH = pitch / pixel size is exact. */
#define GLT_SLOT_PITCH_ALIGN 256u

/* Byte offset of slot i of buffer set `set` inside the pixel memory. */
static inline uint64_t glt_slot_offset(const glt_slots_geometry *g, unsigned set, unsigned i) {
    return ((uint64_t)set * g->count + i) * g->slot_bytes;
}

/* slots_trust.c: NULL when `g` is a geometry the trainer could have made (bounds, alignment, sizes that add up, no
 * overflow), else what is wrong. `page`: this process's page size (the layout's unit must be a multiple of it). The
 * sizes of the files the geometry describes are checked where they are opened (glt_memfd_check). */
const char *glt_slots_geometry_check(const glt_slots_geometry *g, uint64_t page);

/* slots_seal.c: a memfd (close-on-exec; `sealable`: MFD_ALLOW_SEALING), -1 with errno on failure. */
int glt_memfd_create(const char *name, int sealable);
/* The seals every memfd of the slots carries once sized: no shrinking, no growing, no new seals. */
#define GLT_SEALS_SIZE 0x0007u /* F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW */
#define GLT_SEAL_FUTURE_WRITE 0x0010u
/* The trainer: a new sealable memfd named `name` of `bytes` bytes (zeros), in *fd. */
glt_status glt_memfd_sized(const char *name, uint64_t bytes, int *fd);
/* The trainer: seals `fd` (`what` names it in errors) with GLT_SEALS_SIZE, plus F_SEAL_FUTURE_WRITE where
 * `future_write` and the kernel has it (Linux 5.1), then reads the seals back; *seals_out: the seals it carries. */
glt_status glt_memfd_seal(int fd, const char *what, int future_write, uint32_t *seals_out);
/* Either side: GLT_OK when `fd` is a memfd carrying every seal in `need` and holding exactly `bytes` bytes, else a
 * GLT_INVALID_ARGUMENT naming `what` and what is wrong (not sealed, resized). */
glt_status glt_memfd_check(int fd, const char *what, uint32_t need, uint64_t bytes);
/* Where a hole was punched in `fd` at `offset` (fallocate(PUNCH_HOLE): the page is gone, it reads as zeros): 1; 0
 * where it holds data or cannot tell. */
int glt_memfd_hole_at(int fd, uint64_t offset);
/* The trainer: a new memfd holding `h`, sealed (F_SEAL_WRITE, SHRINK, GROW, SEAL), in *fd. */
glt_status glt_slots_header_seal(const glt_slots_header *h, int *fd);
/* A worker: the header in `fd`, refused unless the memfd carries those seals, has the header's size, and its
 * magic and version are this gltensor's. The geometry itself is checked by glt_slots_geometry_check. */
glt_status glt_slots_header_read(int fd, glt_slots_header *out);

/* slot_owner.c: one writer per slot (see the top). The owner word of process `pid` started at `start`. */
uint64_t glt_slot_owner_word(int pid, uint64_t start);
/* The pid an owner word names (0: none, or not a pid), and whether that process still runs. */
int glt_slot_owner_pid(uint64_t word);
int glt_slot_owner_alive(uint64_t word);
/* Takes slot `slot` (record `rec`, its memfd `slot_fd` identifying it in this process) for `mine`: GLT_OK, or
 * GLT_SLOTS_BUSY naming the writer that holds it (another writer object of this process included). `inherited`:
 * the caller is a forked child taking over the writer its parent attached (named so in the refusal). */
glt_status glt_slot_owner_take(glt_slot_record *rec, unsigned slot, uint64_t mine, int inherited);
/* Every write: the record still names `mine` (a wild write or a punched hole may have cleared it): put back. */
void glt_slot_owner_keep(glt_slot_record *rec, uint64_t mine);
/* Releases the slot where the record still names `mine`. */
void glt_slot_owner_release(glt_slot_record *rec, uint64_t mine);
/* This process's writers by slot memfd (device and inode): a second writer object of one slot in one process is
 * refused as a second writer of another process is. register: 0 when one is attached already. */
int glt_slot_owner_register(uint64_t dev, uint64_t ino);
void glt_slot_owner_unregister(uint64_t dev, uint64_t ino);

/* A process's identity: 1 when `pid` runs (not a zombie) and, where `start` is not 0, started at `start` (a
 * reused pid is another process). Reads /proc/<pid>/stat; kill(pid, 0) where /proc is missing. */
int glt_process_running(int pid, uint64_t start);
/* A pidfd of process `pid` started at `start` (close-on-exec), -1 where the kernel has none (before Linux 5.3,
 * or a sandbox forbids it) or `pid` is not that process any more. glt_process_exited polls it: 1 once the process
 * exited (zombie or reaped). */
int glt_process_watch(int pid, uint64_t start);
int glt_process_exited(int pidfd);
/* An open /proc/<pid>/stat of the process `pid` started at `start` (-1: none, or not that process any more), and
 * whether it says that process exited: a zombie ('Z'/'X') or reaped (ESRCH). One pread per call (~1 µs); the pidfd's
 * poll does not report a zombie on every kernel and sandbox (a GPU machine's did not), this does. */
int glt_process_stat_open(int pid, uint64_t start);
int glt_process_stat_exited(int stat_fd);
/* This process's start time (/proc/self/stat field 22, clock ticks since boot), 0 where unknown. */
uint64_t glt_process_start_time(int pid);
/* The system page size, at least 4096. */
uint64_t glt_page_size(void);

/* The slot formats: a capturable colour format of 1, 2 or 4 channels (CUDA textures have no 3-channel
 * form). NULL, with a message naming the allowed ones, otherwise. */
const glt_format *glt_slot_format(unsigned gl_internal_format);

/* slot_pack.c: a slot write by compute shader (see there for why). The GL context current at creation must be
 * current at every run and at destruction. */
typedef struct glt_slot_packer glt_slot_packer;
int glt_slot_packer_possible(const glt_gl *gl, const glt_format *fmt);
glt_status glt_slot_packer_create(const glt_format *fmt, int width, int height, glt_slot_packer **out);
/* 1 when the packer can read `name` itself (no blit into a texture of its own): a single-sample GL_TEXTURE_2D of
 * exactly the slot's format, not sRGB, with identity swizzles and base level 0, so that texelFetch gives what
 * glReadPixels would (GLTENSOR_SLOTS_PACK_INPUT=blit turns it off). */
int glt_slot_packer_reads_directly(const glt_slot_packer *p, GLuint name, GLenum target, int samples,
                                   const glt_format *src);
/* Packs the width x height region at (x, y) of `source` (a texture glt_slot_packer_reads_directly accepted), or of
 * the bound read framebuffer when source is 0, into `buffer` at byte `offset`, rows `pitch` bytes apart, top
 * row first (as slots store them): the bytes glReadPixels would give in the slot's format, rows reversed. From the read framebuffer it blits into a
 * texture of its own through its own draw framebuffer: the caller saves and restores the framebuffer bindings (and
 * switches scissor and sRGB conversion off), as around any blit of its own. */
void glt_slot_packer_run(glt_slot_packer *p, GLuint source, int x, int y, GLuint buffer, uint64_t offset,
                         uint64_t pitch, int barrier /* 1: GL itself reads the buffer next (glGetBufferSubData) */);
void glt_slot_packer_destroy(glt_slot_packer *p);

#endif
