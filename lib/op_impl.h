/* The two op kinds of cairn/session.h (cairn_op, cairn_ready_op) seen from
 * inside: op.c builds them, session.c runs them. Never installed. */
#ifndef CAIRN_OP_IMPL_H
#define CAIRN_OP_IMPL_H

#include "var_impl.h"

#include <stdatomic.h>

#include "cairn/session.h"

/* What an op and a ready op share, first in both structs: the name, the
 * reference count, the user's data and, for the built-in kinds, the
 * variables they initialize or check (not referenced: the registry owns
 * them). */
typedef struct cairn__op_base {
  atomic_int refs;
  char *name;
  int kind; /* cairn__op_kind or cairn__ready_kind */
  void *user;
  cairn_user_free_fn free_user;
  cairn_var **vars;
  size_t n_vars;
} cairn__op_base;

typedef enum cairn__op_kind {
  CAIRN__OP_USER,      /* fn(session, user) */
  CAIRN__OP_INIT_VARS, /* initializes vars */
  CAIRN__OP_GROUP,     /* runs ops in order */
  CAIRN__OP_NOOP
} cairn__op_kind;

typedef enum cairn__ready_kind {
  CAIRN__READY_USER,       /* fn(session, not_ready, user) */
  CAIRN__READY_UNINIT_VARS /* names the vars not initialized */
} cairn__ready_kind;

struct cairn_op {
  cairn__op_base b;
  cairn_op_fn fn;
  cairn_op **ops; /* CAIRN__OP_GROUP, each referenced */
  size_t n_ops;
};

struct cairn_ready_op {
  cairn__op_base b;
  cairn_ready_fn fn;
};

#endif
