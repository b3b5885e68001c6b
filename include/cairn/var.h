/* cairn/var.h — variables, collections, initializers and the registry.
 *
 * A registry is the model's variable store (TF's graph collections). Each
 * variable has a TF-style name ("dense/kernel", "dense/bias",
 * "global_step"), a tensor it owns, an initializer, an "initialized" flag and
 * a set of collections:
 *   GLOBAL     saved in checkpoints, initialized by the chief (TF's
 *              tf.global_variables());
 *   LOCAL      per-process, not saved (tf.local_variables());
 *   TRAINABLE  updated by optimizers (tf.trainable_variables()).
 * A trainable model weight is GLOBAL|TRAINABLE (CAIRN_COLL_MODEL); an
 * optimizer slot is GLOBAL only; a metric accumulator is LOCAL.
 *
 * Random initializers are counter-based: element i of variable `name` gets
 * philox(counter = (i low, i high, attempt, kind), key = seed ^ hash(name)),
 * so values depend only on the registry seed, the name, the shape and the
 * initializer — not on the thread count or on the order in which variables
 * were created.
 *
 * Threads: create variables from one thread, before sessions start (the
 * Scaffold then finalizes the registry). After that, the initialized flags
 * are atomic (a thread that sees a variable's flag set also sees the
 * values its initializer or restore wrote before setting it), and the
 * finalized state and the collections below are locked, so sessions on one
 * registry may run from several threads (a chief initializing while
 * workers wait for the model to be ready, cairn/session.h). Writing one
 * variable from two threads at once is still a data race.
 * Variable pointers stay valid until cairn_registry_free().
 */
#ifndef CAIRN_VAR_H
#define CAIRN_VAR_H

#include <stddef.h>
#include <stdint.h>

#include "cairn/names.h"
#include "cairn/status.h"
#include "cairn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cairn_collection {
  CAIRN_COLL_GLOBAL = 1u << 0,
  CAIRN_COLL_LOCAL = 1u << 1,
  CAIRN_COLL_TRAINABLE = 1u << 2,
  CAIRN_COLL_MODEL = CAIRN_COLL_GLOBAL | CAIRN_COLL_TRAINABLE,
  CAIRN_COLL_ALL = 0x7
} cairn_collection;

typedef enum cairn_init_kind {
  CAIRN_INIT_ZEROS = 0,
  CAIRN_INIT_ONES,
  CAIRN_INIT_CONSTANT,          /* a */
  CAIRN_INIT_UNIFORM,           /* [a, b) */
  CAIRN_INIT_NORMAL,            /* mean a, stddev b */
  CAIRN_INIT_TRUNCATED_NORMAL,  /* mean a, stddev b, redrawn outside a ± 2b (TF) */
  CAIRN_INIT_GLOROT_UNIFORM,    /* U(-l, l), l = sqrt(6 / (fan_in + fan_out)) (TF's dense default) */
  CAIRN_INIT_HE_NORMAL          /* truncated normal, stddev sqrt(2 / fan_in) / 0.87962566 (TF ≥ 1.13) */
} cairn_init_kind;

/* Fans follow TF's VarianceScaling: for shape (..., in, out) the receptive
 * field r is the product of the leading dimensions, fan_in = in·r,
 * fan_out = out·r; a vector (n) has fan_in = fan_out = n; a scalar 1. */
typedef struct cairn_init {
  cairn_init_kind kind;
  double a, b;
} cairn_init;

static inline cairn_init cairn_init_zeros(void) { cairn_init i = {CAIRN_INIT_ZEROS, 0, 0}; return i; }
static inline cairn_init cairn_init_ones(void) { cairn_init i = {CAIRN_INIT_ONES, 0, 0}; return i; }
static inline cairn_init cairn_init_constant(double v) { cairn_init i = {CAIRN_INIT_CONSTANT, v, 0}; return i; }
static inline cairn_init cairn_init_uniform(double lo, double hi) { cairn_init i = {CAIRN_INIT_UNIFORM, lo, hi}; return i; }
static inline cairn_init cairn_init_normal(double mean, double stddev) { cairn_init i = {CAIRN_INIT_NORMAL, mean, stddev}; return i; }
static inline cairn_init cairn_init_truncated_normal(double mean, double stddev) { cairn_init i = {CAIRN_INIT_TRUNCATED_NORMAL, mean, stddev}; return i; }
static inline cairn_init cairn_init_glorot_uniform(void) { cairn_init i = {CAIRN_INIT_GLOROT_UNIFORM, 0, 0}; return i; }
static inline cairn_init cairn_init_he_normal(void) { cairn_init i = {CAIRN_INIT_HE_NORMAL, 0, 0}; return i; }

/* Fills an existing tensor as `init` would a variable named `name` in a
 * registry seeded with `seed` (name NULL is treated as ""). f32 and f64 take
 * every kind; f16, bf16 and the integer dtypes take ZEROS, ONES and
 * CONSTANT; bool takes ZEROS, ONES and CONSTANT 0 or 1. A constant must be
 * finite and fit the dtype (integers exactly: 2.5 is refused for i32, as TF
 * refuses it). Errors: CAIRN_E_INVALID (bad parameters: stddev < 0, hi < lo,
 * a non-finite value, unknown kind), CAIRN_E_DTYPE (a random kind on a
 * non-float dtype), CAIRN_E_NULL. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_init_fill(cairn_tensor *t, cairn_init init, uint64_t seed,
                                                    const char *name);

typedef struct cairn_registry cairn_registry;
typedef struct cairn_var cairn_var;

/* A registry whose random initializers are keyed by `seed`. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_registry_new(uint64_t seed, cairn_registry **out);
CAIRN_API void cairn_registry_free(cairn_registry *r);
CAIRN_API uint64_t cairn_registry_seed(const cairn_registry *r);

/* Finalizing (TF's Graph.finalize) freezes the set of variables and
 * collections: cairn_var_new and cairn_registry_collection_add then fail
 * with CAIRN_E_STATE "Graph is finalized and cannot be modified.".
 * cairn_scaffold_finalize() does it; a MonitoredSession undoes it on close
 * when it found the registry unfinalized (TF's _unsafe_unfinalize). */
CAIRN_API void cairn_registry_finalize(cairn_registry *r);
CAIRN_API void cairn_registry_unfinalize(cairn_registry *r);
CAIRN_API int cairn_registry_is_finalized(const cairn_registry *r);

/* Graph collections of arbitrary items (TF's tf.add_to_collection), by key
 * (1..255 bytes): cairn/session.h keeps the Scaffold's ops and savers here
 * ("init_op", "savers", ...). The registry owns what it is given:
 * free_item(item) is called by cairn_registry_free (before the variables
 * are freed); free_item may be NULL.
 * Errors: CAIRN_E_NULL (r, key or item), CAIRN_E_INVALID (bad key),
 * CAIRN_E_STATE (finalized; free_item is not called: the caller keeps the
 * item), CAIRN_E_NOMEM (likewise). */
typedef void (*cairn_item_free_fn)(void *item);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_registry_collection_add(cairn_registry *r, const char *key,
                                                                  void *item, cairn_item_free_fn free_item);
/* The items of collection key in insertion order: writes at most cap to out
 * and returns the total (0 for an unknown key). Borrowed. */
CAIRN_API size_t cairn_registry_collection_get(const cairn_registry *r, const char *key, void **out, size_t cap);

/* Creates an uninitialized variable (storage is allocated and zeroed, the
 * initializer runs in cairn_var_initialize()). Names: 1..255 bytes of
 * [A-Za-z0-9_.-/], not starting or ending with '/', no "//". The
 * initializer is checked against dt here, as cairn_init_fill() would.
 * Errors: CAIRN_E_STATE (the registry is finalized), CAIRN_E_EXISTS (name
 * taken), CAIRN_E_INVALID (bad name, empty
 * collection mask, both GLOBAL and LOCAL, unknown collection bits, bad
 * shape or dtype, bad initializer parameters), CAIRN_E_DTYPE (initializer
 * not valid for dt), CAIRN_E_LIMIT (size overflows), CAIRN_E_NULL,
 * CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_var_new(cairn_registry *r, const char *name,
                                                  cairn_dtype dt, int rank, const int64_t *shape,
                                                  cairn_init init, unsigned collections,
                                                  cairn_var **out);
/* Deprecated (doc/deprecated.md): the name of cairn 0.1 for cairn_var_new,
 * which it calls (its messages say "var_new"). Removed in the next
 * release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_var_new") cairn_status
cairn_var_create(cairn_registry *r, const char *name, cairn_dtype dt, int rank, const int64_t *shape,
                 cairn_init init, unsigned collections, cairn_var **out);

/* TF's get_or_create_global_step: the int64 scalar "global_step", GLOBAL
 * and not trainable, with a zeros initializer (like every new variable it is
 * uninitialized until initialized). Returns the existing one if present;
 * CAIRN_E_DTYPE/CAIRN_E_SHAPE if a variable of that name is not an int64
 * scalar; CAIRN_E_STATE if it does not exist and the registry is finalized. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_registry_global_step(cairn_registry *r, cairn_var **out);

/* Finds a variable by exact name; CAIRN_E_NOT_FOUND names the missing one. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_registry_find(const cairn_registry *r, const char *name,
                                                        cairn_var **out);

/* Number of variables in any of the collections of `mask`. */
CAIRN_API size_t cairn_registry_count(const cairn_registry *r, unsigned mask);
/* The variables in any collection of `mask`, in creation order: writes at
 * most `cap` pointers to out and returns the total count (call with out
 * NULL, cap 0 to size the array). */
CAIRN_API size_t cairn_registry_list(const cairn_registry *r, unsigned mask, cairn_var **out, size_t cap);
/* The same, keeping the variables whose name matches some include glob (or
 * n_include is 0) and no exclude glob: fnmatch(3) patterns, flags 0, so '*'
 * also matches '/' ("dense/?*" matches "dense/kernel" and its optimizer
 * slot "dense/kernel/Adam" alike). TF users write this list as a comprehension
 * over tf.global_variables(); it is the var_list of a Saver
 * (cairn_saver_new_list) or of a restore op (cairn_op_new_restore). NULL
 * patterns are skipped. A pattern that matches no variable of mask is
 * logged as a WARNING (stderr): use cairn_registry_list_vars_checked to
 * fail for a misspelled include pattern. */
CAIRN_API size_t cairn_registry_list_vars(const cairn_registry *r, unsigned mask, const char *const *include,
                                          size_t n_include, const char *const *exclude, size_t n_exclude,
                                          cairn_var **out, size_t cap);
/* cairn_registry_list_vars that says which patterns matched nothing: a
 * misspelled include pattern ("dense/kernal") would leave its variables out
 * of the list, and a restore of the list would then succeed with that
 * layer still random. *count receives the total (as the return value of
 * cairn_registry_list_vars) and out[0..cap) the variables, in every case;
 * unmatched (may be NULL; cleared first) receives each include pattern,
 * then each exclude pattern, that matches no variable of mask.
 * An include pattern that matches nothing fails the call with
 * CAIRN_E_NOT_FOUND, the message naming each such pattern and the closest
 * variable names, e.g.
 *   registry_list_vars_checked: 1 of 2 include patterns matches no
 *   variable in the collections 0x1, ...: 'dense/kernal' (did you mean
 *   'dense/kernel'?)
 * An exclude pattern that matches nothing is legal (a generic pattern such
 * as one naming every optimizer slot may be shared between models) and
 * is logged as a WARNING naming it on the default log sink (stderr). (The
 * unchecked cairn_registry_list_vars logs the same WARNINGs for both kinds,
 * and still returns the count.)
 * Errors: CAIRN_E_NOT_FOUND (above), CAIRN_E_NULL (r, count, a pattern
 * array or entry), CAIRN_E_NOMEM (unmatched could not grow). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_registry_list_vars_checked(const cairn_registry *r, unsigned mask,
                                                                        const char *const *include, size_t n_include,
                                                                        const char *const *exclude, size_t n_exclude,
                                                                        cairn_var **out, size_t cap, size_t *count,
                                                                        cairn_names *unmatched);

/* TF's report_uninitialized_variables(var_list): writes to `out` the
 * variables among vars[0..n) that are not initialized, in the order given
 * (NULL entries skipped), and returns how many. vars == NULL means every
 * GLOBAL and LOCAL variable of r in creation order; n is then the capacity
 * of out, and the return value (the total) may exceed it. out may be NULL
 * to count only. */
CAIRN_API size_t cairn_registry_report_uninitialized(const cairn_registry *r, cairn_var *const *vars,
                                                     size_t n, cairn_var **out);
/* Same, as text for error messages: "a, b, c" in buf (capacity len bytes,
 * NUL included); when it does not fit, cut after the last whole name that
 * does, followed by ", ..." ("..." alone if none fits).
 * Returns the count, as cairn_registry_report_uninitialized(). */
CAIRN_API size_t cairn_registry_uninitialized_str(const cairn_registry *r, cairn_var *const *vars,
                                                  size_t n, char *buf, size_t len);

/* Runs the initializers of vars[0..n) (variables of r) and marks them
 * initialized (TF's variables_initializer). Stops at the first error:
 * CAIRN_E_NULL, CAIRN_E_INVALID (a variable of another registry). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_registry_initialize(cairn_registry *r, cairn_var *const *vars,
                                                              size_t n);
/* Initializes every variable in any collection of `mask`. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_registry_initialize_collection(cairn_registry *r,
                                                                         unsigned mask);

CAIRN_API const char *cairn_var_name(const cairn_var *v);
CAIRN_API cairn_tensor *cairn_var_tensor(const cairn_var *v);
CAIRN_API unsigned cairn_var_collections(const cairn_var *v);
CAIRN_API cairn_init cairn_var_initializer(const cairn_var *v);
CAIRN_API int cairn_var_is_initialized(const cairn_var *v);
/* Sets the flag without touching the values (a restore that wrote them).
 * Call it (with 1) after writing a variable's values through
 * cairn_var_tensor() yourself: it also tells copies derived from the
 * values, such as a bf16 model's bf16 weights (cairn/model.h), to be made
 * again. */
CAIRN_API void cairn_var_set_initialized(cairn_var *v, int initialized);
/* Runs v's initializer and marks it initialized. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_var_initialize(cairn_var *v);

#ifdef __cplusplus
}
#endif
#endif
