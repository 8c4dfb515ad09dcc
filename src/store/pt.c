/* PyTorch .pt/.pth import, the ember-pt library: the zip container through libzip, checked entry
 * by entry, and a restricted pickle interpreter that builds only containers, scalars, strings and
 * tensors from torch's rebuild functions; it calls nothing and refuses every other opcode and
 * global. It uses the core's public API and reader_base.c only. */
#include <ember/pt.h>

#include "store_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#define PT_MAX_STACK  (1 << 20)
#define PT_MAX_MARKS  (1 << 16)
#define PT_MAX_MEMO   (1 << 20)
#define PT_MAX_STRING (64 << 20)
#define PT_MAX_DEPTH  64
#define PT_MAX_ENTRY  ((zip_uint64_t)1 << 40)
/* Budgets proportional to the pickle's size (times store_budget_scale). A pickle can point at
 * one object from many places through its memo, so what it costs to walk or copy is not
 * bounded by its size: these are. A plain state dict uses a small part of each. */
#define PT_WORK_PER_BYTE 4 /* container items visited while collecting tensors */
#define PT_WORK_BASE     65536
#define PT_OUT_PER_BYTE  16  /* bytes of names (plus PT_OUT_ENTRY per tensor) listed */
#define PT_OUT_ENTRY     256 /* about what a listed entry takes beyond its name */
#define PT_OUT_BASE      (1 << 20)
#define PT_MEM_PER_BYTE  32 /* interpreter memory */
#define PT_MEM_BASE      (16 << 20)

typedef enum pv_type {
    PV_NONE,
    PV_BOOL,
    PV_INT,
    PV_FLOAT,
    PV_STR,
    PV_TUPLE,
    PV_LIST,
    PV_DICT,
    PV_GLOBAL,
    PV_STORAGE,
    PV_TENSOR,
} pv_type;

typedef enum g_kind { G_ORDERED_DICT, G_REBUILD_TENSOR, G_REBUILD_PARAM, G_STORAGE } g_kind;

typedef struct pt_storage {
    char key[64];
    em_dtype dtype;
    int64_t numel;
    zip_int64_t index; /* zip entry, -1 without an archive */
    unsigned char *data;
} pt_storage;

/* A tensor: a strided view of a storage. `made` is the Ember tensor built for it, once, and
 * shared by every name that reaches it (a tensor the pickle references twice is one tensor). */
typedef struct pt_view {
    struct pt_view *next;
    pt_storage *st;
    int64_t offset;
    em_shape shape;
    int64_t strides[EM_MAX_RANK];
    em_tensor *made;
} pt_view;

/* One unpickled object. The unions keep it at 40 bytes: small pickles of many objects take
 * memory in proportion (interpreter memory is budgeted per byte of pickle). */
typedef struct pv pv;
struct pv {
    uint8_t type;  /* pv_type */
    uint8_t g;     /* g_kind of a PV_GLOBAL */
    uint8_t dtype; /* em_dtype of a PV_GLOBAL storage class */
    union {
        int64_t i; /* PV_INT, PV_BOOL */
        double f;  /* PV_FLOAT */
    };
    union {
        char *s;        /* PV_STR (n bytes) */
        pv **items;     /* tuple/list items; dict: key, value, key, value... */
        pt_storage *st; /* PV_STORAGE */
        pt_view *view;  /* PV_TENSOR */
    };
    int64_t n, cap;
};

/* The interpreter's objects live in 64 KiB chunks freed together. */
typedef struct block {
    struct block *next;
    size_t used, cap;
} block;

typedef struct vm {
    const unsigned char *p, *end;
    const char *who;
    st_limits lim;
    pv **stack;
    int64_t sp, scap;
    int64_t *marks;
    int64_t nmarks, mcap;
    pv **memo;
    int64_t memocap;
    block *blocks;
    uint64_t bytes, max_bytes; /* interpreter memory */
    uint64_t work, max_work;   /* container items visited */
    uint64_t out, max_out;     /* names listed */
    uint64_t copied, max_copy; /* bytes of tensors copied out */
    uint64_t storage_bytes;    /* in the storages the pickle declares */
    uint64_t pickle_size;
    pt_storage **storages; /* by first use */
    int64_t nst, capst;
    st_index st_ix; /* storages by key */
    pt_view *views;
    zip_t *za;
    uint64_t archive_size;
    const char *prefix;
} vm;

static const struct {
    const char *name;
    em_dtype dtype;
} storage_types[] = {
    {"FloatStorage", EM_F32},     {"DoubleStorage", EM_F64}, {"HalfStorage", EM_F16},
    {"BFloat16Storage", EM_BF16}, {"LongStorage", EM_I64},   {"IntStorage", EM_I32},
    {"ShortStorage", EM_I16},     {"CharStorage", EM_I8},    {"ByteStorage", EM_U8},
    {"BoolStorage", EM_BOOL},
};

static void *vm_alloc(vm *m, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    block *b = m->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (m->bytes + cap > m->max_bytes) {
            em_error(EM_ERR_FORMAT,
                     "%s: the pickle needs more than %llu bytes of memory to interpret (limits "
                     "store_budget_scale, store_max_memory_mb)",
                     m->who, (unsigned long long)m->max_bytes);
            return NULL;
        }
        b = em_alloc(sizeof(block) + 16 + cap);
        if (!b) return NULL;
        b->next = m->blocks;
        b->used = 0;
        b->cap = cap;
        m->blocks = b;
        m->bytes += cap;
    }
    /* 16-byte aligned: the data starts 16 bytes after the 16-byte aligned header */
    char *r = (char *)b + ((sizeof(block) + 15) & ~(size_t)15) + b->used;
    b->used += n;
    memset(r, 0, n);
    return r;
}

static pv *new_pv(vm *m, pv_type t)
{
    pv *v = vm_alloc(m, sizeof *v);
    if (v) v->type = t;
    return v;
}

static bool fail(vm *m, const char *fmt, const char *arg)
{
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, arg);
    em_error(EM_ERR_FORMAT, "%s: %s", m->who, msg);
    return false;
}

static bool failf(vm *m, const char *fmt, ...) EM_PRINTF(2, 3);
static bool failf(vm *m, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    em_error(EM_ERR_FORMAT, "%s: %s", m->who, msg);
    return false;
}

static bool push(vm *m, pv *v)
{
    if (!v) return false;
    if (m->sp == m->scap) {
        if (m->scap >= PT_MAX_STACK)
            return fail(m, "pickle stack deeper than %s entries", "1048576");
        int64_t nc = m->scap ? m->scap * 2 : 64;
        pv **ns = em_alloc((size_t)nc * sizeof *ns);
        if (!ns) return false;
        if (m->stack) memcpy(ns, m->stack, (size_t)m->sp * sizeof *ns);
        em_free(m->stack);
        m->stack = ns;
        m->scap = nc;
    }
    m->stack[m->sp++] = v;
    return true;
}

static pv *pop(vm *m)
{
    int64_t floor = m->nmarks ? m->marks[m->nmarks - 1] : 0;
    if (m->sp <= floor) {
        fail(m, "pickle stack underflow%s", "");
        return NULL;
    }
    return m->stack[--m->sp];
}

static pv *top(vm *m)
{
    int64_t floor = m->nmarks ? m->marks[m->nmarks - 1] : 0;
    if (m->sp <= floor) {
        fail(m, "pickle stack underflow%s", "");
        return NULL;
    }
    return m->stack[m->sp - 1];
}

/* Pops back to the last MARK; the items are m->stack[*first .. m->sp) before the call. */
static bool pop_mark(vm *m, int64_t *first)
{
    if (!m->nmarks) return fail(m, "pickle uses items without a MARK%s", "");
    *first = m->marks[--m->nmarks];
    return true;
}

static bool add_item(vm *m, pv *c, pv *item)
{
    if (c->n == c->cap) {
        int64_t nc = c->cap ? c->cap * 2 : 4;
        pv **ni = vm_alloc(m, (size_t)nc * sizeof *ni);
        if (!ni) return false;
        if (c->items) memcpy(ni, c->items, (size_t)c->n * sizeof *ni);
        c->items = ni;
        c->cap = nc;
    }
    c->items[c->n++] = item;
    return true;
}

static bool need(vm *m, size_t n)
{
    if ((size_t)(m->end - m->p) < n) return fail(m, "pickle truncated%s", "");
    return true;
}

static uint64_t rd_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static pv *make_str(vm *m, size_t len)
{
    if (len > PT_MAX_STRING) {
        fail(m, "pickle string longer than %s bytes", "67108864");
        return NULL;
    }
    if (!need(m, len)) return NULL;
    if (!js_utf8_valid(m->p, len) || memchr(m->p, 0, len)) {
        fail(m, "pickle string is not valid UTF-8 text%s", "");
        return NULL;
    }
    pv *v = new_pv(m, PV_STR);
    if (!v) return NULL;
    v->s = vm_alloc(m, len + 1);
    if (!v->s) return NULL;
    memcpy(v->s, m->p, len);
    v->n = (int64_t)len;
    m->p += len;
    return v;
}

static bool read_line(vm *m, char *out, size_t cap)
{
    const unsigned char *nl = memchr(m->p, '\n', (size_t)(m->end - m->p));
    if (!nl) return fail(m, "pickle truncated in GLOBAL%s", "");
    size_t n = (size_t)(nl - m->p);
    if (n >= cap) return fail(m, "GLOBAL name longer than %s bytes", "200");
    for (size_t i = 0; i < n; i++)
        if (m->p[i] < 0x20 || m->p[i] > 0x7e) return fail(m, "GLOBAL name is not printable%s", "");
    memcpy(out, m->p, n);
    out[n] = 0;
    m->p = nl + 1;
    return true;
}

static pv *op_global(vm *m)
{
    char mod[200], name[200];
    if (!read_line(m, mod, sizeof mod) || !read_line(m, name, sizeof name)) return NULL;
    pv *g = new_pv(m, PV_GLOBAL);
    if (!g) return NULL;
    if (strcmp(mod, "collections") == 0 && strcmp(name, "OrderedDict") == 0) {
        g->g = G_ORDERED_DICT;
        return g;
    }
    if (strcmp(mod, "torch._utils") == 0 && strcmp(name, "_rebuild_tensor_v2") == 0) {
        g->g = G_REBUILD_TENSOR;
        return g;
    }
    if (strcmp(mod, "torch._utils") == 0 && strcmp(name, "_rebuild_parameter") == 0) {
        g->g = G_REBUILD_PARAM;
        return g;
    }
    if (strcmp(mod, "torch") == 0)
        for (size_t i = 0; i < sizeof storage_types / sizeof storage_types[0]; i++)
            if (strcmp(name, storage_types[i].name) == 0) {
                g->g = G_STORAGE;
                g->dtype = storage_types[i].dtype;
                return g;
            }
    char full[420];
    snprintf(full, sizeof full, "%s.%s", mod, name);
    fail(m, "refused global %s", full);
    return NULL;
}

static const char *storage_key_at(const void *ctx, int64_t i)
{
    return ((pt_storage *const *)ctx)[i]->key;
}

static pt_storage *find_storage(vm *m, const char *key)
{
    int64_t i = st_index_find(&m->st_ix, key, storage_key_at, m->storages);
    return i < 0 ? NULL : m->storages[i];
}

static bool add_storage(vm *m, pt_storage *st)
{
    if (m->nst == m->capst) {
        int64_t nc = m->capst ? 2 * m->capst : 16;
        pt_storage **ns = em_alloc((size_t)nc * sizeof *ns);
        if (!ns) return false;
        if (m->storages) memcpy(ns, m->storages, (size_t)m->nst * sizeof *ns);
        em_free(m->storages);
        m->storages = ns;
        m->capst = nc;
    }
    if (!st_index_add(&m->st_ix, st->key, m->nst)) return false;
    m->storages[m->nst++] = st;
    return true;
}

/* BINPERSID: ("storage", torch.XStorage, key, location, numel). */
static pv *op_persid(vm *m, pv *pid)
{
    if (pid->type != PV_TUPLE || pid->n != 5 || pid->items[0]->type != PV_STR ||
        strcmp(pid->items[0]->s, "storage") != 0) {
        fail(m, "persistent id is not a (\"storage\", ...) tuple%s", "");
        return NULL;
    }
    pv *cls = pid->items[1], *key = pid->items[2], *loc = pid->items[3], *numel = pid->items[4];
    if (cls->type != PV_GLOBAL || cls->g != G_STORAGE || key->type != PV_STR ||
        loc->type != PV_STR || numel->type != PV_INT || numel->i < 0) {
        fail(m, "malformed storage persistent id%s", "");
        return NULL;
    }
    if (key->n == 0 || key->n >= 64 ||
        strspn(key->s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNO"
                       "PQRSTUVWXYZ0123456789_") != (size_t)key->n) {
        fail(m, "storage key \"%.60s\" is not a plain name", key->s);
        return NULL;
    }
    pt_storage *st = find_storage(m, key->s);
    if (st) {
        if (st->dtype != cls->dtype || st->numel != numel->i) {
            fail(m, "storage %s is declared twice with different types or sizes", key->s);
            return NULL;
        }
    } else {
        st = vm_alloc(m, sizeof *st);
        if (!st) return NULL;
        snprintf(st->key, sizeof st->key, "%s", key->s);
        st->dtype = cls->dtype;
        st->numel = numel->i;
        st->index = -1;
        int64_t nbytes;
        if (__builtin_mul_overflow(st->numel, (int64_t)em_dtype_size(st->dtype), &nbytes)) {
            failf(m, "storage %s size overflows (%lld %s elements)", key->s, (long long)st->numel,
                  em_dtype_name(st->dtype));
            return NULL;
        }
        if (m->za) {
            char name[300];
            snprintf(name, sizeof name, "%sdata/%s", m->prefix, st->key);
            zip_int64_t idx = zip_name_locate(m->za, name, 0);
            zip_stat_t zs;
            if (idx < 0 || zip_stat_index(m->za, (zip_uint64_t)idx, 0, &zs) != 0) {
                fail(m, "storage entry %s is missing from the archive", name);
                return NULL;
            }
            if (zs.size != (zip_uint64_t)nbytes) {
                failf(m,
                      "storage size mismatch: %s holds %llu bytes but the pickle declares %lld "
                      "%s elements",
                      name, (unsigned long long)zs.size, (long long)st->numel,
                      em_dtype_name(st->dtype));
                return NULL;
            }
            st->index = idx;
        }
        m->storage_bytes += (uint64_t)nbytes;
        if (!add_storage(m, st)) return NULL;
    }
    pv *v = new_pv(m, PV_STORAGE);
    if (v) v->st = st;
    return v;
}

static bool int_tuple(const pv *t, int64_t *out, int *n)
{
    if (t->type != PV_TUPLE || t->n > EM_MAX_RANK) return false;
    for (int64_t i = 0; i < t->n; i++) {
        if (t->items[i]->type != PV_INT || t->items[i]->i < 0) return false;
        out[i] = t->items[i]->i;
    }
    *n = (int)t->n;
    return true;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]) */
static pv *rebuild_tensor(vm *m, pv *args)
{
    if (args->n != 6 && args->n != 7) {
        fail(m, "_rebuild_tensor_v2 takes 6 or 7 arguments%s", "");
        return NULL;
    }
    pv *st = args->items[0], *off = args->items[1];
    pv *t = new_pv(m, PV_TENSOR);
    pt_view *v = t ? vm_alloc(m, sizeof *v) : NULL;
    if (!v) return NULL;
    t->view = v;
    int rank = 0, srank = 0;
    if (st->type != PV_STORAGE || off->type != PV_INT || off->i < 0 ||
        !int_tuple(args->items[2], v->shape.dims, &rank) ||
        !int_tuple(args->items[3], v->strides, &srank) || rank != srank) {
        fail(m,
             "_rebuild_tensor_v2 arguments are malformed (storage, offset, size, stride; "
             "non-negative, rank <= 8)%s",
             "");
        return NULL;
    }
    v->shape.rank = rank;
    v->st = st->st;
    v->offset = off->i;
    /* The element count and byte size must fit in int64 even when a dim is 0 (shape code
     * multiplies dims in any order), and every element the view reaches must lie inside the
     * storage. */
    int64_t nonzero = 1, numel = 1, last = v->offset, bytes;
    for (int d = 0; d < rank; d++) {
        int64_t dim = v->shape.dims[d], reach;
        if (dim == 0) {
            numel = 0;
            continue;
        }
        if (__builtin_mul_overflow(nonzero, dim, &nonzero)) {
            fail(m, "tensor element count overflows%s", "");
            return NULL;
        }
        if (last >= 0 && (__builtin_mul_overflow(dim - 1, v->strides[d], &reach) ||
                          __builtin_add_overflow(last, reach, &last)))
            last = -1; /* beyond any storage */
    }
    if (__builtin_mul_overflow(nonzero, (int64_t)em_dtype_size(v->st->dtype), &bytes)) {
        fail(m, "tensor byte size overflows%s", "");
        return NULL;
    }
    if (numel ? last < 0 || last >= v->st->numel : v->offset > v->st->numel) {
        fail(m, "tensor view reaches past the end of storage %s", v->st->key);
        return NULL;
    }
    v->next = m->views;
    m->views = v;
    return t;
}

static pv *op_reduce(vm *m, pv *fn, pv *args)
{
    if (fn->type != PV_GLOBAL) {
        fail(m, "REDUCE on something that is not an allowed global%s", "");
        return NULL;
    }
    if (args->type != PV_TUPLE) {
        fail(m, "REDUCE arguments are not a tuple%s", "");
        return NULL;
    }
    switch (fn->g) {
    case G_ORDERED_DICT:
        if (args->n != 0) {
            fail(m, "OrderedDict() with arguments is not supported%s", "");
            return NULL;
        }
        return new_pv(m, PV_DICT);
    case G_REBUILD_TENSOR: return rebuild_tensor(m, args);
    case G_REBUILD_PARAM:
        if (args->n != 3 || args->items[0]->type != PV_TENSOR) {
            fail(m, "_rebuild_parameter arguments are malformed%s", "");
            return NULL;
        }
        return args->items[0];
    case G_STORAGE: break;
    }
    fail(m, "REDUCE may not call a storage class%s", "");
    return NULL;
}

static bool memo_put(vm *m, uint64_t idx)
{
    if (idx >= PT_MAX_MEMO) {
        char n[32];
        snprintf(n, sizeof n, "%llu", (unsigned long long)idx);
        return fail(m, "memo index %s exceeds the limit of 1048576", n);
    }
    pv *v = top(m);
    if (!v) return false;
    if ((int64_t)idx >= m->memocap) {
        int64_t nc = m->memocap ? m->memocap : 64;
        while (nc <= (int64_t)idx) nc *= 2;
        pv **nm = em_calloc((size_t)nc * sizeof *nm);
        if (!nm) return false;
        if (m->memo) memcpy(nm, m->memo, (size_t)m->memocap * sizeof *nm);
        em_free(m->memo);
        m->memo = nm;
        m->memocap = nc;
    }
    m->memo[idx] = v;
    return true;
}

static bool memo_get(vm *m, uint64_t idx)
{
    if ((int64_t)idx >= m->memocap || idx >= PT_MAX_MEMO || !m->memo[idx]) {
        char n[32];
        snprintf(n, sizeof n, "%llu", (unsigned long long)idx);
        return fail(m, "memo index %s is not set", n);
    }
    return push(m, m->memo[idx]);
}

static const char *opname(unsigned char op)
{
    switch (op) {
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x95: return "FRAME";
    case 0x94: return "MEMOIZE";
    case 'P': return "PERSID";
    case 'p': return "PUT";
    case 'g': return "GET";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 0x8b: return "LONG4";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case '0': return "POP";
    case '1': return "DUP";
    case '2': return "POP_MARK";
    default: return "unknown";
    }
}

/* Runs the pickle; on success *result is the unpickled object. */
static bool run(vm *m, pv **result)
{
    while (m->p < m->end) {
        unsigned char op = *m->p++;
        pv *v = NULL, *a, *b;
        int64_t first;
        switch (op) {
        case 0x80: /* PROTO */
            if (!need(m, 1)) return false;
            if (*m->p > 5) return fail(m, "unsupported pickle protocol%s", "");
            m->p++;
            break;
        case '.': /* STOP */
            if (m->nmarks) return fail(m, "STOP with an open MARK%s", "");
            if (!(*result = pop(m))) return false;
            return true;
        case 'c':
            if (!push(m, op_global(m))) return false;
            break;
        case 'Q':
            if (!(a = pop(m)) || !push(m, op_persid(m, a))) return false;
            break;
        case 'R':
            if (!(a = pop(m)) || !(b = pop(m)) || !push(m, op_reduce(m, b, a))) return false;
            break;
        case 'b': /* BUILD: state on dicts (e.g. _metadata) and tensors is ignored */
            if (!(a = pop(m)) || !(b = top(m))) return false;
            if (b->type != PV_DICT && b->type != PV_TENSOR)
                return fail(m, "BUILD on an object that is not a dict or tensor%s", "");
            break;
        case '}':
            if (!push(m, new_pv(m, PV_DICT))) return false;
            break;
        case ']':
            if (!push(m, new_pv(m, PV_LIST))) return false;
            break;
        case ')':
            if (!push(m, new_pv(m, PV_TUPLE))) return false;
            break;
        case '(':
            if (m->nmarks == m->mcap) {
                if (m->mcap >= PT_MAX_MARKS) return fail(m, "more than %s open MARKs", "65536");
                int64_t nc = m->mcap ? m->mcap * 2 : 16;
                int64_t *nm = em_alloc((size_t)nc * sizeof *nm);
                if (!nm) return false;
                if (m->marks) memcpy(nm, m->marks, (size_t)m->nmarks * sizeof *nm);
                em_free(m->marks);
                m->marks = nm;
                m->mcap = nc;
            }
            m->marks[m->nmarks++] = m->sp;
            break;
        case 't':
        case 'l':
        case 'd':
            if (!pop_mark(m, &first)) return false;
            v = new_pv(m, op == 't' ? PV_TUPLE : op == 'l' ? PV_LIST : PV_DICT);
            if (!v) return false;
            if (op == 'd' && (m->sp - first) % 2)
                return fail(m, "DICT with an odd item count%s", "");
            for (int64_t i = first; i < m->sp; i++)
                if (!add_item(m, v, m->stack[i])) return false;
            m->sp = first;
            if (!push(m, v)) return false;
            break;
        case 0x85:
        case 0x86:
        case 0x87: {
            int k = op - 0x84;
            v = new_pv(m, PV_TUPLE);
            if (!v) return false;
            pv *it[3];
            for (int i = k - 1; i >= 0; i--)
                if (!(it[i] = pop(m))) return false;
            for (int i = 0; i < k; i++)
                if (!add_item(m, v, it[i])) return false;
            if (!push(m, v)) return false;
            break;
        }
        case 'a':
            if (!(a = pop(m)) || !(b = top(m))) return false;
            if (b->type != PV_LIST) return fail(m, "APPEND on something that is not a list%s", "");
            if (!add_item(m, b, a)) return false;
            break;
        case 'e':
            if (!pop_mark(m, &first)) return false;
            if (first < 1 || m->stack[first - 1]->type != PV_LIST)
                return fail(m, "APPENDS on something that is not a list%s", "");
            for (int64_t i = first; i < m->sp; i++)
                if (!add_item(m, m->stack[first - 1], m->stack[i])) return false;
            m->sp = first;
            break;
        case 's':
            if (!(a = pop(m)) || !(b = pop(m)) || !(v = top(m))) return false;
            if (v->type != PV_DICT) return fail(m, "SETITEM on something that is not a dict%s", "");
            if (!add_item(m, v, b) || !add_item(m, v, a)) return false;
            break;
        case 'u':
            if (!pop_mark(m, &first)) return false;
            if (first < 1 || m->stack[first - 1]->type != PV_DICT)
                return fail(m, "SETITEMS on something that is not a dict%s", "");
            if ((m->sp - first) % 2) return fail(m, "SETITEMS with an odd item count%s", "");
            for (int64_t i = first; i < m->sp; i++)
                if (!add_item(m, m->stack[first - 1], m->stack[i])) return false;
            m->sp = first;
            break;
        case 'N':
            if (!push(m, new_pv(m, PV_NONE))) return false;
            break;
        case 0x88:
        case 0x89:
            if (!(v = new_pv(m, PV_BOOL))) return false;
            v->i = op == 0x88;
            if (!push(m, v)) return false;
            break;
        case 'J':
        case 'K':
        case 'M': {
            int k = op == 'J' ? 4 : op == 'K' ? 1 : 2;
            if (!need(m, (size_t)k) || !(v = new_pv(m, PV_INT))) return false;
            uint64_t u = rd_le(m->p, k);
            v->i = op == 'J' ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u;
            m->p += k;
            if (!push(m, v)) return false;
            break;
        }
        case 0x8a: { /* LONG1 */
            if (!need(m, 1)) return false;
            int k = *m->p++;
            if (k > 8) return fail(m, "LONG1 integer wider than 64 bits%s", "");
            if (!need(m, (size_t)k) || !(v = new_pv(m, PV_INT))) return false;
            uint64_t u = rd_le(m->p, k);
            if (k > 0 && k < 8 && (m->p[k - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * k);
            v->i = (int64_t)u;
            m->p += k;
            if (!push(m, v)) return false;
            break;
        }
        case 'G': {
            if (!need(m, 8) || !(v = new_pv(m, PV_FLOAT))) return false;
            uint64_t u = 0;
            for (int i = 0; i < 8; i++) u = (u << 8) | m->p[i];
            memcpy(&v->f, &u, 8);
            m->p += 8;
            if (!push(m, v)) return false;
            break;
        }
        case 'X':
        case 'T': {
            if (!need(m, 4)) return false;
            uint64_t len = rd_le(m->p, 4);
            m->p += 4;
            if (op == 'T' && len > INT32_MAX) return fail(m, "negative string length%s", "");
            if (!push(m, make_str(m, (size_t)len))) return false;
            break;
        }
        case 'U':
            if (!need(m, 1)) return false;
            m->p++;
            if (!push(m, make_str(m, m->p[-1]))) return false;
            break;
        case 'q':
        case 'r': {
            int k = op == 'q' ? 1 : 4;
            if (!need(m, (size_t)k)) return false;
            uint64_t idx = rd_le(m->p, k);
            m->p += k;
            if (!memo_put(m, idx)) return false;
            break;
        }
        case 'h':
        case 'j': {
            int k = op == 'h' ? 1 : 4;
            if (!need(m, (size_t)k)) return false;
            uint64_t idx = rd_le(m->p, k);
            m->p += k;
            if (!memo_get(m, idx)) return false;
            break;
        }
        default: {
            char what[64];
            snprintf(what, sizeof what, "0x%02x (%s)", op, opname(op));
            return fail(m, "refused pickle opcode %s", what);
        }
        }
    }
    return fail(m, "pickle ends without STOP%s", "");
}

static void vm_free(vm *m)
{
    for (pt_view *v = m->views; v; v = v->next) em_release(v->made);
    for (int64_t i = 0; i < m->nst; i++) em_free(m->storages[i]->data);
    em_free(m->storages);
    st_index_free(&m->st_ix);
    block *b = m->blocks;
    while (b) {
        block *n = b->next;
        em_free(b);
        b = n;
    }
    em_free(m->stack);
    em_free(m->marks);
    em_free(m->memo);
}

/* ---- zip container ----------------------------------------------------------------------- */

static bool read_entry(vm *m, zip_int64_t idx, unsigned char *buf, zip_uint64_t size)
{
    zip_file_t *f = zip_fopen_index(m->za, (zip_uint64_t)idx, 0);
    if (!f) {
        em_error(EM_ERR_FORMAT, "%s: cannot read zip entry %lld: %s", m->who, (long long)idx,
                 zip_strerror(m->za));
        return false;
    }
    zip_uint64_t got = 0;
    while (got < size) {
        zip_int64_t r = zip_fread(f, buf + got, size - got);
        if (r <= 0) break;
        got += (zip_uint64_t)r;
    }
    unsigned char extra;
    zip_int64_t more = got == size ? zip_fread(f, &extra, 1) : 0;
    bool ok = got == size && more == 0;
    if (!ok)
        em_error(EM_ERR_FORMAT, "%s: zip entry %lld is corrupt or its size is wrong (%s)", m->who,
                 (long long)idx, zip_file_strerror(f));
    zip_fclose(f);
    return ok;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks every entry; finds data.pkl and the archive folder. */
static bool check_archive(vm *m, zip_int64_t *pkl, zip_uint64_t *pkl_size, char *prefix, size_t cap)
{
    zip_int64_t n = zip_get_num_entries(m->za, 0);
    if (n <= 0 || (uint64_t)n > m->lim.zip_entries) {
        em_error(EM_ERR_FORMAT, "%s: archive has %lld entries (at most %llu: store_zip_entries)",
                 m->who, (long long)n, (unsigned long long)m->lim.zip_entries);
        return false;
    }
    const char **names = em_alloc((size_t)n * sizeof *names);
    if (!names) return false;
    bool ok = true;
    *pkl = -1;
    prefix[0] = 0;
    for (zip_int64_t i = 0; i < n && ok; i++) {
        zip_stat_t st;
        if (zip_stat_index(m->za, (zip_uint64_t)i, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME)) {
            ok = fail(m, "unreadable zip entry%s", "");
            break;
        }
        names[i] = st.name;
        if (st.name[0] == '/' || strstr(st.name, "..") || strchr(st.name, '\\')) {
            ok = fail(m, "zip entry name \"%.200s\" is unsafe", st.name);
            break;
        }
        /* Sizes are checked before anything is read: an entry cannot hold more than the
         * archive, a stored entry inflates to itself, and a compressed one at most
         * store_zip_ratio times (zip bombs are refused before anything is inflated). */
        uint64_t max_inflated;
        if (__builtin_mul_overflow((uint64_t)st.comp_size, m->lim.zip_ratio, &max_inflated))
            max_inflated = UINT64_MAX;
        if (st.comp_size > m->archive_size ||
            (st.comp_method == ZIP_CM_STORE && st.size != st.comp_size)) {
            char msg[300];
            snprintf(msg, sizeof msg, "%.200s declares %llu bytes from %llu in a %llu-byte file",
                     st.name, (unsigned long long)st.size, (unsigned long long)st.comp_size,
                     (unsigned long long)m->archive_size);
            ok = fail(m, "truncated or damaged zip archive: %s", msg);
            break;
        }
        if (st.size > PT_MAX_ENTRY ||
            (st.comp_method != ZIP_CM_STORE && st.size > 4096 + max_inflated)) {
            char msg[300];
            snprintf(msg, sizeof msg, "%.200s declares %llu bytes from %llu compressed", st.name,
                     (unsigned long long)st.size, (unsigned long long)st.comp_size);
            ok = fail(m, "zip entry too large (zip bomb?): %s (store_zip_ratio)", msg);
            break;
        }
        const char *slash = strchr(st.name, '/');
        if (slash && strcmp(slash, "/data.pkl") == 0) {
            if (*pkl >= 0) {
                ok = fail(m, "archive holds more than one data.pkl%s", "");
                break;
            }
            *pkl = i;
            *pkl_size = st.size;
            size_t plen = (size_t)(slash - st.name) + 1;
            if (plen >= cap) {
                ok = fail(m, "archive folder name too long%s", "");
                break;
            }
            memcpy(prefix, st.name, plen);
            prefix[plen] = 0;
        }
    }
    if (ok && *pkl < 0)
        ok = fail(m,
                  "no data.pkl in the archive (not a torch.save file, or a TorchScript/"
                  "legacy format)%s",
                  "");
    if (ok && *pkl_size > m->lim.max_pickle)
        ok = failf(m, "data.pkl is %llu bytes, more than the limit of %llu (store_max_pickle)",
                   (unsigned long long)*pkl_size, (unsigned long long)m->lim.max_pickle);
    for (zip_int64_t i = 0; i < n && ok; i++) {
        size_t plen = strlen(prefix);
        if (strncmp(names[i], prefix, plen) != 0) {
            ok = fail(m, "zip entry \"%.200s\" lies outside the archive folder", names[i]);
        } else if (strncmp(names[i] + plen, "code/", 5) == 0 ||
                   strcmp(names[i] + plen, "constants.pkl") == 0) {
            ok = fail(m,
                      "TorchScript archives are not supported (found %.200s); save a "
                      "state_dict with torch.save instead",
                      names[i]);
        }
    }
    if (ok) {
        qsort(names, (size_t)n, sizeof *names, cmp_str);
        for (zip_int64_t i = 1; i < n && ok; i++)
            if (strcmp(names[i - 1], names[i]) == 0)
                ok = fail(m, "duplicate zip entry \"%.200s\"", names[i]);
    }
    em_free(names);
    if (!ok) return false;
    char bo[300];
    snprintf(bo, sizeof bo, "%sbyteorder", prefix);
    zip_int64_t bi = zip_name_locate(m->za, bo, 0);
    if (bi >= 0) {
        zip_stat_t st;
        unsigned char text[16] = {0};
        if (zip_stat_index(m->za, (zip_uint64_t)bi, 0, &st) != 0 || st.size > 15 ||
            !read_entry(m, bi, text, st.size))
            return em_failed() ? false : fail(m, "unreadable byteorder entry%s", "");
        if (strcmp((char *)text, "little") != 0)
            return fail(m, "byte order \"%.15s\" is not supported", (char *)text);
    }
    return true;
}

/* ---- flattening the unpickled object into a dict ------------------------------------------ */

typedef struct sink {
    em_tensor_dict *dict;
    em_store_info *info;
} sink;

static bool load_storage(vm *m, pt_storage *s)
{
    if (s->data) return true;
    size_t nb = (size_t)s->numel * em_dtype_size(s->dtype);
    s->data = em_alloc(nb ? nb : 1);
    if (!s->data) return false;
    if (s->index < 0) return fail(m, "storage %s has no data", s->key);
    return read_entry(m, s->index, s->data, nb);
}

/* Copies the view into row-major order, one run of the innermost dim at a time when its
 * stride is 1. dims: the view's sizes (expanded dims already set to 1). */
static void gather(const pt_view *v, const int64_t *dims, size_t esz, unsigned char *out)
{
    int rank = v->shape.rank;
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) numel *= dims[d];
    if (!numel) return;
    int64_t run = rank && v->strides[rank - 1] == 1 ? dims[rank - 1] : 1;
    int outer = run > 1 ? rank - 1 : rank;
    int64_t idx[EM_MAX_RANK] = {0};
    for (int64_t k = 0; k < numel; k += run) {
        int64_t off = v->offset;
        for (int d = 0; d < outer; d++) off += idx[d] * v->strides[d];
        memcpy(out + (size_t)k * esz, v->st->data + (size_t)off * esz, (size_t)run * esz);
        for (int d = outer - 1; d >= 0; d--) {
            if (++idx[d] < dims[d]) break;
            idx[d] = 0;
        }
    }
}

/* The Ember tensor of a view: its elements copied out, except that dims of stride 0 (an
 * expanded tensor) stay expanded: the copy holds one element along them and the result is an
 * em_expand view, so a file cannot make the reader materialise a broadcast. The bytes copied
 * are bounded by store_expand_ratio times the storage in the file (overlapping strides can
 * reach one element many times). */
static em_tensor *make_tensor(vm *m, const char *name, pt_view *v)
{
    em_dtype dt = v->st->dtype;
    size_t esz = em_dtype_size(dt);
    int64_t dims[EM_MAX_RANK];
    bool expanded = false;
    uint64_t numel = 1;
    for (int d = 0; d < v->shape.rank; d++) {
        dims[d] = v->strides[d] == 0 && v->shape.dims[d] > 1 ? 1 : v->shape.dims[d];
        expanded = expanded || dims[d] != v->shape.dims[d];
        numel *= (uint64_t)dims[d]; /* cannot overflow: the full shape's count fits */
    }
    uint64_t bytes = numel * esz;
    uint64_t allowed = st_budget(m->lim.expand_ratio, m->storage_bytes, 0, 1);
    if (allowed < m->lim.expand_min) allowed = m->lim.expand_min;
    if (bytes > allowed - m->copied || m->copied > allowed) {
        failf(m,
              "materialising tensor \"%.200s\" needs %llu bytes (%llu copied before it), more "
              "than %llu times the %llu bytes of storage in the file (overlapping strides?; "
              "limits store_expand_ratio, store_expand_min_mb)",
              name, (unsigned long long)bytes, (unsigned long long)m->copied,
              (unsigned long long)m->lim.expand_ratio, (unsigned long long)m->storage_bytes);
        return NULL;
    }
    m->copied += bytes;
    if (!load_storage(m, v->st)) return NULL;
    unsigned char *buf = em_alloc(bytes ? (size_t)bytes : 1);
    if (!buf) return NULL;
    gather(v, dims, esz, buf);
    em_shape compact = {.rank = v->shape.rank};
    memcpy(compact.dims, dims, sizeof dims);
    em_tensor *x = st_own(em_from_blob(buf, dt, compact, st_free_deleter, NULL));
    if (!x) {
        em_free(buf);
        return NULL;
    }
    if (!expanded) return x;
    em_tensor *e = st_own(em_expand(x, v->shape));
    em_release(x);
    return e;
}

static bool emit_tensor(vm *m, sink *out, const char *name, pt_view *v)
{
    size_t len = strlen(name);
    m->out += len + PT_OUT_ENTRY;
    if (m->out > m->max_out)
        return failf(m,
                     "the pickle lists more tensors and names than its output budget allows "
                     "(%llu bytes for a %llu-byte pickle; shared references multiply names; "
                     "limit store_budget_scale)",
                     (unsigned long long)m->max_out, (unsigned long long)m->pickle_size);
    em_dtype dt = v->st->dtype;
    int64_t numel = em_shape_numel(v->shape);
    if (out->info)
        return st_info_add(out->info, m->who, name, dt, v->shape,
                           numel * (int64_t)em_dtype_size(dt), -1) == EM_OK;
    if (em_tensor_dict_get(out->dict, name))
        return failf(m, "duplicate tensor name \"%.200s\"", name);
    if (!v->made && !(v->made = make_tensor(m, name, v))) return false;
    return em_tensor_dict_add(out->dict, name, v->made) == EM_OK;
}

static bool walk(vm *m, sink *out, const pv *v, const char *prefix, int depth)
{
    if (depth > PT_MAX_DEPTH) return fail(m, "containers nested deeper than %s levels", "64");
    bool dict = v->type == PV_DICT;
    int64_t step = dict ? 2 : 1;
    for (int64_t i = 0; i < v->n; i += step) {
        /* Shared references can reach one container from many places (62 levels of [m, m]
         * are 2^62 paths): the whole walk has a budget proportional to the pickle. */
        if (++m->work > m->max_work)
            return failf(m,
                         "the pickle exceeds its work budget (%llu container items visited; "
                         "shared references multiply work; limit store_budget_scale)",
                         (unsigned long long)m->max_work);
        const pv *key = dict ? v->items[i] : NULL, *val = v->items[dict ? i + 1 : i];
        char name[1024];
        if (!dict)
            snprintf(name, sizeof name, "%s%lld", prefix, (long long)i);
        else if (key->type == PV_STR)
            snprintf(name, sizeof name, "%s%s", prefix, key->s);
        else if (key->type == PV_INT)
            snprintf(name, sizeof name, "%s%lld", prefix, (long long)key->i);
        else
            continue;
        if (strlen(name) >= sizeof name - 1) return fail(m, "tensor name too long: %.200s", name);
        if (val->type == PV_TENSOR) {
            if (!emit_tensor(m, out, name, val->view)) return false;
        } else if (val->type == PV_DICT || val->type == PV_LIST || val->type == PV_TUPLE) {
            size_t l = strlen(name);
            name[l] = '.';
            name[l + 1] = 0;
            if (!walk(m, out, val, name, depth + 1)) return false;
        }
    }
    return true;
}

static bool flatten(vm *m, sink *out, const pv *root, uint64_t pickle_size)
{
    m->pickle_size = pickle_size;
    m->max_work = st_budget(PT_WORK_PER_BYTE, pickle_size, PT_WORK_BASE, m->lim.budget_scale);
    m->max_out = st_budget(PT_OUT_PER_BYTE, pickle_size, PT_OUT_BASE, m->lim.budget_scale);
    if (root->type == PV_TENSOR) return emit_tensor(m, out, "tensor", root->view);
    if (root->type != PV_DICT) return fail(m, "the file does not hold a dict of tensors%s", "");
    for (int64_t i = 0; i < root->n; i += 2) {
        const pv *k = root->items[i], *v = root->items[i + 1];
        if (k->type == PV_STR && v->type == PV_DICT &&
            (strcmp(k->s, "state_dict") == 0 || strcmp(k->s, "model") == 0))
            return walk(m, out, v, "", 1);
    }
    return walk(m, out, root, "", 1);
}

/* ---- entry points ------------------------------------------------------------------------ */

static void vm_init(vm *m, const char *who, uint64_t pickle_size)
{
    m->who = who;
    m->lim = st_get_limits();
    uint64_t mem = st_budget(PT_MEM_PER_BYTE, pickle_size, PT_MEM_BASE, m->lim.budget_scale);
    m->max_bytes = mem < m->lim.max_memory ? mem : m->lim.max_memory;
}

static bool import(vm *m, sink *out)
{
    zip_int64_t pkl;
    zip_uint64_t pkl_size = 0;
    char prefix[256];
    if (!check_archive(m, &pkl, &pkl_size, prefix, sizeof prefix)) return false;
    m->prefix = prefix;
    unsigned char *text = em_alloc(pkl_size ? (size_t)pkl_size : 1);
    if (!text) return false;
    bool ok = read_entry(m, pkl, text, pkl_size);
    pv *root = NULL;
    if (ok) {
        /* A compressed data.pkl can be 200 times its bytes in the file: the budgets follow
         * what the file holds, whichever is smaller. */
        uint64_t budget_size = pkl_size < m->archive_size ? pkl_size : m->archive_size;
        vm_init(m, m->who, budget_size);
        m->p = text;
        m->end = text + pkl_size;
        ok = run(m, &root) && flatten(m, out, root, budget_size);
    }
    em_free(text);
    return ok;
}

/* Opens the archive from fd (taking it) or from memory. A file that is not a zip archive is
 * named for what it is (a legacy pickle, a safetensors file); one that starts as a zip but
 * does not open is "truncated or damaged". */
static zip_t *open_archive(int fd, const void *data, size_t size, const char *who)
{
    unsigned char head[512] = {0};
    size_t got = 0;
    if (fd >= 0) {
        got = st_head(fd, head, sizeof head);
    } else {
        got = size < sizeof head ? size : sizeof head;
        if (got) memcpy(head, data, got);
    }
    st_format f = st_sniff(head, got);
    if (f != ST_FMT_ZIP) {
        if (fd >= 0) close(fd);
        em_error(EM_ERR_FORMAT,
                 "%s: not a PyTorch zip archive (torch.save writes one since PyTorch 1.6): %s", who,
                 st_format_desc(f));
        return NULL;
    }
    zip_error_t ze;
    zip_error_init(&ze);
    zip_t *za = NULL;
    if (fd >= 0) {
        int code = 0;
        za = zip_fdopen(fd, ZIP_RDONLY | ZIP_CHECKCONS, &code);
        if (!za) {
            zip_error_init_with_code(&ze, code);
            close(fd);
        }
    } else {
        zip_source_t *src = zip_source_buffer_create(data, size, 0, &ze);
        if (src) {
            za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
            if (!za) zip_source_free(src);
        }
    }
    if (!za) {
        int zc = zip_error_code_zip(&ze);
        if (zc == ZIP_ER_MEMORY)
            em_error(EM_ERR_OOM, "%s: out of memory opening the zip archive", who);
        else if (zc == ZIP_ER_READ || zc == ZIP_ER_SEEK)
            em_error(EM_ERR_IO, "%s: cannot read the file (%s)", who, zip_error_strerror(&ze));
        else
            em_error(EM_ERR_FORMAT, "%s: truncated or damaged zip archive (%s)", who,
                     zip_error_strerror(&ze));
    }
    zip_error_fini(&ze);
    return za;
}

static bool pt_run(int fd, const void *data, size_t size, const char *who, sink *out)
{
    zip_t *za = open_archive(fd, data, size, who);
    if (!za) return false;
    vm m = {.who = who, .lim = st_get_limits(), .za = za, .archive_size = size};
    bool ok = import(&m, out);
    vm_free(&m);
    zip_discard(za);
    if (!ok && !em_failed()) em_error(EM_ERR_OOM, "%s: out of memory", who);
    return ok;
}

static em_tensor_dict *pt_load_fd(int fd, uint64_t size, const char *who)
{
    sink out = {.dict = em_tensor_dict_new()};
    if (!out.dict) {
        close(fd);
        return NULL;
    }
    if (!pt_run(fd, NULL, (size_t)size, who, &out)) {
        em_tensor_dict_free(out.dict);
        return NULL;
    }
    return out.dict;
}

static em_store_info *pt_inspect_fd(int fd, uint64_t size, const char *who)
{
    sink out = {.info = st_info_new()};
    if (!out.info) {
        close(fd);
        return NULL;
    }
    if (!pt_run(fd, NULL, (size_t)size, who, &out)) {
        em_store_info_free(out.info);
        return NULL;
    }
    return out.info;
}

em_tensor_dict *em_pt_load(const char *path)
{
    if (!path) {
        em_error(EM_ERR_INVALID_ARG, "em_pt_load: path is NULL");
        return NULL;
    }
    uint64_t size;
    int fd = st_open("em_pt_load", path, &size);
    if (fd < 0) return NULL;
    char who[512];
    snprintf(who, sizeof who, "em_pt_load: %s", path);
    return pt_load_fd(fd, size, who);
}

em_tensor_dict *em_pt_load_memory(const void *data, size_t size, const char *name)
{
    char who[512];
    snprintf(who, sizeof who, "em_pt_load_memory: %s", name ? name : "<memory>");
    if (!data) {
        em_error(EM_ERR_INVALID_ARG, "%s: data is NULL", who);
        return NULL;
    }
    sink out = {.dict = em_tensor_dict_new()};
    if (!out.dict) return NULL;
    if (!pt_run(-1, data, size, who, &out)) {
        em_tensor_dict_free(out.dict);
        return NULL;
    }
    return out.dict;
}

em_store_info *em_pt_inspect(const char *path)
{
    if (!path) {
        em_error(EM_ERR_INVALID_ARG, "em_pt_inspect: path is NULL");
        return NULL;
    }
    uint64_t size;
    int fd = st_open("em_pt_inspect", path, &size);
    if (fd < 0) return NULL;
    char who[512];
    snprintf(who, sizeof who, "em_pt_inspect: %s", path);
    return pt_inspect_fd(fd, size, who);
}

static bool pt_claims(const unsigned char *head, size_t n)
{
    return st_sniff(head, n) == ST_FMT_ZIP;
}

static const em_store_reader pt_reader = {
    .name = "PyTorch zip archive",
    .claims = pt_claims,
    .load = pt_load_fd,
    .inspect = pt_inspect_fd,
};

em_status em_pt_register(void)
{
    return em_store_add_reader(&pt_reader);
}

em_status pt_unpickle_memory(const void *data, size_t size, const char *name)
{
    char who[512];
    snprintf(who, sizeof who, "pt_unpickle: %s", name ? name : "<memory>");
    vm m = {.p = data, .end = (const unsigned char *)data + size, .prefix = ""};
    vm_init(&m, who, size);
    sink out = {.info = st_info_new()};
    pv *root = NULL;
    bool ok = out.info && run(&m, &root) && flatten(&m, &out, root, size);
    vm_free(&m);
    em_store_info_free(out.info);
    if (!ok && !em_failed()) em_error(EM_ERR_OOM, "%s: out of memory", who);
    return ok ? EM_OK : em_last_status();
}
