/* Opening model files: regular files only (a FIFO or device would block or never end), the
 * format told by the first bytes, messages that say what is wrong with the file the user named,
 * the readers' limits from the configuration, and loading by content (em_store_load). */
#include "store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- limits ------------------------------------------------------------------------------ */

static uint64_t limit(const char *key, uint64_t fallback, uint64_t unit)
{
    int64_t v = em_config_get_int(key, (int64_t)fallback);
    if (v <= 0) {
        em_log_msg("store", EM_LOG_WARN, "%s = %lld is not a positive integer; using %llu", key,
                   (long long)v, (unsigned long long)fallback);
        v = (int64_t)fallback;
    }
    uint64_t r;
    if (__builtin_mul_overflow((uint64_t)v, unit, &r)) r = UINT64_MAX;
    return r;
}

st_limits st_get_limits(void)
{
    const uint64_t mib = 1 << 20;
    return (st_limits){
        .max_header = limit("store_max_header", 100000000, 1),
        .max_pickle = limit("store_max_pickle", 256 * mib, 1),
        .max_memory = limit("store_max_memory_mb", 1024, mib),
        .budget_scale = limit("store_budget_scale", 1, 1),
        .expand_ratio = limit("store_expand_ratio", 16, 1),
        .expand_min = limit("store_expand_min_mb", 64, mib),
        .zip_ratio = limit("store_zip_ratio", 200, 1),
        .zip_entries = limit("store_zip_entries", 1000000, 1),
    };
}

uint64_t st_budget(uint64_t per_byte, uint64_t size, uint64_t base, uint64_t scale)
{
    uint64_t r;
    if (__builtin_mul_overflow(per_byte, size, &r) || __builtin_add_overflow(r, base, &r) ||
        __builtin_mul_overflow(r, scale, &r))
        return UINT64_MAX;
    return r;
}

/* ---- opening ----------------------------------------------------------------------------- */

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

int st_open(const char *fn, const char *path, uint64_t *size)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            em_error(EM_ERR_IO, "%s: cannot open %s: no such file", fn, path);
        else if (e == EACCES)
            em_error(EM_ERR_IO, "%s: cannot open %s: permission denied", fn, path);
        else
            em_error(EM_ERR_IO, "%s: cannot open %s: %s", fn, path, strerror(e));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        em_error(EM_ERR_IO, "%s: cannot stat %s: %s", fn, path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        em_error(EM_ERR_IO, "%s: %s is %s, not a model file", fn, path, file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *size = (uint64_t)st.st_size;
    return fd;
}

size_t st_head(int fd, unsigned char *buf, size_t cap)
{
    size_t got = 0;
    while (got < cap) {
        ssize_t r = pread(fd, buf + got, cap - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

st_format st_sniff(const unsigned char *b, size_t n)
{
    if (n == 0) return ST_FMT_EMPTY;
    if (n >= 4 && b[0] == 'P' && b[1] == 'K' &&
        ((b[2] == 3 && b[3] == 4) || (b[2] == 5 && b[3] == 6) || (b[2] == 7 && b[3] == 8)))
        return ST_FMT_ZIP;
    if (n >= 262 && memcmp(b + 257, "ustar", 5) == 0) return ST_FMT_TAR;
    if (n >= 2 && b[0] == 0x80 && b[1] <= 5) return ST_FMT_PICKLE;
    if (n >= 9 && b[8] == '{') return ST_FMT_SAFETENSORS;
    return ST_FMT_UNKNOWN;
}

const char *st_format_desc(st_format f)
{
    switch (f) {
    case ST_FMT_EMPTY: return "the file is empty";
    case ST_FMT_ZIP: return "it is a zip archive (a PyTorch .pt/.pth file?)";
    case ST_FMT_SAFETENSORS: return "it is a safetensors file";
    case ST_FMT_PICKLE:
        return "it is a bare pickle: a legacy (pre-1.6) torch.save file, which Ember does not "
               "read (re-save it with PyTorch 1.6 or later)";
    case ST_FMT_TAR:
        return "it is a tar archive: a legacy torch.save file, which Ember does not read (re-save "
               "it with PyTorch 1.6 or later)";
    case ST_FMT_UNKNOWN: break;
    }
    return "its first bytes match no format Ember reads";
}

/* ---- loading by content ------------------------------------------------------------------ */

em_tensor_dict *st_load_any(const char *fn, const char *path, const em_safetensors_opts *opts,
                            em_store_info **info)
{
    if (!path) {
        em_error(EM_ERR_INVALID_ARG, "%s: path is NULL", fn);
        return NULL;
    }
    uint64_t size;
    int fd = st_open(fn, path, &size);
    if (fd < 0) return NULL;
    unsigned char head[512];
    st_format f = st_sniff(head, st_head(fd, head, sizeof head));
    char who[600];
    snprintf(who, sizeof who, "%s: %s", fn, path);
    if (f == ST_FMT_ZIP) {
        if (info) {
            *info = pt_inspect_fd(fd, size, who);
            return NULL;
        }
        return pt_load_fd(fd, size, who);
    }
    if (f == ST_FMT_SAFETENSORS) {
        if (info) {
            *info = st_safetensors_inspect_fd(fd, size, who);
            return NULL;
        }
        return st_safetensors_load_fd(fd, size, who, opts && opts->copy);
    }
    close(fd);
    em_error(EM_ERR_FORMAT, "%s: neither a safetensors file nor a PyTorch zip archive: %s", who,
             st_format_desc(f));
    return NULL;
}

em_tensor_dict *em_store_load(const char *path)
{
    return st_load_any("em_store_load", path, NULL, NULL);
}

em_store_info *em_store_inspect(const char *path)
{
    em_store_info *info = NULL;
    st_load_any("em_store_inspect", path, NULL, &info);
    return info;
}
