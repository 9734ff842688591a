/*
 * The slots' memfds, sealed (slots_shared.h says why). Every one is sealed against shrinking, growing and further
 * sealing once sized, before any descriptor leaves the trainer: a worker that holds one cannot make the trainer's
 * (or another worker's) mapping run past the file's end, which would kill that process with SIGBUS at its next
 * access. The geometry's memfd is sealed against writing too: the trainer writes the header once with write(),
 * never mapping it. A seal binds every descriptor and every process: a worker that holds the descriptor cannot
 * write a write-sealed memfd, map it writable (MAP_SHARED), reopen it writable through /proc, resize any of them,
 * or take a seal off. Both sides check the seals before use.
 */
#include "slots/slots_shared.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* memfd_create and the seals through their raw numbers: glibc has the wrapper and the constants only from 2.27,
 * and the wheel is built against glibc 2.17 (manylinux2014). The calls need Linux 3.17. */
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_GET_SEALS 1034
#endif
#ifndef F_SEAL_SEAL
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#define F_SEAL_WRITE 0x0008
#endif
#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1 */
#endif
#ifndef SEEK_HOLE
#define SEEK_DATA 3
#define SEEK_HOLE 4
#endif
#if defined(SYS_memfd_create)
#define GLT_SYS_MEMFD_CREATE SYS_memfd_create
#elif defined(__NR_memfd_create)
#define GLT_SYS_MEMFD_CREATE __NR_memfd_create
#elif defined(__x86_64__)
#define GLT_SYS_MEMFD_CREATE 319
#elif defined(__aarch64__)
#define GLT_SYS_MEMFD_CREATE 279
#endif

#define SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
_Static_assert(GLT_SEALS_SIZE == (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW), "the size seals");
_Static_assert(GLT_SEAL_FUTURE_WRITE == F_SEAL_FUTURE_WRITE, "F_SEAL_FUTURE_WRITE");

int glt_memfd_create(const char *name, int sealable) {
#ifdef GLT_SYS_MEMFD_CREATE
    return (int)syscall(GLT_SYS_MEMFD_CREATE, name, MFD_CLOEXEC | (sealable ? MFD_ALLOW_SEALING : 0u));
#else
    (void)name;
    (void)sealable;
    errno = ENOSYS;
    return -1;
#endif
}

glt_status glt_slots_header_seal(const glt_slots_header *h, int *fd_out) {
    *fd_out = -1;
    int fd = glt_memfd_create("gltensor-slots-geometry", 1);
    if (fd < 0) {
        int err = errno;
        return glt_fail(err == ENOSYS ? GLT_UNSUPPORTED : GLT_OUT_OF_MEMORY,
                        "memfd_create of the shared slots' geometry failed (%s); %s", strerror(err),
                        err == ENOSYS ? "it needs Linux 3.17 or newer: upgrade the kernel"
                                      : "free memory or raise the process's limit of open files");
    }
    const char *step = "writing";
    int err = 0;
    ssize_t n = pwrite(fd, h, sizeof *h, 0);
    if (n != (ssize_t)sizeof *h) {
        err = n < 0 ? errno : EIO;
    } else if (fcntl(fd, F_ADD_SEALS, SEALS) != 0) {
        err = errno;
        step = "sealing";
    }
    if (err) {
        close(fd);
        return glt_fail(GLT_UNSUPPORTED,
                        "%s the shared slots' geometry memfd failed (%s): workers could not trust it; the kernel "
                        "must offer memfd seals (Linux 3.17 or newer, not disabled by a sandbox)",
                        step, strerror(err));
    }
    *fd_out = fd;
    return GLT_OK;
}

glt_status glt_slots_header_read(int fd, glt_slots_header *out) {
    errno = 0;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & SEALS) != SEALS)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "the shared slots' geometry descriptor %d is not sealed against writing (%s%s): a worker "
                        "trusts no geometry another worker could have rewritten; pass the descriptor "
                        "glt_slots_export_geometry gave (SharedSlots.handle() does), from a trainer of this gltensor",
                        fd, seals < 0 ? strerror(errno) : "seals ", seals < 0 ? "" : "missing");
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size != (off_t)sizeof *out)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "the shared slots' geometry descriptor %d holds %lld bytes, not gltensor's %zu-byte header: "
                        "the trainer and this worker must run the same gltensor",
                        fd, (long long)st.st_size, sizeof *out);
    if (pread(fd, out, sizeof *out, 0) != (ssize_t)sizeof *out)
        return glt_fail(GLT_INVALID_ARGUMENT, "reading the shared slots' geometry (descriptor %d) failed (%s)", fd,
                        errno ? strerror(errno) : "short read");
    if (out->magic != GLT_SLOTS_MAGIC || out->version != GLT_SLOTS_VERSION)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "descriptor %d does not hold gltensor shared slots of this version (magic %#llx, version %u; "
                        "expected %#llx, %u): the trainer and this worker must run the same gltensor",
                        fd, (unsigned long long)out->magic, out->version, (unsigned long long)GLT_SLOTS_MAGIC,
                        GLT_SLOTS_VERSION);
    return GLT_OK;
}

glt_status glt_memfd_sized(const char *name, uint64_t bytes, int *fd_out) {
    *fd_out = -1;
    int fd = glt_memfd_create(name, 1);
    if (fd < 0) {
        int err = errno;
        return glt_fail(err == ENOSYS ? GLT_UNSUPPORTED : GLT_OUT_OF_MEMORY,
                        "memfd_create of the shared slots' memory (%s) failed (%s); %s", name, strerror(err),
                        err == ENOSYS   ? "it needs Linux 3.17 or newer: upgrade the kernel"
                        : err == EMFILE ? "the process has as many files open as its limit allows (the slots need "
                                          "one descriptor per slot): raise it (ulimit -n), or make fewer slots"
                                        : "free memory or raise the process's limits, or make fewer or smaller slots");
    }
    if (ftruncate(fd, (off_t)bytes) != 0) {
        int err = errno;
        close(fd);
        return glt_fail(GLT_OUT_OF_MEMORY, "sizing the shared slots' memory (%s) to %llu bytes failed (%s)", name,
                        (unsigned long long)bytes, strerror(err));
    }
    *fd_out = fd;
    return GLT_OK;
}

glt_status glt_memfd_seal(int fd, const char *what, int future_write, uint32_t *seals_out) {
    int seals = GLT_SEALS_SIZE;
    /* F_SEAL_FUTURE_WRITE first, alone: a kernel before 5.1 refuses the unknown seal (EINVAL), and once F_SEAL_SEAL
     * is set no seal can be added. The trainer's own writable mapping, made before, keeps working. */
    if (future_write && fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) == 0) seals |= F_SEAL_FUTURE_WRITE;
    int got = fcntl(fd, F_ADD_SEALS, GLT_SEALS_SIZE) == 0 ? fcntl(fd, F_GET_SEALS) : -1;
    if (got < 0 || (got & seals) != seals) {
        int err = errno;
        return glt_fail(GLT_UNSUPPORTED,
                        "sealing the shared slots' %s against resizing failed (%s): a worker could shrink it under "
                        "the trainer; the kernel must offer memfd seals (Linux 3.17 or newer, not disabled by a "
                        "sandbox)",
                        what, got < 0 ? strerror(err) : "seals missing after F_ADD_SEALS");
    }
    if (seals_out) *seals_out = (uint32_t)seals;
    return GLT_OK;
}

static const char *seal_names(uint32_t seals, char *out, size_t n) {
    static const struct { uint32_t bit; const char *name; } names[] = {
        {F_SEAL_SHRINK, "F_SEAL_SHRINK"}, {F_SEAL_GROW, "F_SEAL_GROW"}, {F_SEAL_SEAL, "F_SEAL_SEAL"},
        {F_SEAL_WRITE, "F_SEAL_WRITE"},   {F_SEAL_FUTURE_WRITE, "F_SEAL_FUTURE_WRITE"},
    };
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof *names; ++i)
        if ((seals & names[i].bit) && used < n)
            used += (size_t)snprintf(out + used, n - used, "%s%s", used ? " " : "", names[i].name);
    return out;
}

glt_status glt_memfd_check(int fd, const char *what, uint32_t need, uint64_t bytes) {
    errno = 0;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || ((uint32_t)seals & need) != need) {
        char missing[160];
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "the shared slots' %s (descriptor %d) is not sealed against resizing (%s%s): a process holding "
                        "it could shrink it under the others' mappings; pass the descriptors the trainer exported "
                        "(SharedSlots.handle() gives them), from a trainer of this gltensor",
                        what, fd, seals < 0 ? strerror(errno) : "missing ",
                        seals < 0 ? "" : seal_names(need & ~(uint32_t)seals, missing, sizeof missing));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != bytes)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "the shared slots' %s (descriptor %d) holds %lld bytes, not the %llu its geometry says: pass "
                        "the descriptors of one SharedSlots, and run the trainer and this worker with the same "
                        "gltensor",
                        what, fd, (long long)st.st_size, (unsigned long long)bytes);
    return GLT_OK;
}

int glt_memfd_hole_at(int fd, uint64_t offset) {
    off_t hole = lseek(fd, (off_t)offset, SEEK_HOLE);
    return hole >= 0 && (uint64_t)hole == offset;
}
