/* Scopes: tensors created between em_scope_begin and em_scope_end are released at the end
 * unless kept. One thread-local list of tracked handles; each open scope owns a suffix of it. */
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"

#define MAX_SCOPES 256

static EM_THREAD_LOCAL em_tensor **tracked;
static EM_THREAD_LOCAL int64_t n_tracked, cap_tracked;
static EM_THREAD_LOCAL int64_t frame_start[MAX_SCOPES];
static EM_THREAD_LOCAL int depth;

void em_scope_begin(void)
{
    if (depth >= MAX_SCOPES) {
        em_error(EM_ERR_STATE, "em_scope_begin: more than %d nested scopes", MAX_SCOPES);
        depth++; /* keep begin/end balanced; the extra levels track nothing */
        return;
    }
    frame_start[depth++] = n_tracked;
}

int em_scope_depth(void)
{
    return depth;
}

/* Appends t to the innermost scope. Tracking uses plain malloc so the bookkeeping itself
 * never shows in tensor memory statistics and never fails through em_mem_fail_at. */
void tn_scope_track(em_tensor *t)
{
    if (depth == 0 || depth > MAX_SCOPES) return;
    if (n_tracked == cap_tracked) {
        int64_t cap = cap_tracked ? cap_tracked * 2 : 256;
        em_tensor **grown = realloc(tracked, (size_t)cap * sizeof *grown);
        if (!grown) return; /* untracked: the caller still owns the reference */
        tracked = grown;
        cap_tracked = cap;
    }
    tracked[n_tracked++] = t;
    t->scope_slot = (int)(n_tracked); /* fits: scopes hold far fewer than 2^31 tensors */
}

void tn_scope_forget(em_tensor *t)
{
    int64_t i = t->scope_slot - 1;
    if (i >= 0 && i < n_tracked && tracked[i] == t) tracked[i] = NULL;
    t->scope_slot = 0;
}

em_status em_scope_end(void)
{
    if (depth == 0) return em_error(EM_ERR_STATE, "em_scope_end: no open scope");
    depth--;
    if (depth >= MAX_SCOPES) return EM_OK;
    int64_t start = frame_start[depth];
    /* Release newest first: views go before the tensors they came from. */
    for (int64_t i = n_tracked - 1; i >= start; i--) {
        em_tensor *t = tracked[i];
        if (!t) continue;
        tracked[i] = NULL;
        t->scope_slot = 0;
        em_release(t);
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
    if (!t || !t->scope_slot || depth == 0 || depth > MAX_SCOPES) return t;
    int64_t i = t->scope_slot - 1;
    int64_t fs = frame_start[depth - 1];
    if (i < fs) return t; /* owned by an enclosing scope: it outlives this one anyway */
    if (depth == 1) {
        tn_scope_forget(t); /* the caller owns it now */
        return t;
    }
    /* Hand it to the enclosing scope: swap it to the first slot of the current frame and
     * move the frame boundary past it. */
    em_tensor *first = tracked[fs];
    tracked[fs] = t;
    t->scope_slot = (int)(fs + 1);
    tracked[i] = first;
    if (first) first->scope_slot = (int)(i + 1);
    frame_start[depth - 1] = fs + 1;
    return t;
}
