/* Ember neural-network modules: a tree of named parameters, buffers and children, the layers
 * built on it, losses and initializers. Options are structs in which zero means the PyTorch
 * default. */
#ifndef EMBER_NN_H
#define EMBER_NN_H

#include "autodiff.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_module em_module;

/* What a module type provides. forward takes n inputs and returns a new reference (or NULL
 * with an error). destroy frees what the module allocated beyond its registered parts (may be
 * NULL). describe writes a one-line summary of the options ("in=784, out=256"; may be NULL). */
typedef struct em_module_type {
    const char *name; /* "Linear" */
    em_tensor *(*forward)(em_module *m, em_tensor *const *in, int n);
    void (*destroy)(em_module *m);
    void (*describe)(const em_module *m, char *buf, size_t cap);
} em_module_type;

typedef struct em_module_entry {
    char *name;
    em_tensor *tensor; /* parameters and buffers */
    em_module *child;  /* children */
    bool is_buffer;    /* a buffer: saved with the module, never trained */
    bool frozen;       /* a parameter excluded from training */
} em_module_entry;

/* The module header. User modules embed it as their first member, call em_module_init, then
 * register parameters, buffers and children by name (see docs/modules.md). */
struct em_module {
    const em_module_type *type;
    em_module_entry *params; /* parameters and buffers, in registration order */
    int n_params, cap_params;
    em_module_entry *children;
    int n_children, cap_children;
    bool training;
    em_device device;
};

/* Allocates a zeroed module struct of `size` bytes (em_module first) and initialises its header;
 * free it with em_module_free. NULL on failure. */
EM_API void *em_module_alloc(size_t size, const em_module_type *type, em_device dev);
/* Prepares a header in place (training mode, the given device). */
EM_API void em_module_init(em_module *m, const em_module_type *type, em_device dev);
/* Registers t (the module takes the reference) as parameter `name`, marked requires-grad;
 * returns t, or NULL when t is NULL or the name is taken. On a GPU, t's storage moves into a
 * persistent block (em_device_persistent_begin) when t is the only view of it. */
EM_API em_tensor *em_module_param(em_module *m, const char *name, em_tensor *t);
/* Registers t as buffer `name` (not trained; saved with the module). */
EM_API em_tensor *em_module_buffer(em_module *m, const char *name, em_tensor *t);
/* Registers child module `name` (the parent takes ownership); returns child. */
EM_API em_module *em_module_child(em_module *m, const char *name, em_module *child);
/* Replaces the tensor of parameter or buffer `name` (direct member) keeping its flags; the
 * module takes the reference and releases the old one. t keeps its storage as it is. */
EM_API em_status em_module_set(em_module *m, const char *name, em_tensor *t);
/* Frees the module and its whole tree (NULL is ignored). */
EM_API void em_module_free(em_module *m);

/* Runs the module: a new reference. em_forward is the one-input form. Any number of threads may
 * run forwards (and backward passes) on one module at once, grad mode on or off, while nothing
 * changes it: no optimizer step, set, load, move, train/eval switch or free meanwhile, and batch
 * or instance norm in eval mode (in training mode they update their running statistics). */
EM_API em_tensor *em_forward(em_module *m, em_tensor *x);
EM_API em_tensor *em_forward_n(em_module *m, em_tensor *const *in, int n);

/* Calls fn for every parameter and buffer of the tree, depth first in registration order,
 * with its dotted name ("encoder.layers.0.weight"). */
typedef void (*em_param_fn)(void *ctx, const char *name, em_module_entry *e);
EM_API void em_module_visit(em_module *m, em_param_fn fn, void *ctx);
/* The parameter or buffer with this dotted name (borrowed), or NULL. */
EM_API em_tensor *em_module_get(em_module *m, const char *name);
/* The child with this dotted name (borrowed), or NULL. */
EM_API em_module *em_module_find(em_module *m, const char *name);
/* Number of parameter elements (trainable only, or all parameters and buffers). */
EM_API int64_t em_module_count(em_module *m, bool trainable_only);
/* Moves every parameter and buffer to dev (into persistent storage there). */
EM_API em_status em_module_to(em_module *m, em_device dev);
/* Converts every float parameter and buffer to dt (layers are created in f32). */
EM_API em_status em_module_cast(em_module *m, em_dtype dt);
/* Training or evaluation mode for the whole tree (dropout, batch norm ...). */
EM_API void em_module_train(em_module *m, bool training);
/* Freezes (or unfreezes) parameters whose dotted names match the glob pattern ("encoder.*",
 * "*.bias"); returns how many matched. */
EM_API int em_module_freeze(em_module *m, const char *pattern, bool frozen);
/* A printed summary: the tree with types, options, parameter shapes and counts (em_free). */
EM_API char *em_module_summary(em_module *m);
/* Trainable parameters in visit order (borrowed); returns the count, fills up to cap. */
EM_API int em_module_parameters(em_module *m, em_tensor **out, const char **names, int cap);

/* ---- initializers (PyTorch's formulas; all draw from the global generator) ----------------- */

typedef enum em_nonlinearity {
    EM_NL_LINEAR = 0,
    EM_NL_RELU = 1,
    EM_NL_LEAKY_RELU = 2,
    EM_NL_TANH = 3,
    EM_NL_SIGMOID = 4,
    EM_NL_SELU = 5,
} em_nonlinearity;

/* Gain of torch.nn.init.calculate_gain (param: leaky_relu slope). */
EM_API double em_init_gain(em_nonlinearity nl, double param);
/* fan_in and fan_out of a weight shaped like PyTorch's ([out, in, k...]). */
EM_API void em_init_fans(em_shape s, int64_t *fan_in, int64_t *fan_out);
/* New tensors filled like torch.nn.init.* of the same name. */
EM_API em_tensor *em_init_constant(em_shape s, double v, em_dtype dt, em_device dev);
EM_API em_tensor *em_init_uniform(em_shape s, double a, double b, em_dtype dt, em_device dev);
EM_API em_tensor *em_init_normal(em_shape s, double mean, double std, em_dtype dt, em_device dev);
/* Normal(mean, std) truncated to [a, b] (inverse-CDF method like PyTorch). */
EM_API em_tensor *em_init_trunc_normal(em_shape s, double mean, double std, double a, double b,
                                       em_dtype dt, em_device dev);
/* fan_out: use fan_out instead of fan_in. */
EM_API em_tensor *em_init_kaiming_uniform(em_shape s, double a, bool fan_out, em_nonlinearity nl,
                                          em_dtype dt, em_device dev);
EM_API em_tensor *em_init_kaiming_normal(em_shape s, double a, bool fan_out, em_nonlinearity nl,
                                         em_dtype dt, em_device dev);
EM_API em_tensor *em_init_xavier_uniform(em_shape s, double gain, em_dtype dt, em_device dev);
EM_API em_tensor *em_init_xavier_normal(em_shape s, double gain, em_dtype dt, em_device dev);
EM_API em_tensor *em_init_orthogonal(em_shape s, double gain, em_dtype dt, em_device dev);

/* ---- containers and simple layers -------------------------------------------------------- */

/* Sequential: children "0", "1", ... run in order. em_sequential(dev, m1, m2, ...) takes the
 * modules listed (no end marker; the macro counts them), em_sequential_of an array of n. It owns
 * every one it is given: when one is NULL (its constructor failed) it frees all the others and
 * returns NULL with the constructor's error (or "module i of n is NULL" when no error is pending).
 */
EM_API em_module *em_sequential_of(em_device dev, em_module *const *mods, int n);
#ifndef __cplusplus
#define em_sequential(dev, ...)                                                                    \
    em_sequential_of((dev), (em_module *[]){__VA_ARGS__},                                          \
                     (int)(sizeof((em_module *[]){__VA_ARGS__}) / sizeof(em_module *)))
#else
} /* extern "C" */
/* C++ has no compound literals: a variadic template gathers the modules. */
template <typename... M> inline em_module *em_sequential_cxx(em_device dev, M... mods)
{
    em_module *list[] = {mods...};
    return em_sequential_of(dev, list, (int)sizeof...(M));
}
extern "C" {
#define em_sequential(dev, ...) em_sequential_cxx((dev), __VA_ARGS__)
#endif
EM_API em_module *em_sequential_new(em_device dev);
EM_API em_module *em_sequential_push(em_module *seq, em_module *m);
EM_API em_module *em_identity_new(void);

typedef struct em_linear_cfg {
    bool no_bias;
} em_linear_cfg;
/* y = x W^T + b, W [out, in] (PyTorch layout), Kaiming-uniform(a=sqrt 5) init like PyTorch. */
EM_API em_module *em_linear_new(int64_t in, int64_t out, em_device dev);
EM_API em_module *em_linear_new_cfg(int64_t in, int64_t out, em_linear_cfg cfg, em_device dev);

/* Activations as modules (parameters as in the functional ops). */
EM_API em_module *em_relu_new(void);
EM_API em_module *em_gelu_new(void);
EM_API em_module *em_tanh_new(void);
EM_API em_module *em_sigmoid_new(void);
EM_API em_module *em_silu_new(void);
EM_API em_module *em_leaky_relu_new(double slope);
EM_API em_module *em_softmax_new(int dim);
EM_API em_module *em_flatten_new(int start_dim, int end_dim);
EM_API em_module *em_dropout_new(double p);

/* Further layers and the losses live in their own headers, included here. */
#ifdef __cplusplus
}
#endif

#include "nn_layers.h"
#include "nn_loss.h"
#include "nn_seq.h"

#endif
