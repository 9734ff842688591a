/*
 * What the slots' two sides check about each other (slots_shared.h says why): a worker checks the geometry it
 * reads from the trainer's sealed header before it maps or places anything by it; both name processes by pid and
 * start time, so that a zombie or a reused pid is not taken for a live writer or trainer.
 */
#include "slots/slots_shared.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* pidfd_open by number: glibc has no wrapper before 2.36 (the wheel builds against 2.17); Linux 5.3 has the call,
 * with the same number on every architecture. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

uint64_t glt_page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 4096 ? (uint64_t)p : 4096u;
}

/* a * b + c without wrapping, or 0 (no geometry has a zero-sized part). */
static uint64_t mul_add(uint64_t a, uint64_t b, uint64_t c) {
    if (b && a > (UINT64_MAX - c) / b) return 0;
    return a * b + c;
}

const char *glt_slots_geometry_check(const glt_slots_geometry *g, uint64_t page) {
    if (g->backend != GLT_BACKEND_CPU && g->backend != GLT_BACKEND_CUDA) return "unknown backend";
    if (g->count < 1 || g->count > GLT_SLOTS_MAX_COUNT) return "slot count out of range";
    if (g->buffers < 1 || g->buffers > 3) return "buffer sets out of range";
    if (g->width < 1 || g->height < 1 || g->width > GLT_SLOTS_MAX_SIDE || g->height > GLT_SLOTS_MAX_SIDE)
        return "image size out of range";
    const glt_format *f = glt_format_find(g->gl_internal_format);
    if (!f || f->depth || f->channels == 3) return "not a slot format";
    uint64_t bpp = glt_dtype_size(f->dtype) * (uint64_t)f->channels;
    if (g->page < page || g->page % page || g->page > (64u << 20)) return "layout unit not a multiple of the page size";
    if (g->row_pitch < bpp * (uint64_t)g->width || g->row_pitch % GLT_SLOT_PITCH_ALIGN ||
        g->row_pitch > bpp * (uint64_t)g->width + GLT_SLOT_PITCH_ALIGN)
        return "row pitch inconsistent with the width";
    uint64_t image = g->row_pitch * (uint64_t)g->height; /* < 2^15 * 2^19: no wrap */
    if (g->slot_bytes < image || g->slot_bytes % GLT_SLOT_ALIGN || g->slot_bytes > image + (4u << 20))
        return "slot size inconsistent with the image";
    if (g->backend == GLT_BACKEND_CPU && g->slot_bytes % g->page) return "slot size not page-aligned";
    uint64_t pixels = mul_add((uint64_t)g->buffers * g->count, g->slot_bytes, 0);
    if (!pixels) return "pixel size overflows";
    if (g->memory_bytes < pixels || g->memory_bytes - pixels > (64u << 20)) return "pixel memory size inconsistent";
    if (g->control_bytes != g->page) return "control size inconsistent";
    if ((g->control_seals & GLT_SEALS_SIZE) != GLT_SEALS_SIZE ||
        (g->control_seals & ~(uint32_t)(GLT_SEALS_SIZE | GLT_SEAL_FUTURE_WRITE)))
        return "control seals inconsistent";
    if (g->backend == GLT_BACKEND_CPU) {
        if (g->pixel_offset != g->page) return "pixel offset inconsistent";
        if (g->slot_file_bytes != g->page + (uint64_t)g->buffers * g->slot_bytes) return "slot file size inconsistent";
    } else if (g->pixel_offset != 0 || g->slot_file_bytes != g->page) {
        return "slot file size inconsistent";
    }
    return NULL;
}

/* Field 3 (state) and 22 (start time) of /proc/<pid>/stat; 0 when it cannot be read (-1: no such process). */
static int proc_stat(int pid, char *state, uint64_t *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? -1 : 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return n == 0 || errno == ESRCH ? -1 : 0;
    buf[n] = '\0';
    /* The command name (field 2) is in parentheses and may hold anything: the fields after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ') return 0;
    p += 2;
    *state = *p;
    unsigned long long v = 0;
    for (int field = 3; field < 22; ++field) {
        p = strchr(p, ' ');
        if (!p) return 0;
        ++p;
    }
    if (sscanf(p, "%llu", &v) != 1) return 0;
    *start = v;
    return 1;
}

uint64_t glt_process_start_time(int pid) {
    char state = 0;
    uint64_t start = 0;
    return pid > 0 && proc_stat(pid, &state, &start) == 1 ? start : 0;
}

int glt_process_running(int pid, uint64_t start) {
    if (pid <= 0) return 0;
    char state = 0;
    uint64_t now = 0;
    int r = proc_stat(pid, &state, &now);
    if (r < 0) return 0;
    if (r == 0) return kill(pid, 0) == 0 || errno == EPERM; /* no /proc: existence is all we can tell */
    if (state == 'Z' || state == 'X') return 0;
    return !start || now == start;
}

/* fd, a descriptor opened for process `pid` after the pid was looked up: it is of whatever process had the pid
 * then, the one named only if that process still runs and started at `start` (a reused pid started later). fd, or
 * -1 (closed) when it is not. */
static int of_the_same_process(int fd, int pid, uint64_t start) {
    if (fd < 0) return -1;
    if (!glt_process_running(pid, start)) {
        close(fd);
        return -1;
    }
    return fd;
}

int glt_process_watch(int pid, uint64_t start) {
    if (pid <= 0) return -1;
    return of_the_same_process((int)syscall(SYS_pidfd_open, pid, 0) /* close-on-exec always */, pid, start);
}

int glt_process_exited(int pidfd) {
    struct pollfd p = {pidfd, POLLIN, 0};
    int r;
    do r = poll(&p, 1, 0);
    while (r < 0 && errno == EINTR);
    /* Readable once the process exited (zombie), hung up once reaped. An error on our own descriptor says nothing
     * about the process: not taken as exited. */
    return r > 0 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

int glt_process_stat_open(int pid, uint64_t start) {
    if (pid <= 0) return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    /* procfs binds an open file to its process: it reads ESRCH once that one is reaped, even if the pid is reused. */
    return of_the_same_process(open(path, O_RDONLY | O_CLOEXEC), pid, start);
}

int glt_process_stat_exited(int stat_fd) {
    char buf[512];
    ssize_t n;
    do n = pread(stat_fd, buf, sizeof buf - 1, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) return errno == ESRCH; /* reaped; another error on our own descriptor says nothing */
    if (n == 0) return 1;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ') return 0;
    return p[2] == 'Z' || p[2] == 'X';
}
