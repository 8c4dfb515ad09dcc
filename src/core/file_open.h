/* Opening a file that untrusted input names: regular files only, so a FIFO, a device or a
 * directory is refused at once instead of blocking or being read forever. Static inline: every
 * library (core and components) compiles its own copy. */
#ifndef EMBER_FILE_OPEN_H
#define EMBER_FILE_OPEN_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What mode is, for messages ("a FIFO"). */
static inline const char *core_file_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

/* Opens path read-only when it is a regular file: the descriptor (in blocking mode) and *size,
 * or -1 with *why saying what is wrong ("no such file", "a FIFO", ...) and errno as the open or
 * the check left it (ENOENT for a missing file). */
static inline int core_open_regular(const char *path, uint64_t *size, const char **why)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        *why = e == ENOENT ? "no such file" : e == EACCES ? "permission denied" : strerror(e);
        errno = e;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        *why = strerror(e);
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        *why = core_file_kind(st.st_mode);
        close(fd);
        errno = EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (size) *size = (uint64_t)st.st_size;
    return fd;
}

#endif
