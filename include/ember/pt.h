/* Ember's PyTorch reader (the ember-pt library, which needs libzip): torch.save'd .pt/.pth files
 * read by an unpickler that runs no code. Link it with `pkg-config --libs ember-pt` or CMake's
 * Ember::pt. docs/store.md. */
#ifndef EMBER_PT_H
#define EMBER_PT_H

#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Imports the tensors of a torch.save'd state dict (zip format, PyTorch >= 1.6). A restricted
 * unpickler accepts only containers, scalars, strings and torch's tensor/parameter rebuild
 * functions; anything else is refused with EM_ERR_FORMAT naming the opcode or global. When the
 * top-level dict has a "state_dict" or "model" dict, that one is imported. Nested dicts and
 * lists give dotted names ("encoder.layers.0.weight"). Tensors are copied out of the archive,
 * except that expanded (stride-0) dims stay expanded views; work and memory are bounded by
 * budgets proportional to the file's size (docs/store.md, "Resource limits"). */
EM_API em_tensor_dict *em_pt_load(const char *path);
/* The same from a buffer holding the whole archive; `name` names it in errors. */
EM_API em_tensor_dict *em_pt_load_memory(const void *data, size_t size, const char *name);
/* Lists a .pt/.pth file (the pickle is interpreted; storages are sized but not read). */
EM_API em_store_info *em_pt_inspect(const char *path);
/* Adds the PyTorch reader to em_store_load, em_store_inspect and em_module_load, which then
 * read zip archives too (em_store_add_reader; calling it again does nothing). */
EM_API em_status em_pt_register(void);

#ifdef __cplusplus
}
#endif
#endif
