/* cairn/session.h (work in progress: the full catalogue port follows). */
#include <criterion/criterion.h>

#include "cairn/session.h"
#include "cairn/var.h"

TestSuite(session_manager, .timeout = 30);

Test(session_manager, testPrepareSessionSucceeds) {
  cairn_registry *r;
  cr_assert_eq(cairn_registry_new(1, &r), CAIRN_OK);
  int64_t shape[1] = {3};
  cairn_var *v;
  cr_assert_eq(cairn_var_create(r, "v", CAIRN_DTYPE_F32, 1, shape, cairn_init_constant(2), CAIRN_COLL_GLOBAL, &v),
               CAIRN_OK);
  cairn_op *init;
  cairn_ready_op *ready;
  cr_assert_eq(cairn_op_new_init("init", r, CAIRN_COLL_GLOBAL, &init), CAIRN_OK);
  cr_assert_eq(cairn_ready_op_new_uninitialized("ready", r, CAIRN_COLL_GLOBAL | CAIRN_COLL_LOCAL, &ready), CAIRN_OK);
  cairn_session_manager_options so = cairn_session_manager_options_default();
  so.ready_op = ready;
  cairn_session_manager *sm;
  cr_assert_eq(cairn_session_manager_new(r, &so, &sm), CAIRN_OK);
  cairn_prepare_options po = cairn_prepare_options_default();
  po.init_op = init;
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &po, &s), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert(cairn_var_is_initialized(v));
  cr_assert_float_eq(((float *)cairn_var_tensor(v)->data)[2], 2.0f, 0);
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}
