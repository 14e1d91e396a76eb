/*
 * LD_PRELOAD shim for the sync-point fault test (tests/sync_faults.rs): counts
 * fdatasync and pwrite64/pwrite calls process-wide (every thread shares one counter,
 * unlike strace's per-thread `inject ... when=N`) and
 *
 *   REBLOCK_SHIM_KILL_AT_SYNC=N   SIGKILLs the process on entering its N-th fdatasync;
 *   REBLOCK_SHIM_FAIL_AT_WRITE=N  fails its N-th pwrite with REBLOCK_SHIM_ERRNO
 *                                 (ENOSPC or EIO), changing nothing;
 *   REBLOCK_SHIM_COUNTS=FILE      keeps "SYNCS WRITES" in FILE, updated at every call.
 *
 * Built by the test with cc; never part of the product.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static atomic_long syncs, writes;
static long kill_at_sync, fail_at_write;
static int fail_errno = EIO, counts_fd = -1;
static int (*real_fdatasync)(int);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);

__attribute__((constructor)) static void shim_init(void) {
    const char *k = getenv("REBLOCK_SHIM_KILL_AT_SYNC");
    const char *f = getenv("REBLOCK_SHIM_FAIL_AT_WRITE");
    const char *e = getenv("REBLOCK_SHIM_ERRNO");
    const char *c = getenv("REBLOCK_SHIM_COUNTS");
    kill_at_sync = k ? atol(k) : 0;
    fail_at_write = f ? atol(f) : 0;
    if (e && strcmp(e, "ENOSPC") == 0)
        fail_errno = ENOSPC;
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    real_pwrite64 = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    if (c)
        counts_fd = open(c, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

static void note_counts(void) {
    char b[64];
    if (counts_fd < 0)
        return;
    int n = snprintf(b, sizeof b, "%ld %ld\n", atomic_load(&syncs), atomic_load(&writes));
    if (ftruncate(counts_fd, 0) == 0)
        (void)real_pwrite64(counts_fd, b, (size_t)n, 0);
}

int fdatasync(int fd) {
    long n = atomic_fetch_add(&syncs, 1) + 1;
    if (n == kill_at_sync)
        kill(getpid(), SIGKILL);
    note_counts();
    return real_fdatasync(fd);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off) {
    if (fd == counts_fd)
        return real_pwrite64(fd, buf, len, off);
    long n = atomic_fetch_add(&writes, 1) + 1;
    note_counts();
    if (n == fail_at_write) {
        errno = fail_errno;
        return -1;
    }
    return real_pwrite64(fd, buf, len, off);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off) {
    return pwrite64(fd, buf, len, off);
}
