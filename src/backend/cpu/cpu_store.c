/* Which stores large outputs get, per op family (cpu_fast.h: cpu_store_begin). Under the
 * default configuration (cpu_stream_stores = auto) a family's first large call streams untimed
 * (it pays for fresh pages and cold caches, which would count against whichever store it
 * tried and could pick the slower one), then its next large calls
 * stream around the caches, then store through them, CPU_STORE_TRIALS each, each but the first
 * of a run timed per byte of output; then the store whose fastest timed call was faster is kept for
 * the process (around the caches unless through them is STORE_MARGIN faster: the caches then stay
 * with other work). The stores never change a value, only where the bytes go, so the choice cannot
 * change a result. */
#include <ember/core.h>
#include <pthread.h>
#include <string.h>

#include "core/core_impl.h"
#include "cpu_fast.h"

#define CPU_STORE_TRIALS 3
#define STORE_MARGIN     0.98 /* through the caches must take less than this share of around */

static const char *const kind_names[CPU_STORE_KINDS] = {
    "gelu", "softmax", "layer/rms norm", "max pool (rows)", "max pool (channels-last)"};

typedef struct kind_state {
    bool warm;      /* the untimed first call is done */
    int tried[2];   /* trials run: [0] through the caches, [1] around them */
    double best[2]; /* fastest trial, ns per byte */
    int decision;   /* -1 until made */
} kind_state;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kind_state state[CPU_STORE_KINDS];
static int configured = -2; /* -2 unread, -1 auto, 0 off, 1 on */
static int forced = -1;     /* cpu_store_force */

/* Under lock. */
static int mode(void)
{
    if (forced >= 0) return forced;
    if (configured == -2) {
        configured = core_cfg_is(CFG_CPU_STREAM_STORES, "on")    ? 1
                     : core_cfg_is(CFG_CPU_STREAM_STORES, "off") ? 0
                                                                 : -1;
        for (int k = 0; k < CPU_STORE_KINDS; k++) state[k].decision = -1;
    }
    return configured;
}

cpu_store_plan cpu_store_begin(cpu_store_kind kind, int64_t bytes)
{
    cpu_store_plan p = {.hint = 0, .kind = kind, .trial = -1, .bytes = bytes, .t0 = 0};
    if (bytes < CPU_FAST_STREAM_MIN) return p;
    p.hint = CPU_FAST_BIG;
    pthread_mutex_lock(&lock);
    int m = mode();
    kind_state *s = &state[kind];
    if (m < 0 && s->decision < 0 && !s->warm) {
        s->warm = true; /* the first large call: around the caches, untimed */
        m = 1;
    } else if (m < 0 && s->decision < 0) {
        /* the trials around the caches, then those through them: not in turn, because a call
           that stores through the caches leaves dirty lines that the next call writes back, and
           a streamed call right after one paid for them and the slower store could win; and
           the first of each run is not counted: it follows the other kind (through the caches
           after streamed calls it has nothing to write back, so it times faster than the same
           calls in a row do) */
        p.trial = s->tried[1] < CPU_STORE_TRIALS ? 1 : 0;
        m = p.trial;
    } else if (m < 0) {
        m = s->decision;
    }
    pthread_mutex_unlock(&lock);
    if (m == 1) p.hint |= CPU_FAST_STREAM;
    if (p.trial >= 0) p.t0 = core_mono_ns();
    return p;
}

void cpu_store_end(const cpu_store_plan *p)
{
    if (p->trial < 0) return;
    double ns = (double)(core_mono_ns() - p->t0) / (double)p->bytes;
    pthread_mutex_lock(&lock);
    kind_state *s = &state[p->kind];
    if (s->decision < 0) {
        int t = p->trial;
        /* the first of a run settles the caches (it follows the other kind's calls) */
        if (s->tried[t] == 1 || (s->tried[t] > 1 && ns < s->best[t])) s->best[t] = ns;
        s->tried[t]++;
        if (s->tried[0] >= CPU_STORE_TRIALS && s->tried[1] >= CPU_STORE_TRIALS) {
            s->decision = s->best[0] < STORE_MARGIN * s->best[1] ? 0 : 1;
            em_log_msg("cpu", EM_LOG_DEBUG,
                       "%s: large outputs stored %s the caches (fastest of %d: around %.4f, "
                       "through %.4f ns/byte)",
                       kind_names[p->kind], s->decision ? "around" : "through",
                       CPU_STORE_TRIALS - 1, s->best[1], s->best[0]);
        }
    }
    pthread_mutex_unlock(&lock);
}

void cpu_store_force(int m)
{
    pthread_mutex_lock(&lock);
    (void)mode(); /* read the configuration first, so a later read does not reset the state */
    forced = m < 0 ? -1 : m > 0;
    pthread_mutex_unlock(&lock);
}

int cpu_store_decision(cpu_store_kind kind)
{
    pthread_mutex_lock(&lock);
    int m = mode();
    int d = m >= 0 ? m : state[kind].decision;
    pthread_mutex_unlock(&lock);
    return d;
}
