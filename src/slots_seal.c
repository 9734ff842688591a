/*
 * The slots' geometry, sealed (slots_shared.h says why): the trainer writes the header once into a memfd of its
 * own with write(), before any descriptor leaves the process and without ever mapping it, then seals it against
 * writing, resizing and further sealing. A seal binds every descriptor and every process: a worker that holds
 * the descriptor cannot write it, map it writable (MAP_SHARED), reopen it writable through /proc or take a seal
 * off. Workers check the seals before they read a byte of it.
 */
#include "slots_shared.h"

#include <errno.h>
#include <fcntl.h>
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
