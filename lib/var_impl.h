/* Private helpers of the variable layer (var.c, var_init.c) for the files
 * built on it: the registry without its error reporting, and initializer
 * checks. Never installed. */
#ifndef CAIRN_VAR_IMPL_H
#define CAIRN_VAR_IMPL_H

#include "tensor_impl.h"

#include "cairn/var.h"

/* The variable named `name`, or NULL — without touching cairn_errmsg()
 * (cairn_registry_find reports a missing name as an error). var.c */
cairn_var *cairn__registry_lookup(const cairn_registry *r, const char *name);
/* The i-th variable in creation order, or NULL past the end. var.c */
cairn_var *cairn__registry_var_at(const cairn_registry *r, size_t i);
/* 1 when name matches some include glob (or n_include is 0) and no exclude
 * glob (fnmatch(3), flags 0). var_list.c */
int cairn__globs_select(const char *name, const char *const *include, size_t n_include, const char *const *exclude,
                        size_t n_exclude);

/* Checks that `init` suits dtype `dt` and its parameters are valid,
 * without generating anything (var_init.c; var.c checks at creation so that
 * initializing later cannot fail). Messages start with "fn: 'name': ". */
cairn_status cairn__init_check(const char *fn, const char *name, cairn_dtype dt, cairn_init init);

/* A counter bumped by every write of v's values from outside the
 * optimizer that goes through the library (cairn_var_initialize,
 * cairn_var_set_initialized: restores, warm starts, MPI broadcasts call
 * it after writing). A bf16 model rebuilds its bf16 copy of a kernel when
 * the counter moved since it made the copy. var.c */
uint64_t cairn__var_generation(const cairn_var *v);

#endif
