/*
 * What the trainer (slots.c) and its workers (slot_writer.c) share: the layout of the control memory both
 * map, and where each slot lives. The control memory is a memfd: the header below, one record per slot and,
 * on the CPU backend, the slots' pixels after them. On the CUDA backend the pixels are a separate allocation
 * of the trainer's GPU, exported as a file descriptor.
 *
 * Each field a process writes while the other may read it is atomic (both processes are x86-64 or another
 * 64-bit target where 64-bit atomics are lock-free). The header's geometry is written once, before any fd
 * leaves the trainer, and only read afterwards.
 */
#ifndef GLT_SLOTS_SHARED_H
#define GLT_SLOTS_SHARED_H

#include "internal.h"

#include <stdatomic.h>
#include <stdint.h>

#define GLT_SLOTS_MAGIC 0x73746f6c73746c67ull /* "gltslots" */
#define GLT_SLOTS_VERSION 1u

typedef struct glt_slot_record {
    /* The trainer's read count when the slot was last written, plus one: fresh while it equals reads + 1. */
    _Atomic uint64_t written;
    _Atomic uint32_t writing;    /* 1 from the start of a write until its copy is complete */
    _Atomic int32_t writer_pid;  /* the process that wrote (or is writing) last; 0: never written */
    _Atomic uint64_t writes;     /* writes done, for diagnostics */
} glt_slot_record;

typedef struct glt_slots_header {
    uint64_t magic;
    uint32_t version;
    uint32_t backend; /* glt_backend: CUDA or CPU */
    uint32_t count, buffers;
    int32_t width, height;
    uint32_t gl_internal_format;
    int32_t cuda_device;   /* the trainer's ordinal, for messages (ordinals differ between processes) */
    int32_t trainer_pid;
    uint32_t pad_;
    uint64_t row_pitch;    /* bytes between a slot's rows (GL_PACK_ROW_LENGTH * pixel size) */
    uint64_t slot_bytes;   /* one slot, padded to GLT_SLOT_ALIGN */
    uint64_t memory_bytes; /* the pixel allocation: buffers * count * slot_bytes, rounded up as CUDA needs */
    uint64_t data_offset;  /* CPU backend: where the pixels start in the control memory */
    uint64_t control_bytes;
    uint8_t device_uuid[16]; /* CUDA backend: the GPU's UUID, compared with the worker's GL device */
    char device_name[96];
    _Atomic uint32_t closed; /* the trainer closed the slots: writes fail */
    uint32_t pad2_;
    _Atomic uint64_t reads;  /* reads done: the set workers write is reads % buffers */
    glt_slot_record slots[];
} glt_slots_header;

/* Every slot starts on this boundary: CUDA texture objects over pitched memory need 512 bytes. */
#define GLT_SLOT_ALIGN 4096u
/* Row pitch alignment: CUDA's pitched textures need 32 (Hopper) .. 256 bytes; 256 is also a multiple of
 * every pixel size (1 .. 16 bytes), so GL_PACK_ROW_LENGTH = pitch / pixel size is exact. */
#define GLT_SLOT_PITCH_ALIGN 256u

/* Byte offset of slot i of buffer set `set` inside the pixel memory. */
static inline uint64_t glt_slot_offset(const glt_slots_header *h, unsigned set, unsigned i) {
    return ((uint64_t)set * h->count + i) * h->slot_bytes;
}

/* The slot formats: a capturable colour format of 1, 2 or 4 channels (CUDA textures have no 3-channel
 * form). NULL, with a message naming the allowed ones, otherwise. */
const glt_format *glt_slot_format(unsigned gl_internal_format);

/* 1 when the process exists (kill(pid, 0) succeeds or is refused for permission). */
int glt_process_alive(int pid);

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
