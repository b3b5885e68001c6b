/* cairn/status.h: codes, their messages, and the per-thread error detail. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cairn/status.h"
#include "cairn/tensor.h"
#include "internal.h"

TestSuite(status, .timeout = 60);

#define CODE_(name, value, msg) name,
static const cairn_status codes[] = {CAIRN_STATUS_LIST(CODE_)};
#undef CODE_
#define NAME_(name, value, msg) #name,
static const char *const code_names[] = {CAIRN_STATUS_LIST(NAME_)};
#undef NAME_
#define NCODES (sizeof codes / sizeof codes[0])

Test(status, ok_is_zero_and_errors_negative) {
  cr_assert_eq(CAIRN_OK, 0);
  cr_assert_eq(codes[0], CAIRN_OK);
  for (size_t i = 1; i < NCODES; i++) cr_assert_lt((int)codes[i], 0, "%s", code_names[i]);
}

Test(status, every_code_has_a_distinct_message) {
  cr_assert_geq(NCODES, 18u);
  for (size_t i = 0; i < NCODES; i++) {
    const char *m = cairn_status_str(codes[i]);
    cr_assert_not_null(m, "%s", code_names[i]);
    cr_assert_gt(strlen(m), 0u, "%s", code_names[i]);
    cr_assert_str_neq(m, "unknown status", "%s", code_names[i]);
    for (size_t j = 0; j < i; j++) {
      cr_assert_neq(codes[i], codes[j], "%s and %s share a value", code_names[i], code_names[j]);
      cr_assert_str_neq(m, cairn_status_str(codes[j]), "%s and %s share a message", code_names[i], code_names[j]);
    }
  }
  cr_assert_str_eq(cairn_status_str(CAIRN_OK), "success");
  cr_assert_str_eq(cairn_status_str(CAIRN_E_SHAPE), "shape mismatch");
  /* CORRUPT covers more than a failed checksum (a Snappy block that does
   * not decode, a bool byte of 7 under a valid CRC): its short text must not
   * claim one; the message names the real reason. */
  cr_assert_str_eq(cairn_status_str(CAIRN_E_CORRUPT), "data is corrupt");
}

Test(status, unknown_code_has_a_message) {
  cr_assert_str_eq(cairn_status_str((cairn_status)-1000), "unknown status");
  cr_assert_str_eq(cairn_status_str((cairn_status)7), "unknown status");
}

Test(status, errmsg_is_set_by_a_failing_call) {
  cr_assert_not_null(cairn_errmsg());
  int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  cairn_tensor *t = NULL;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 9, shape, &t), CAIRN_E_INVALID);
  cr_assert_null(t);
  cr_assert_not_null(strstr(cairn_errmsg(), "rank 9"), "message: %s", cairn_errmsg());
  /* A successful call leaves the last failure's detail in place. */
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 1, shape, &t), CAIRN_OK);
  cairn_tensor_free(t);
  cr_assert_not_null(strstr(cairn_errmsg(), "rank 9"), "message: %s", cairn_errmsg());
  /* The next failure replaces it. */
  shape[0] = -3;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 1, shape, &t), CAIRN_E_INVALID);
  cr_assert_not_null(strstr(cairn_errmsg(), "negative (-3)"), "message: %s", cairn_errmsg());
  cr_assert_null(strstr(cairn_errmsg(), "rank 9"));
}

struct thread_result {
  char before[64];
  char after[512];
};

static void *fail_in_thread(void *arg) {
  struct thread_result *res = arg;
  /* A new thread starts with an empty detail, whatever other threads did. */
  snprintf(res->before, sizeof res->before, "%s", cairn_errmsg());
  int64_t shape[1] = {-7};
  cairn_tensor *t;
  if (cairn_tensor_new(CAIRN_DTYPE_F64, 1, shape, &t) == CAIRN_OK) cairn_tensor_free(t);
  snprintf(res->after, sizeof res->after, "%s", cairn_errmsg());
  return NULL;
}

Test(status, errmsg_is_per_thread) {
  cairn_tensor *t;
  cr_assert_eq(cairn_tensor_new((cairn_dtype)99, 0, NULL, &t), CAIRN_E_INVALID);
  char mine[512];
  snprintf(mine, sizeof mine, "%s", cairn_errmsg());
  cr_assert_not_null(strstr(mine, "unknown dtype 99"), "message: %s", mine);

  pthread_t th;
  struct thread_result res;
  cr_assert_eq(pthread_create(&th, NULL, fail_in_thread, &res), 0);
  cr_assert_eq(pthread_join(th, NULL), 0);
  cr_assert_str_eq(res.before, "");
  cr_assert_not_null(strstr(res.after, "negative (-7)"), "thread message: %s", res.after);
  /* The other thread's failure did not touch this thread's detail. */
  cr_assert_str_eq(cairn_errmsg(), mine);
}

/* cairn__fail_wrap gives the text cairn__fail gives for "<prefix>%s" with a
 * copy of the current message, the message being its own source: whole
 * when it fits, cut the same way ("...") when prefix + detail do not, and
 * a prefix alone longer than a message is cut the same way too. */
Test(status, fail_wrap_appends_the_current_message) {
  static char inner[CAIRN__ERRMSG_LEN], want[CAIRN__ERRMSG_LEN];
  cairn__fail(CAIRN_E_IO, "open 'x': No such file");
  cr_assert_eq(cairn__fail_wrap(CAIRN_E_IO, "restore '%s': ", "ckpt-1"), CAIRN_E_IO);
  cr_assert_str_eq(cairn_errmsg(), "restore 'ckpt-1': open 'x': No such file");

  cairn__clear_error();
  cairn__fail_wrap(CAIRN_E_STATE, "prefix %d", 7);
  cr_assert_str_eq(cairn_errmsg(), "prefix 7");

  const size_t sizes[] = {CAIRN__ERRMSG_LEN - 30, CAIRN__ERRMSG_LEN - 20, CAIRN__ERRMSG_LEN - 19,
                          CAIRN__ERRMSG_LEN - 18, CAIRN__ERRMSG_LEN - 1};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    memset(inner, 'a' + (int)i, sizes[i]);
    inner[sizes[i]] = '\0';
    cairn__fail(CAIRN_E_IO, "%s", inner);
    snprintf(inner, sizeof inner, "%s", cairn_errmsg());
    cairn__fail(CAIRN_E_IO, "save '%s': %s", "0123456789", inner);
    snprintf(want, sizeof want, "%s", cairn_errmsg());
    cairn__fail(CAIRN_E_IO, "%s", inner);
    cairn__fail_wrap(CAIRN_E_IO, "save '%s': ", "0123456789");
    cr_assert_str_eq(cairn_errmsg(), want, "inner of %zu bytes", sizes[i]);
    cr_assert_eq(strlen(cairn_errmsg()), strlen(want));
  }
  memset(inner, 'p', CAIRN__ERRMSG_LEN + 0 - 1);
  inner[CAIRN__ERRMSG_LEN - 1] = '\0';
  cairn__fail(CAIRN_E_IO, "detail");
  cairn__fail_wrap(CAIRN_E_IO, "%s", inner);
  cr_assert_eq(strlen(cairn_errmsg()), CAIRN__ERRMSG_LEN - 1);
  cr_assert_str_eq(cairn_errmsg() + CAIRN__ERRMSG_LEN - 4, "...");
}

/* A copy taken before a wrap stays what it was. */
Test(status, errmsg_copy_survives_a_wrap) {
  cairn__fail(CAIRN_E_IO, "first");
  const char *c = cairn__errmsg_copy();
  cairn__fail_wrap(CAIRN_E_IO, "second: ");
  cr_assert_str_eq(c, "first");
  cr_assert_str_eq(cairn_errmsg(), "second: first");
}
