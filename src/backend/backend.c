/* The backend registry and device names. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda/cuda.h"

static const em_backend *registry[EM_MAX_BACKENDS];
static int n_registered;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

int em_backend_register(const em_backend *b)
{
    if (n_registered >= EM_MAX_BACKENDS) return -1;
    registry[n_registered] = b;
    return n_registered++;
}

const em_backend *em_backend_get(int index)
{
    if (index < 0 || index >= n_registered) return NULL;
    return registry[index];
}

int em_backend_find(const char *name)
{
    for (int i = 0; i < n_registered; i++)
        if (strcmp(registry[i]->name, name) == 0) return i;
    return -1;
}

static void register_builtin(void)
{
    core_init();
    em_backend_register(&cpu_backend);
    /* present only where libcuda loads and reports at least one device */
    if (cuda_backend_probe()) em_backend_register(&cuda_backend);
}

void em_backends_init(void)
{
    pthread_once(&init_once, register_builtin);
}

const em_backend *em_backend_of(const char *fn, em_device dev)
{
    em_backends_init();
    const em_backend *b = em_backend_get(dev.backend);
    if (dev.backend < 0) {
        em_error(EM_ERR_DEVICE, "%s: device none does not exist", fn);
        return NULL;
    }
    if (!b || dev.index < 0 || dev.index >= b->device_count()) {
        em_error(EM_ERR_DEVICE, "%s: device %d:%d does not exist", fn, dev.backend, dev.index);
        return NULL;
    }
    return b;
}

/* The device `name` stands for in *out; false with the reason in why[cap] when there is none. */
static bool device_lookup(const char *name, em_device *out, char *why, size_t cap)
{
    char base[32];
    const char *colon = strchr(name, ':');
    size_t len = colon ? (size_t)(colon - name) : strlen(name);
    if (len == 0 || len >= sizeof base) {
        snprintf(why, cap, "unknown device \"%s\"", name);
        return false;
    }
    memcpy(base, name, len);
    base[len] = '\0';
    long index = 0;
    if (colon) {
        char *end;
        index = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end != '\0' || index < 0 || index > 1024) {
            snprintf(why, cap, "bad device index in \"%s\"", name);
            return false;
        }
    }
    int b = em_backend_find(base);
    if (b < 0 && strcmp(base, "cuda") == 0) {
        snprintf(why, cap,
                 "unknown device \"%s\": no CUDA device (libcuda was not found, or it reports no "
                 "GPU)",
                 name);
        return false;
    }
    if (b < 0) {
        size_t n = (size_t)snprintf(why, cap, "unknown device \"%s\" (backends:", name);
        for (int i = 0; i < n_registered && n < cap; i++)
            n += (size_t)snprintf(why + n, cap - n, " %s", registry[i]->name);
        if (n < cap) snprintf(why + n, cap - n, ")");
        return false;
    }
    int count = registry[b]->device_count();
    if (index >= count) {
        snprintf(why, cap, "device \"%s\" does not exist (%d device%s)", name, count,
                 count == 1 ? "" : "s");
        return false;
    }
    *out = (em_device){(int16_t)b, (int16_t)index};
    return true;
}

em_device em_device_parse(const char *name)
{
    em_backends_init();
    if (!name) {
        em_error(EM_ERR_INVALID_ARG, "em_device_parse: argument `name` is NULL");
        return EM_DEVICE_NONE;
    }
    em_device d;
    char why[256];
    if (device_lookup(name, &d, why, sizeof why)) return d;
    em_error(EM_ERR_DEVICE, "em_device_parse: %s", why);
    return EM_DEVICE_NONE;
}

/* A configured device that is not there fails here, naming the setting, and every tensor made
 * on the EM_DEVICE_NONE returned fails too: the program stops at its first use instead of
 * running on another device. */
em_device em_device_default(void)
{
    em_backends_init();
    const char *name = core_cfg_str(CFG_DEVICE);
    if (!name || !*name) return EM_CPU;
    em_device d;
    char why[256];
    if (device_lookup(name, &d, why, sizeof why)) return d;
    const char *src = core_cfg_source(CFG_DEVICE); /* the variable, file:line or em_config_set */
    if (!strncmp(src, "EMBER_", 6))
        em_error(EM_ERR_DEVICE, "em_device_default: %s=%s: %s", src, name, why);
    else
        em_error(EM_ERR_DEVICE, "em_device_default: device = \"%s\" (%s): %s", name, src, why);
    return EM_DEVICE_NONE;
}

char *em_device_str(em_device d, char *buf, size_t cap)
{
    if (!buf || cap == 0) return buf;
    em_backends_init();
    const em_backend *b = em_backend_get(d.backend);
    if (d.backend < 0)
        snprintf(buf, cap, "none");
    else if (!b)
        snprintf(buf, cap, "<unknown backend %d>:%d", d.backend, d.index);
    else if (d.backend == 0)
        snprintf(buf, cap, "%s", b->name);
    else
        snprintf(buf, cap, "%s:%d", b->name, d.index);
    return buf;
}

bool em_device_equal(em_device a, em_device b)
{
    return a.backend == b.backend && a.index == b.index;
}

const char *em_device_backend_name(em_device d)
{
    em_backends_init();
    const em_backend *b = em_backend_get(d.backend);
    return b ? b->name : "?";
}

em_status em_device_sync(em_device d)
{
    em_backends_init();
    const em_backend *b = em_backend_get(d.backend);
    if (!b) return em_error(EM_ERR_DEVICE, "em_device_sync: no backend with index %d", d.backend);
    return b->sync(d.index);
}
