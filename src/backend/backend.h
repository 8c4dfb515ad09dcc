/* The backend interface and registry. A backend is a table of functions registered at start-up;
 * the tensor layer reaches devices only through it. */
#ifndef EMBER_BACKEND_H
#define EMBER_BACKEND_H

#include "../tensor/op.h"

typedef struct em_backend {
    const char *name; /* "cpu", "cuda" */
    int (*device_count)(void);
    /* Device memory; NULL on failure (the backend records the error). */
    void *(*alloc)(int device, size_t nbytes);
    void (*free)(int device, void *p);
    em_status (*copy_from_host)(int device, void *dst, const void *src, size_t nbytes);
    em_status (*copy_to_host)(int device, void *dst, const void *src, size_t nbytes);
    em_status (*copy_within)(int device, void *dst, const void *src, size_t nbytes);
    bool (*supports)(const em_op *op);
    /* Runs op; outputs are allocated on this backend. */
    em_status (*exec)(const em_op *op);
    em_status (*sync)(int device);
} em_backend;

#define EM_MAX_BACKENDS 8

/* Adds a backend; returns its index or -1 when full. The CPU is registered first (index 0). */
int em_backend_register(const em_backend *b);
const em_backend *em_backend_get(int index);
/* Index of the backend with this name, or -1. */
int em_backend_find(const char *name);
/* Registers the built-in backends once (called by the tensor layer on first use). */
void em_backends_init(void);

/* The CPU backend's table. */
extern const em_backend cpu_backend;

#endif
