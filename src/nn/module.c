/* The module tree: registration of parameters, buffers and children, traversal by dotted
 * name, device and dtype moves, train/eval, freezing by pattern, and the printed summary. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "nn_impl.h"

void em_module_init(em_module *m, const em_module_type *type, em_device dev)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->training = true;
    m->device = dev;
}

void *em_module_alloc(size_t size, const em_module_type *type, em_device dev)
{
    if (size < sizeof(em_module)) {
        em_error(EM_ERR_INVALID_ARG, "em_module_alloc: %zu bytes is smaller than em_module", size);
        return NULL;
    }
    em_module *m = em_calloc(size);
    if (m) em_module_init(m, type, dev);
    return m;
}

bool nn_check_inputs(const char *type, int n, int want)
{
    if (n == want) return true;
    em_error(EM_ERR_INVALID_ARG, "em_forward: %s takes %d input%s, got %d", type, want,
             want == 1 ? "" : "s", n);
    return false;
}

static char *dup_name(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = em_alloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Name lookup. An entry array of capacity cap is followed, in the same allocation, by a hash
 * index of 2 * cap int32 slots (entry position + 1, 0 when empty), so finding a name is O(1)
 * however many parameters or children a module has (a module of 100k entries registers and
 * loads in linear time) and em_module keeps its layout. */
static uint32_t name_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int32_t *name_slots(em_module_entry *arr, int cap)
{
    return (int32_t *)(arr + cap);
}

static void index_add(em_module_entry *arr, int cap, int i)
{
    int32_t *slot = name_slots(arr, cap);
    uint32_t mask = (uint32_t)(2 * cap - 1), k = name_hash(arr[i].name, strlen(arr[i].name)) & mask;
    while (slot[k]) k = (k + 1) & mask;
    slot[k] = i + 1;
}

/* Position of the entry whose name is name[0..len), or -1. */
static int index_find(em_module_entry *arr, int cap, const char *name, size_t len)
{
    if (!arr) return -1;
    int32_t *slot = name_slots(arr, cap);
    uint32_t mask = (uint32_t)(2 * cap - 1);
    for (uint32_t k = name_hash(name, len) & mask; slot[k]; k = (k + 1) & mask) {
        const char *e = arr[slot[k] - 1].name;
        if (strncmp(e, name, len) == 0 && e[len] == '\0') return slot[k] - 1;
    }
    return -1;
}

static bool valid_name(const char *fn, em_module *m, const char *name)
{
    if (!tn_check_ptr(fn, m, "m") || !tn_check_ptr(fn, name, "name")) return false;
    if (!*name || strchr(name, '.')) {
        em_error(EM_ERR_INVALID_ARG, "%s: name \"%s\" must be non-empty without dots", fn, name);
        return false;
    }
    size_t len = strlen(name);
    if (index_find(m->params, m->cap_params, name, len) >= 0 ||
        index_find(m->children, m->cap_children, name, len) >= 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: name \"%s\" is already registered", fn, name);
        return false;
    }
    return true;
}

static bool grow(em_module_entry **arr, int *cap, int n)
{
    if (n < *cap) return true;
    int c = *cap ? *cap * 2 : 4;
    em_module_entry *g = em_calloc((size_t)c * sizeof *g + (size_t)(2 * c) * sizeof(int32_t));
    if (!g) return false;
    if (*arr) memcpy(g, *arr, (size_t)n * sizeof *g);
    for (int i = 0; i < n; i++) index_add(g, c, i);
    em_free(*arr);
    *arr = g;
    *cap = c;
    return true;
}

static em_tensor *add_tensor(const char *fn, em_module *m, const char *name, em_tensor *t,
                             bool buffer)
{
    if (!t) return NULL; /* keeps the error of the op that made t */
    if (!valid_name(fn, m, name) || !grow(&m->params, &m->cap_params, m->n_params)) {
        em_release(t);
        return NULL;
    }
    char *nm = dup_name(name);
    if (!nm) {
        em_release(t);
        return NULL;
    }
    /* the module owns a plain reference: scopes never release parameters */
    em_tensor *own = em_retain(t);
    em_release(t);
    /* not in em_module_set: what replaces an entry every step (batch norm's running statistics)
       would pay a device allocation, a copy and a synchronising free each time */
    if (!tn_make_persistent(own)) {
        em_free(nm);
        tn_release_ref(own);
        return NULL;
    }
    if (!buffer && em_dtype_is_float(own->dtype)) em_requires_grad(own, true);
    m->params[m->n_params] = (em_module_entry){.name = nm, .tensor = own, .is_buffer = buffer};
    index_add(m->params, m->cap_params, m->n_params++);
    return own;
}

em_tensor *em_module_param(em_module *m, const char *name, em_tensor *t)
{
    return add_tensor("em_module_param", m, name, t, false);
}

em_tensor *em_module_buffer(em_module *m, const char *name, em_tensor *t)
{
    return add_tensor("em_module_buffer", m, name, t, true);
}

em_module *em_module_child(em_module *m, const char *name, em_module *child)
{
    if (!child) return NULL;
    if (!valid_name("em_module_child", m, name) ||
        !grow(&m->children, &m->cap_children, m->n_children)) {
        em_module_free(child);
        return NULL;
    }
    char *nm = dup_name(name);
    if (!nm) {
        em_module_free(child);
        return NULL;
    }
    m->children[m->n_children] = (em_module_entry){.name = nm, .child = child};
    index_add(m->children, m->cap_children, m->n_children++);
    return child;
}

em_status em_module_set(em_module *m, const char *name, em_tensor *t)
{
    if (!tn_check_ptr("em_module_set", m, "m") || !tn_check_ptr("em_module_set", t, "t"))
        return em_last_status();
    int i = name ? index_find(m->params, m->cap_params, name, strlen(name)) : -1;
    if (i >= 0) {
        em_module_entry *e = &m->params[i];
        em_tensor *own = em_retain(t);
        em_release(t);
        if (!e->is_buffer && em_dtype_is_float(own->dtype) && !em_tensor_requires_grad(own) &&
            !em_requires_grad(own, true)) {
            tn_release_ref(own);
            return em_last_status(); /* the entry keeps its old tensor */
        }
        tn_release_ref(e->tensor); /* the module's plain reference */
        e->tensor = own;
        return EM_OK;
    }
    em_release(t);
    return em_error(EM_ERR_INVALID_ARG, "em_module_set: %s has no parameter or buffer \"%s\"",
                    m->type ? m->type->name : "module", name);
}

void em_module_free(em_module *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_children; i++) {
        em_module_free(m->children[i].child);
        em_free(m->children[i].name);
    }
    for (int i = 0; i < m->n_params; i++) {
        tn_release_ref(m->params[i].tensor);
        em_free(m->params[i].name);
    }
    em_free(m->children);
    em_free(m->params);
    if (m->type && m->type->destroy) m->type->destroy(m);
    em_free(m);
}

em_tensor *em_forward_n(em_module *m, em_tensor *const *in, int n)
{
    if (!tn_check_ptr("em_forward", m, "m")) return NULL;
    for (int i = 0; i < n; i++)
        if (!tn_check_ptr("em_forward", in[i], "input")) return NULL;
    if (!m->type || !m->type->forward) {
        em_error(EM_ERR_STATE, "em_forward: module type %s has no forward",
                 m->type ? m->type->name : "?");
        return NULL;
    }
    return m->type->forward(m, in, n);
}

em_tensor *em_forward(em_module *m, em_tensor *x)
{
    return em_forward_n(m, &x, 1);
}

/* ---- traversal --------------------------------------------------------------------------- */

static void visit_rec(em_module *m, char *prefix, size_t len, size_t cap, em_param_fn fn, void *ctx)
{
    for (int i = 0; i < m->n_params; i++) {
        snprintf(prefix + len, cap - len, "%s%s", len ? "." : "", m->params[i].name);
        fn(ctx, prefix, &m->params[i]);
    }
    for (int i = 0; i < m->n_children; i++) {
        size_t l = len + (size_t)snprintf(prefix + len, cap - len, "%s%s", len ? "." : "",
                                          m->children[i].name);
        if (l >= cap) l = cap - 1;
        visit_rec(m->children[i].child, prefix, l, cap, fn, ctx);
    }
    prefix[len] = '\0';
}

void em_module_visit(em_module *m, em_param_fn fn, void *ctx)
{
    if (!m || !fn) return;
    char prefix[512] = "";
    visit_rec(m, prefix, 0, sizeof prefix, fn, ctx);
}

em_module *em_module_find(em_module *m, const char *name)
{
    if (!m || !name) return NULL;
    if (!*name) return m;
    const char *dot = strchr(name, '.');
    size_t n = dot ? (size_t)(dot - name) : strlen(name);
    int i = index_find(m->children, m->cap_children, name, n);
    if (i < 0) return NULL;
    return dot ? em_module_find(m->children[i].child, dot + 1) : m->children[i].child;
}

static em_module_entry *find_entry(em_module *m, const char *name)
{
    const char *dot = strrchr(name, '.');
    em_module *owner = m;
    const char *leaf = name;
    if (dot) {
        char path[512];
        size_t n = (size_t)(dot - name);
        if (n >= sizeof path) return NULL;
        memcpy(path, name, n);
        path[n] = '\0';
        owner = em_module_find(m, path);
        leaf = dot + 1;
    }
    if (!owner) return NULL;
    int i = index_find(owner->params, owner->cap_params, leaf, strlen(leaf));
    return i < 0 ? NULL : &owner->params[i];
}

em_tensor *em_module_get(em_module *m, const char *name)
{
    if (!m || !name) return NULL;
    em_module_entry *e = find_entry(m, name);
    return e ? e->tensor : NULL;
}

typedef struct count_ctx {
    int64_t n;
    bool trainable_only;
} count_ctx;

static void count_fn(void *vctx, const char *name, em_module_entry *e)
{
    count_ctx *c = vctx;
    if (c->trainable_only && (e->is_buffer || e->frozen)) return;
    c->n += em_tensor_numel(e->tensor);
}

int64_t em_module_count(em_module *m, bool trainable_only)
{
    count_ctx c = {0, trainable_only};
    em_module_visit(m, count_fn, &c);
    return c.n;
}

typedef struct params_ctx {
    em_tensor **out;
    const char **names;
    int n, cap;
    char (*store)[256];
} params_ctx;

static void params_fn(void *vctx, const char *name, em_module_entry *e)
{
    params_ctx *c = vctx;
    if (e->is_buffer || e->frozen) return;
    if (c->n < c->cap) {
        if (c->out) c->out[c->n] = e->tensor;
        if (c->names) c->names[c->n] = e->name;
    }
    c->n++;
}

int em_module_parameters(em_module *m, em_tensor **out, const char **names, int cap)
{
    params_ctx c = {out, names, 0, cap, NULL};
    em_module_visit(m, params_fn, &c);
    return c.n;
}

/* ---- moves and modes --------------------------------------------------------------------- */

typedef struct move_ctx {
    em_device dev;
    int dtype; /* -1: keep */
    em_status st;
} move_ctx;

static void move_fn(void *vctx, const char *name, em_module_entry *e)
{
    move_ctx *c = vctx;
    if (c->st != EM_OK) return;
    em_tensor *t = e->tensor;
    bool trainable = em_tensor_requires_grad(t);
    em_no_grad_begin();
    if (c->dtype >= 0 && !em_dtype_is_float(t->dtype)) {
        em_no_grad_end();
        return; /* integer buffers keep their dtype */
    }
    /* the new tensor is the module's from now on: persistent storage on its device */
    em_device to = c->dtype >= 0 ? em_tensor_device(t) : c->dev;
    bool scoped = em_backend_persistent_enter(to); /* a bad device: the move says so */
    em_tensor *moved = c->dtype >= 0 ? em_cast(t, (em_dtype)c->dtype) : em_to_device(t, c->dev);
    if (scoped) em_backend_persistent_leave(to);
    em_no_grad_end();
    if (!moved) {
        c->st = em_last_status();
        return;
    }
    em_tensor *own = em_retain(moved);
    em_release(moved);
    if (own != t) {
        if (trainable) em_requires_grad(own, true);
        tn_release_ref(t);
        e->tensor = own;
    } else {
        tn_release_ref(own);
    }
}

static void set_device(em_module *m, em_device dev)
{
    m->device = dev;
    for (int i = 0; i < m->n_children; i++) set_device(m->children[i].child, dev);
}

em_status em_module_to(em_module *m, em_device dev)
{
    if (!tn_check_ptr("em_module_to", m, "m")) return em_last_status();
    move_ctx c = {dev, -1, EM_OK};
    em_module_visit(m, move_fn, &c);
    if (c.st == EM_OK) set_device(m, dev);
    return c.st;
}

em_status em_module_cast(em_module *m, em_dtype dt)
{
    if (!tn_check_ptr("em_module_cast", m, "m")) return em_last_status();
    if (!em_dtype_is_float(dt))
        return em_error(EM_ERR_DTYPE, "em_module_cast: %s is not a float dtype", em_dtype_name(dt));
    move_ctx c = {EM_CPU, (int)dt, EM_OK};
    em_module_visit(m, move_fn, &c);
    return c.st;
}

void em_module_train(em_module *m, bool training)
{
    if (!m) return;
    m->training = training;
    for (int i = 0; i < m->n_children; i++) em_module_train(m->children[i].child, training);
}

typedef struct freeze_ctx {
    const char *pattern;
    bool frozen;
    int n;
} freeze_ctx;

static void freeze_fn(void *vctx, const char *name, em_module_entry *e)
{
    freeze_ctx *c = vctx;
    if (e->is_buffer || fnmatch(c->pattern, name, 0) != 0) return;
    e->frozen = c->frozen;
    c->n++;
}

int em_module_freeze(em_module *m, const char *pattern, bool frozen)
{
    if (!tn_check_ptr("em_module_freeze", m, "m") ||
        !tn_check_ptr("em_module_freeze", pattern, "pattern"))
        return 0;
    freeze_ctx c = {pattern, frozen, 0};
    em_module_visit(m, freeze_fn, &c);
    return c.n;
}

/* ---- summary ----------------------------------------------------------------------------- */

typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...) EM_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    size_t len = (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1;
    if (t->n + len + 1 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        while (cap < t->n + len + 1) cap *= 2;
        char *g = em_alloc(cap);
        if (!g) return;
        if (t->p) memcpy(g, t->p, t->n);
        em_free(t->p);
        t->p = g;
        t->cap = cap;
    }
    memcpy(t->p + t->n, buf, len);
    t->n += len;
    t->p[t->n] = '\0';
}

static void summary_rec(em_module *m, const char *name, int depth, text *t)
{
    char desc[256] = "";
    if (m->type && m->type->describe) m->type->describe(m, desc, sizeof desc);
    int64_t own = 0;
    for (int i = 0; i < m->n_params; i++)
        if (!m->params[i].is_buffer) own += em_tensor_numel(m->params[i].tensor);
    put(t, "%*s%s%s%s(%s)", depth * 2, "", name, *name ? ": " : "",
        m->type ? m->type->name : "Module", desc);
    int64_t total = em_module_count(m, false);
    put(t, "  [%lld params]\n", (long long)total);
    for (int i = 0; i < m->n_params; i++) {
        em_module_entry *e = &m->params[i];
        char shape[128];
        em_shape_str(em_tensor_shape(e->tensor), shape, sizeof shape);
        put(t, "%*s%s %s %s%s%s\n", depth * 2 + 2, "", e->name, shape,
            em_dtype_name(em_tensor_dtype(e->tensor)), e->is_buffer ? " (buffer)" : "",
            e->frozen ? " (frozen)" : "");
    }
    (void)own;
    for (int i = 0; i < m->n_children; i++)
        summary_rec(m->children[i].child, m->children[i].name, depth + 1, t);
}

char *em_module_summary(em_module *m)
{
    if (!tn_check_ptr("em_module_summary", m, "m")) return NULL;
    text t = {0};
    summary_rec(m, "", 0, &t);
    put(&t, "trainable parameters: %lld, total: %lld\n", (long long)em_module_count(m, true),
        (long long)em_module_count(m, false));
    return t.p;
}
