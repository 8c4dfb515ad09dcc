/* Scopes: tensors created between em_scope_begin and em_scope_end are released at the end
 * unless kept. One thread-local list of scope-owned references; each open scope owns a suffix
 * of it. A handle may appear more than once (one entry per reference the scope owns), and in the
 * lists of several threads (a parameter shared by threads' forwards): its scope_refs counts the
 * entries of all of them. */
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"

#define MAX_SCOPES 256

static EM_THREAD_LOCAL em_tensor **tracked;
static EM_THREAD_LOCAL int64_t n_tracked, cap_tracked;
static EM_THREAD_LOCAL int64_t frame_start[MAX_SCOPES];
static EM_THREAD_LOCAL uint64_t frame_err[MAX_SCOPES]; /* core_error_mark() at each begin */
static EM_THREAD_LOCAL int depth;

/* Non-tensor objects owned by scopes, with their own frame boundaries. */
typedef struct owned_obj {
    void *obj;
    void (*fn)(void *);
} owned_obj;
static EM_THREAD_LOCAL owned_obj *objs;
static EM_THREAD_LOCAL int64_t n_objs, cap_objs;
static EM_THREAD_LOCAL int64_t obj_frame_start[MAX_SCOPES];

bool tn_scope_track_obj(void *obj, void (*fn)(void *))
{
    if (depth == 0 || depth > MAX_SCOPES) return false;
    if (n_objs == cap_objs) {
        int64_t cap = cap_objs ? cap_objs * 2 : 16;
        owned_obj *grown = realloc(objs, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        objs = grown;
        cap_objs = cap;
    }
    objs[n_objs++] = (owned_obj){obj, fn};
    return true;
}

bool tn_scope_untrack_obj(void *obj)
{
    for (int64_t i = n_objs - 1; i >= 0; i--) {
        if (objs[i].obj == obj) {
            objs[i].obj = NULL;
            return true;
        }
    }
    return false;
}

void em_scope_begin(void)
{
    if (depth >= MAX_SCOPES) {
        em_error(EM_ERR_STATE, "em_scope_begin: more than %d nested scopes", MAX_SCOPES);
        depth++; /* keep begin/end balanced; the extra levels track nothing */
        return;
    }
    obj_frame_start[depth] = n_objs;
    frame_err[depth] = core_error_mark();
    frame_start[depth++] = n_tracked;
}

bool tn_scope_failed(void)
{
    if (depth == 0 || depth > MAX_SCOPES) return em_failed();
    return core_failed_since(frame_err[depth - 1]);
}

int em_scope_depth(void)
{
    return depth;
}

/* The bookkeeping uses plain malloc so it never shows in tensor memory statistics and never
 * fails through em_mem_fail_at. */
void tn_scope_track(em_tensor *t)
{
    if (depth == 0 || depth > MAX_SCOPES) return;
    if (n_tracked == cap_tracked) {
        int64_t cap = cap_tracked ? cap_tracked * 2 : 256;
        em_tensor **grown = realloc(tracked, (size_t)cap * sizeof *grown);
        if (!grown) return; /* untracked: the reference stays with the caller */
        tracked = grown;
        cap_tracked = cap;
    }
    tracked[n_tracked++] = t;
    atomic_fetch_add_explicit(&t->scope_refs, 1, memory_order_relaxed);
}

/* Index of the newest entry for t at or above `from`, or -1. Released tensors are almost
 * always recent, so the scan from the end is short. */
static int64_t find_entry(const em_tensor *t, int64_t from)
{
    for (int64_t i = n_tracked - 1; i >= from; i--)
        if (tracked[i] == t) return i;
    return -1;
}

void tn_scope_forget(em_tensor *t)
{
    int64_t i = find_entry(t, 0);
    if (i < 0) return;
    tracked[i] = NULL;
    atomic_fetch_sub_explicit(&t->scope_refs, 1, memory_order_relaxed);
}

em_status em_scope_end(void)
{
    if (depth == 0) return em_error(EM_ERR_STATE, "em_scope_end: no open scope");
    depth--;
    if (depth >= MAX_SCOPES) return EM_OK;
    for (int64_t i = n_objs - 1; i >= obj_frame_start[depth]; i--) {
        owned_obj o = objs[i];
        objs[i].obj = NULL;
        if (o.obj) o.fn(o.obj);
    }
    n_objs = obj_frame_start[depth];
    if (depth == 0) {
        free(objs);
        objs = NULL;
        n_objs = cap_objs = 0;
    }
    int64_t start = frame_start[depth];
    /* Release newest first: views go before the tensors they came from. */
    for (int64_t i = n_tracked - 1; i >= start; i--) {
        em_tensor *t = tracked[i];
        if (!t) continue;
        tracked[i] = NULL;
        atomic_fetch_sub_explicit(&t->scope_refs, 1, memory_order_relaxed);
        tn_release_ref(t);
    }
    n_tracked = start;
    if (depth == 0) {
        free(tracked);
        tracked = NULL;
        n_tracked = cap_tracked = 0;
    }
    return EM_OK;
}

em_tensor *em_keep(em_tensor *t)
{
    if (!t || atomic_load_explicit(&t->scope_refs, memory_order_relaxed) == 0 || depth == 0 ||
        depth > MAX_SCOPES)
        return t;
    int64_t fs = frame_start[depth - 1];
    int64_t i = find_entry(t, fs);
    if (i < 0) return t; /* owned by an enclosing scope: it outlives this one anyway */
    if (depth == 1) {
        tracked[i] = NULL; /* the caller owns this reference now */
        atomic_fetch_sub_explicit(&t->scope_refs, 1, memory_order_relaxed);
        return t;
    }
    /* Hand the reference to the enclosing scope: swap it to the first slot of the current
     * frame and move the frame boundary past it. */
    tracked[i] = tracked[fs];
    tracked[fs] = t;
    frame_start[depth - 1] = fs + 1;
    return t;
}
