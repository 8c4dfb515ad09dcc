/* Loading by content (em_store_load, em_store_inspect, em_module_load): safetensors here, other
 * formats through the readers added with em_store_add_reader (ember-pt's PyTorch reader). */
#include "store_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

/* ---- readers of other formats ------------------------------------------------------------ */

#define MAX_READERS 8

static pthread_mutex_t readers_lock = PTHREAD_MUTEX_INITIALIZER;
static const em_store_reader *_Atomic readers[MAX_READERS];
static atomic_int n_readers;

em_status em_store_add_reader(const em_store_reader *reader)
{
    if (!reader || !reader->name || !reader->claims || !reader->load)
        return em_error(EM_ERR_INVALID_ARG, "em_store_add_reader: %s",
                        !reader ? "reader is NULL" : "a reader needs a name, claims and load");
    pthread_mutex_lock(&readers_lock);
    int n = atomic_load(&n_readers);
    em_status st = EM_OK;
    bool known = false;
    for (int i = 0; i < n; i++) known |= atomic_load(&readers[i]) == reader;
    if (!known && n == MAX_READERS) {
        st = em_error(EM_ERR_INVALID_ARG, "em_store_add_reader: %s: more than %d readers",
                      reader->name, MAX_READERS);
    } else if (!known) {
        atomic_store(&readers[n], reader);
        atomic_store(&n_readers, n + 1);
    }
    pthread_mutex_unlock(&readers_lock);
    return st;
}

/* The first reader that claims a file starting with head[0..n), or NULL. */
static const em_store_reader *reader_for(const unsigned char *head, size_t n)
{
    int count = atomic_load(&n_readers);
    for (int i = 0; i < count; i++) {
        const em_store_reader *r = atomic_load(&readers[i]);
        if (r->claims(head, n)) return r;
    }
    return NULL;
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
    size_t got = st_head(fd, head, sizeof head);
    st_format f = st_sniff(head, got);
    char who[600];
    snprintf(who, sizeof who, "%s: %s", fn, path);
    if (f == ST_FMT_SAFETENSORS) {
        if (info) {
            *info = st_safetensors_inspect_fd(fd, size, who);
            return NULL;
        }
        return st_safetensors_load_fd(fd, size, who, opts && opts->copy);
    }
    const em_store_reader *r = reader_for(head, got);
    if (r && info && !r->inspect) {
        close(fd);
        em_error(EM_ERR_UNSUPPORTED, "%s: the %s reader cannot list a file", who, r->name);
        return NULL;
    }
    if (r && info) {
        *info = r->inspect(fd, size, who);
        return NULL;
    }
    if (r) return r->load(fd, size, who);
    close(fd);
    if (f == ST_FMT_ZIP)
        em_error(EM_ERR_UNSUPPORTED,
                 "%s: %s; reading one needs the ember-pt library and em_pt_register()", who,
                 st_format_desc(f));
    else
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
