/* The logger: a level per component (with a fallback for the rest) and three sinks: stderr, an
 * append-mode file and one user callback. The only place in the library that prints. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core_impl.h"

#define MSG_CAP 1024

typedef struct comp_level {
    char *name;
    em_log_level level;
} comp_level;

/* The lock is recursive so a callback may log or change the sinks without deadlocking. */
static pthread_mutex_t log_lock;
static pthread_once_t lock_once = PTHREAD_ONCE_INIT;

static em_log_level default_level = EM_LOG_WARN;
static comp_level *levels;
static int nlevels, cap_levels;
/* The lowest level any component accepts: messages below it return without locking. */
static atomic_int min_level = EM_LOG_WARN;

static bool stderr_on = true;
static FILE *log_file;
static em_log_fn callback;
static void *callback_user;

static const char *level_names[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF"};

static void init_lock(void)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&log_lock, &attr);
    pthread_mutexattr_destroy(&attr);
}

static void lock(void)
{
    pthread_once(&lock_once, init_lock);
    pthread_mutex_lock(&log_lock);
}

static void unlock(void)
{
    pthread_mutex_unlock(&log_lock);
}

static bool is_all(const char *component)
{
    return !component || !strcmp(component, "*");
}

/* Caller holds the lock. */
static comp_level *find_level(const char *component)
{
    for (int i = 0; i < nlevels; i++)
        if (!strcmp(levels[i].name, component)) return &levels[i];
    return NULL;
}

/* Caller holds the lock. */
static void update_min_level(void)
{
    em_log_level lo = default_level;
    for (int i = 0; i < nlevels; i++)
        if (levels[i].level < lo) lo = levels[i].level;
    atomic_store(&min_level, (int)lo);
}

void em_log_set_level(const char *component, em_log_level level)
{
    core_init();
    if ((int)level < EM_LOG_TRACE || (int)level > EM_LOG_OFF) {
        em_error(EM_ERR_INVALID_ARG, "em_log_set_level: invalid level %d for '%s'", (int)level,
                 component ? component : "*");
        return;
    }
    lock();
    if (is_all(component)) {
        /* "All" means all: components with their own level follow the new one too. */
        for (int i = 0; i < nlevels; i++) free(levels[i].name);
        nlevels = 0;
        default_level = level;
    } else {
        comp_level *c = find_level(component);
        if (!c) {
            if (nlevels == cap_levels) {
                int cap = cap_levels ? 2 * cap_levels : 16;
                comp_level *grown = realloc(levels, (size_t)cap * sizeof *grown);
                if (!grown) goto oom;
                levels = grown;
                cap_levels = cap;
            }
            char *name = strdup(component);
            if (!name) goto oom;
            levels[nlevels] = (comp_level){.name = name, .level = level};
            c = &levels[nlevels++];
        }
        c->level = level;
    }
    update_min_level();
    unlock();
    return;
oom:
    unlock();
    em_error(EM_ERR_OOM, "em_log_set_level: out of memory adding component '%s'", component);
}

em_log_level em_log_get_level(const char *component)
{
    core_init();
    lock();
    em_log_level level = default_level;
    if (!is_all(component)) {
        comp_level *c = find_level(component);
        if (c) level = c->level;
    }
    unlock();
    return level;
}

void em_log_to_stderr(bool on)
{
    core_init();
    lock();
    stderr_on = on;
    unlock();
}

em_status em_log_to_file(const char *path)
{
    core_init();
    FILE *f = NULL;
    if (path) {
        f = fopen(path, "a");
        if (!f) return em_error(EM_ERR_IO, "em_log_to_file: cannot open '%s' for appending", path);
    }
    lock();
    FILE *old = log_file;
    log_file = f;
    unlock();
    if (old) fclose(old);
    return EM_OK;
}

void em_log_set_callback(em_log_fn fn, void *user)
{
    core_init();
    lock();
    callback = fn;
    callback_user = user;
    unlock();
}

int em_log_level_parse(const char *name)
{
    if (!name) return -1;
    static const char *names[] = {"trace", "debug", "info", "warn", "error", "off"};
    for (int i = 0; i <= EM_LOG_OFF; i++)
        if (!strcasecmp(name, names[i])) return i;
    if (!strcasecmp(name, "warning")) return EM_LOG_WARN;
    return -1;
}

void em_log_msg(const char *component, em_log_level level, const char *fmt, ...)
{
    core_init();
    if ((int)level < EM_LOG_TRACE || (int)level >= EM_LOG_OFF || !fmt) return;
    if ((int)level < atomic_load(&min_level)) return;
    if (!component) component = "ember";

    lock();
    em_log_level want = default_level;
    comp_level *c = find_level(component);
    if (c) want = c->level;
    if (level < want || (!stderr_on && !log_file && !callback)) {
        unlock();
        return;
    }

    /* Format once; messages longer than the stack buffer get a heap one. */
    char stack_msg[MSG_CAP];
    char *msg = stack_msg;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(stack_msg, sizeof stack_msg, fmt, ap);
    va_end(ap);
    if (len >= (int)sizeof stack_msg) {
        char *big = malloc((size_t)len + 1);
        if (big) {
            va_start(ap, fmt);
            vsnprintf(big, (size_t)len + 1, fmt, ap);
            va_end(ap);
            msg = big;
        }
    } else if (len < 0) {
        snprintf(stack_msg, sizeof stack_msg, "(unformattable message)");
    }

    if (stderr_on) fprintf(stderr, "ember[%s] %s: %s\n", component, level_names[level], msg);
    if (log_file) {
        fprintf(log_file, "ember[%s] %s: %s\n", component, level_names[level], msg);
        fflush(log_file);
    }
    if (callback) callback(callback_user, component, level, msg);
    unlock();
    if (msg != stack_msg) free(msg);
}
