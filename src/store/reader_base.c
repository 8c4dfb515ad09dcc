/* What every model-file reader needs: opening a file safely and telling its format, the
 * readers' limits and budgets, the keyed name index, store info lists and UTF-8 checks. The core
 * library holds these, and libember-pt.so a private copy (the .pt reader is a library of its own
 * and sees only the core's public functions); none of them keeps state the two copies share. */
#include "../core/file_open.h"
#include "store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- limits ------------------------------------------------------------------------------ */

/* The key's value times unit (saturating). The keys are positive integers (config_keys.def):
 * the public getter, as libember-pt.so's copy of this file sees only the core's public API. */
static uint64_t limit(const char *key, uint64_t unit)
{
    int64_t v = em_config_get_int(key);
    uint64_t r;
    if (__builtin_mul_overflow((uint64_t)v, unit, &r)) r = UINT64_MAX;
    return r;
}

st_limits st_get_limits(void)
{
    const uint64_t mib = 1 << 20;
    return (st_limits){
        .max_header = limit("store_max_header", 1),
        .max_pickle = limit("store_max_pickle", 1),
        .max_memory = limit("store_max_memory_mb", mib),
        .budget_scale = limit("store_budget_scale", 1),
        .expand_ratio = limit("store_expand_ratio", 1),
        .expand_min = limit("store_expand_min_mb", mib),
        .zip_ratio = limit("store_zip_ratio", 1),
        .zip_entries = limit("store_zip_entries", 1),
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

int st_open(const char *fn, const char *path, uint64_t *size)
{
    const char *why;
    int fd = core_open_regular(path, size, &why);
    if (fd >= 0) return fd;
    if (errno == EINVAL)
        em_error(EM_ERR_IO, "%s: %s is %s, not a model file", fn, path, why);
    else
        em_error(EM_ERR_IO, "%s: cannot open %s: %s", fn, path, why);
    return -1;
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

/* ---- name index -------------------------------------------------------------------------- */

/* Names come from files, so the hash is keyed (SipHash-1-3 with a key drawn once per process):
 * a file cannot be built whose names all land in one bucket and make lookups quadratic. */
static uint64_t sip_key[2];
static pthread_once_t sip_once = PTHREAD_ONCE_INIT;

static void sip_init(void)
{
    if (getrandom(sip_key, sizeof sip_key, GRND_NONBLOCK) != (ssize_t)sizeof sip_key) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sip_key[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&ts;
        sip_key[1] = (uint64_t)ts.tv_sec * 0xbf58476d1ce4e5b9ull ^ (uint64_t)getpid();
    }
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1, v1 = ROTL(v1, 13), v1 ^= v0, v0 = ROTL(v0, 32);                                  \
        v2 += v3, v3 = ROTL(v3, 16), v3 ^= v2;                                                     \
        v0 += v3, v3 = ROTL(v3, 21), v3 ^= v0;                                                     \
        v2 += v1, v1 = ROTL(v1, 17), v1 ^= v2, v2 = ROTL(v2, 32);                                  \
    } while (0)

uint64_t st_hash(const char *s)
{
    pthread_once(&sip_once, sip_init);
    uint64_t v0 = 0x736f6d6570736575ull ^ sip_key[0], v1 = 0x646f72616e646f6dull ^ sip_key[1];
    uint64_t v2 = 0x6c7967656e657261ull ^ sip_key[0], v3 = 0x7465646279746573ull ^ sip_key[1];
    size_t len = strlen(s), i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t m;
        memcpy(&m, s + i, 8); /* little-endian hosts (docs/store.md) */
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t k = 0; i + k < len; k++) b |= (uint64_t)(unsigned char)s[i + k] << (8 * k);
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

int64_t st_index_find(const st_index *ix, const char *name, st_name_fn name_at, const void *ctx)
{
    if (!ix->cap) return -1;
    uint64_t h = st_hash(name), mask = (uint64_t)ix->cap - 1;
    for (uint64_t k = h & mask;; k = (k + 1) & mask) {
        if (ix->pos[k] < 0) return -1;
        if (ix->hash[k] == h && strcmp(name_at(ctx, ix->pos[k]), name) == 0) return ix->pos[k];
    }
}

static void index_put(st_index *ix, uint64_t h, int64_t pos)
{
    uint64_t mask = (uint64_t)ix->cap - 1, k = h & mask;
    while (ix->pos[k] >= 0) k = (k + 1) & mask;
    ix->pos[k] = pos;
    ix->hash[k] = h;
}

bool st_index_add(st_index *ix, const char *name, int64_t pos)
{
    if (2 * (ix->n + 1) > ix->cap) { /* load factor at most 1/2 */
        int64_t cap = ix->cap ? 2 * ix->cap : 16;
        st_index g = {em_alloc((size_t)cap * sizeof *g.pos), em_alloc((size_t)cap * sizeof *g.hash),
                      cap, ix->n};
        if (!g.pos || !g.hash) {
            em_free(g.pos);
            em_free(g.hash);
            return false;
        }
        for (int64_t i = 0; i < cap; i++) g.pos[i] = -1;
        for (int64_t i = 0; i < ix->cap; i++)
            if (ix->pos[i] >= 0) index_put(&g, ix->hash[i], ix->pos[i]);
        st_index_free(ix);
        *ix = g;
    }
    index_put(ix, st_hash(name), pos);
    ix->n++;
    return true;
}

void st_index_free(st_index *ix)
{
    em_free(ix->pos);
    em_free(ix->hash);
    *ix = (st_index){0};
}

char *st_strdup(const char *s)
{
    size_t n = strlen(s);
    char *r = em_alloc(n + 1);
    if (r) memcpy(r, s, n + 1);
    return r;
}

void st_free_deleter(void *data, void *user)
{
    (void)user;
    em_free(data);
}

em_tensor *st_own(em_tensor *t)
{
    if (!t) return NULL;
    em_retain(t);
    em_release(t); /* drops a scope's reference when there is one */
    return t;
}

bool st_grow(void **arr, int64_t *cap, int64_t need, size_t size)
{
    if (need <= *cap) return true;
    int64_t nc = *cap ? *cap * 2 : 8;
    while (nc < need) nc *= 2;
    void *na = em_alloc((size_t)nc * size);
    if (!na) return false;
    if (*arr) memcpy(na, *arr, (size_t)*cap * size);
    em_free(*arr);
    *arr = na;
    *cap = nc;
    return true;
}

/* ---- store info -------------------------------------------------------------------------- */

em_store_info *st_info_new(void)
{
    return em_calloc(sizeof(em_store_info));
}

static const char *entry_name_at(const void *arr, int64_t i)
{
    return ((const em_store_entry *)arr)[i].name;
}

em_status st_info_add(em_store_info *info, const char *who, const char *name, em_dtype dt,
                      em_shape shape, int64_t nbytes, int64_t offset)
{
    if (st_index_find(&info->names_ix, name, entry_name_at, info->entries) >= 0)
        return em_error(EM_ERR_FORMAT, "%s: duplicate tensor name \"%.200s\"", who, name);
    if (!st_grow((void **)&info->entries, &info->cap, info->n + 1, sizeof *info->entries))
        return EM_ERR_OOM;
    char *copy = st_strdup(name);
    if (!copy) return EM_ERR_OOM;
    if (!st_index_add(&info->names_ix, name, info->n)) {
        em_free(copy);
        return EM_ERR_OOM;
    }
    info->entries[info->n++] = (em_store_entry){
        .name = copy, .dtype = dt, .shape = shape, .nbytes = nbytes, .offset = offset};
    return EM_OK;
}

/* ---- UTF-8 ------------------------------------------------------------------------------- */

/* Length of the UTF-8 sequence at s (at most n bytes), 0 when malformed. */
size_t st_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned min, cp;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2, min = 0x80, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, min = 0x800, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

bool js_utf8_valid(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t k = st_utf8_len(s + i, len - i);
        if (!k) return false;
        i += k;
    }
    return true;
}
