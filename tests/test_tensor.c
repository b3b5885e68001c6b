/* cairn/tensor.h: allocation, validation, views, set_rows, copy, helpers. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "cairn/tensor.h"

TestSuite(tensor, .timeout = 60);

#define ASSERT_MSG_HAS(needle) \
  cr_assert_not_null(strstr(cairn_errmsg(), needle), "message '%s' lacks '%s'", cairn_errmsg(), needle)

Test(tensor, dtype_sizes_and_names) {
  cr_assert_eq(cairn_dtype_size(CAIRN_DTYPE_F32), 4u);
  cr_assert_eq(cairn_dtype_size(CAIRN_DTYPE_F64), 8u);
  cr_assert_eq(cairn_dtype_size(CAIRN_DTYPE_F16), 2u);
  cr_assert_eq(cairn_dtype_size(CAIRN_DTYPE_BF16), 2u);
  cr_assert_eq(cairn_dtype_size(CAIRN_DTYPE_I8), 1u);
  cr_assert_eq(cairn_dtype_size(CAIRN_DTYPE_I64), 8u);
  cr_assert_eq(cairn_dtype_size(CAIRN_DTYPE_U16), 2u);
  cr_assert_eq(cairn_dtype_size(CAIRN_DTYPE_BOOL), 1u);
  cr_assert_eq(cairn_dtype_size((cairn_dtype)0), 0u);
  cr_assert_eq(cairn_dtype_size((cairn_dtype)14), 0u);
  cr_assert_str_eq(cairn_dtype_name(CAIRN_DTYPE_F32), "f32");
  cr_assert_str_eq(cairn_dtype_name(CAIRN_DTYPE_I64), "i64");
  cr_assert_str_eq(cairn_dtype_name(CAIRN_DTYPE_BOOL), "bool");
  cr_assert_str_eq(cairn_dtype_name((cairn_dtype)99), "?");
  cr_assert_str_eq(cairn_dtype_name((cairn_dtype)-1), "?");
}

Test(tensor, new_is_zeroed_aligned_and_owned) {
  int64_t shape[2] = {3, 5};
  cairn_tensor *t = NULL;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 2, shape, &t), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_not_null(t);
  cr_assert_eq(t->dtype, CAIRN_DTYPE_F32);
  cr_assert_eq(t->rank, 2);
  cr_assert_eq(t->shape[0], 3);
  cr_assert_eq(t->shape[1], 5);
  for (int i = 2; i < CAIRN_MAX_RANK; i++) cr_assert_eq(t->shape[i], 1, "shape[%d] beyond the rank", i);
  cr_assert_eq(t->size, 15);
  cr_assert_eq(t->capacity, 15);
  cr_assert_eq(t->owns_data, 1);
  cr_assert_eq(cairn_tensor_nbytes(t), 60u);
  cr_assert_eq((uintptr_t)t->data % CAIRN_ALIGNMENT, 0u);
  const float *p = cairn_tensor_f32(t);
  for (int i = 0; i < 15; i++) cr_assert_eq(p[i], 0.0f);
  cairn_tensor_free(t);
  cairn_tensor_free(NULL);
}

Test(tensor, alignment_for_odd_sizes) {
  for (int64_t n = 1; n < 200; n += 13) {
    cairn_tensor *t;
    cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_U8, 1, &n, &t), CAIRN_OK);
    cr_assert_eq((uintptr_t)t->data % 64, 0u, "n = %lld", (long long)n);
    const unsigned char *b = t->data;
    for (int64_t i = 0; i < n; i++) cr_assert_eq(b[i], 0);
    cairn_tensor_free(t);
  }
  void *p = cairn_alloc(100);
  cr_assert_not_null(p);
  cr_assert_eq((uintptr_t)p % 64, 0u);
  cairn_free(p);
  cairn_free(NULL);
}

Test(tensor, ranks_0_to_8) {
  int64_t shape[CAIRN_MAX_RANK] = {2, 2, 2, 2, 2, 2, 2, 2};
  for (int rank = 0; rank <= CAIRN_MAX_RANK; rank++) {
    cairn_tensor *t;
    cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F64, rank, shape, &t), CAIRN_OK, "rank %d: %s", rank,
                 cairn_errmsg());
    cr_assert_eq(t->rank, rank);
    cr_assert_eq(t->size, (int64_t)1 << rank);
    cr_assert_eq(cairn_tensor_nbytes(t), ((size_t)1 << rank) * 8);
    cairn_tensor_free(t);
  }
  /* A scalar needs no shape array. */
  cairn_tensor *s;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_I32, 0, NULL, &s), CAIRN_OK);
  cr_assert_eq(s->size, 1);
  cairn_tensor_free(s);
}

Test(tensor, invalid_shapes_and_dtypes) {
  int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  cairn_tensor *t = (cairn_tensor *)&t; /* must be reset to NULL on failure */
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 9, shape, &t), CAIRN_E_INVALID);
  cr_assert_null(t);
  ASSERT_MSG_HAS("rank 9 is outside 0..8");
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, -1, shape, &t), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("rank -1");

  int64_t neg[3] = {4, -2, 3};
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 3, neg, &t), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("dimension 1 is negative (-2)");

  cr_assert_eq(cairn_tensor_new((cairn_dtype)0, 1, shape, &t), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("unknown dtype 0");
  cr_assert_eq(cairn_tensor_new((cairn_dtype)42, 1, shape, &t), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("unknown dtype 42");

  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 2, NULL, &t), CAIRN_E_NULL);
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 1, shape, NULL), CAIRN_E_NULL);
}

Test(tensor, overflow_is_a_limit) {
  cairn_tensor *t;
  int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 2, huge, &t), CAIRN_E_LIMIT);
  cr_assert_null(t);
  ASSERT_MSG_HAS("overflows");
  int64_t one[1] = {INT64_MAX};
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_U8, 1, one, &t), CAIRN_E_LIMIT);
  /* A zero dimension makes any product fine (size 0). */
  int64_t zero_huge[3] = {(int64_t)1 << 40, 0, (int64_t)1 << 40};
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 3, zero_huge, &t), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(t->size, 0);
  cairn_tensor_free(t);
}

Test(tensor, zero_size_dims) {
  int64_t shape[2] = {0, 784};
  cairn_tensor *t;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 2, shape, &t), CAIRN_OK);
  cr_assert_eq(t->size, 0);
  cr_assert_eq(cairn_tensor_nbytes(t), 0u);
  cr_assert_not_null(t->data, "a zero-size tensor still has a (unique) pointer");
  cr_assert_eq(cairn_tensor_fill(t, 3.0f), CAIRN_OK);
  char b[32];
  cr_assert_str_eq(cairn_tensor_shape_str(t, b, sizeof b), "(0, 784)");
  cairn_tensor_free(t);
}

Test(tensor, view_wraps_caller_memory) {
  float data[12] = {0};
  data[5] = 7.5f;
  int64_t shape[2] = {3, 4};
  cairn_tensor v;
  cr_assert_eq(cairn_tensor_view(&v, data, CAIRN_DTYPE_F32, 2, shape), CAIRN_OK);
  cr_assert_eq(v.data, (void *)data);
  cr_assert_eq(v.owns_data, 0);
  cr_assert_eq(v.size, 12);
  cr_assert_eq(v.capacity, 12);
  cr_assert_eq(cairn_tensor_f32(&v)[5], 7.5f);
  cr_assert_eq(cairn_tensor_fill(&v, 2.0f), CAIRN_OK);
  for (int i = 0; i < 12; i++) cr_assert_eq(data[i], 2.0f);

  cr_assert_eq(cairn_tensor_view(&v, NULL, CAIRN_DTYPE_F32, 2, shape), CAIRN_E_NULL);
  ASSERT_MSG_HAS("data is NULL");
  int64_t empty[1] = {0};
  cr_assert_eq(cairn_tensor_view(&v, NULL, CAIRN_DTYPE_F32, 1, empty), CAIRN_OK);
  cr_assert_eq(cairn_tensor_view(NULL, data, CAIRN_DTYPE_F32, 2, shape), CAIRN_E_NULL);
  int64_t shape9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  cr_assert_eq(cairn_tensor_view(&v, data, CAIRN_DTYPE_F32, 9, shape9), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("tensor_view");
}

Test(tensor, set_rows_within_capacity) {
  int64_t shape[2] = {4, 3};
  cairn_tensor *t;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 2, shape, &t), CAIRN_OK);
  void *data = t->data;
  cr_assert_eq(cairn_tensor_set_rows(t, 2), CAIRN_OK);
  cr_assert_eq(t->shape[0], 2);
  cr_assert_eq(t->shape[1], 3);
  cr_assert_eq(t->size, 6);
  cr_assert_eq(t->capacity, 12);
  cr_assert_eq(t->data, data);
  cr_assert_eq(cairn_tensor_set_rows(t, 0), CAIRN_OK);
  cr_assert_eq(t->size, 0);
  cr_assert_eq(cairn_tensor_set_rows(t, 4), CAIRN_OK, "back to the full batch");
  cr_assert_eq(t->size, 12);

  cr_assert_eq(cairn_tensor_set_rows(t, 5), CAIRN_E_SHAPE);
  ASSERT_MSG_HAS("5 rows of 3 elements exceed the 12 allocated");
  cr_assert_eq(t->shape[0], 4, "a rejected set_rows changes nothing");
  cr_assert_eq(cairn_tensor_set_rows(t, -1), CAIRN_E_INVALID);
  cr_assert_eq(cairn_tensor_set_rows(NULL, 1), CAIRN_E_NULL);
  cairn_tensor_free(t);

  cairn_tensor *s;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 0, NULL, &s), CAIRN_OK);
  cr_assert_eq(cairn_tensor_set_rows(s, 1), CAIRN_E_SHAPE);
  ASSERT_MSG_HAS("scalar");
  cairn_tensor_free(s);
}

Test(tensor, copy_and_its_errors) {
  int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
  cairn_tensor *a, *b, *c, *d;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 2, s23, &a), CAIRN_OK);
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 2, s23, &b), CAIRN_OK);
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 2, s32, &c), CAIRN_OK);
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F64, 2, s23, &d), CAIRN_OK);
  float *pa = cairn_tensor_f32(a);
  for (int i = 0; i < 6; i++) pa[i] = (float)i + 0.25f;
  cr_assert_eq(cairn_tensor_copy(b, a), CAIRN_OK);
  cr_assert_eq(memcmp(a->data, b->data, 24), 0);
  cr_assert_eq(cairn_tensor_copy(a, a), CAIRN_OK, "self-copy is a no-op");
  cr_assert_eq(pa[5], 5.25f);

  cr_assert_eq(cairn_tensor_copy(c, a), CAIRN_E_SHAPE);
  ASSERT_MSG_HAS("dst is (3, 2), src is (2, 3)");
  cr_assert_eq(cairn_tensor_copy(d, a), CAIRN_E_DTYPE);
  ASSERT_MSG_HAS("dst is f64, src is f32");
  cr_assert_eq(cairn_tensor_copy(NULL, a), CAIRN_E_NULL);
  cr_assert_eq(cairn_tensor_copy(a, NULL), CAIRN_E_NULL);
  cairn_tensor_free(a);
  cairn_tensor_free(b);
  cairn_tensor_free(c);
  cairn_tensor_free(d);
}

Test(tensor, shape_helpers) {
  int64_t s[2] = {32, 784}, s2[2] = {32, 785};
  cairn_tensor a, b, sc;
  float dummy;
  cr_assert_eq(cairn_tensor_view(&a, &dummy, CAIRN_DTYPE_F32, 2, s), CAIRN_OK);
  cr_assert_eq(cairn_tensor_view(&b, &dummy, CAIRN_DTYPE_F32, 2, s2), CAIRN_OK);
  cr_assert_eq(cairn_tensor_view(&sc, &dummy, CAIRN_DTYPE_F32, 0, NULL), CAIRN_OK);
  char buf[64];
  cr_assert_str_eq(cairn_tensor_shape_str(&a, buf, sizeof buf), "(32, 784)");
  cr_assert_str_eq(cairn_tensor_shape_str(&sc, buf, sizeof buf), "()");
  cr_assert_str_eq(cairn_tensor_shape_str(NULL, buf, sizeof buf), "(null)");
  /* A short buffer is truncated, never overrun. */
  char small[8];
  memset(small, 'x', sizeof small);
  cairn_tensor_shape_str(&a, small, 4);
  cr_assert_str_eq(small, "(32");
  cr_assert_eq(small[4], 'x');
  cr_assert_null(cairn_tensor_shape_str(&a, NULL, 10));

  cr_assert_eq(cairn_tensor_same_shape(&a, &a), 1);
  cr_assert_eq(cairn_tensor_same_shape(&a, &b), 0);
  cr_assert_eq(cairn_tensor_same_shape(&a, &sc), 0);
  cr_assert_eq(cairn_tensor_same_shape(&a, NULL), 0);
  cr_assert_eq(cairn_tensor_nbytes(NULL), 0u);
}

Test(tensor, typed_accessors) {
  int64_t n = 4;
  cairn_tensor *f, *i32, *i64;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 1, &n, &f), CAIRN_OK);
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_I32, 1, &n, &i32), CAIRN_OK);
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_I64, 1, &n, &i64), CAIRN_OK);
  cr_assert_eq((void *)cairn_tensor_f32(f), f->data);
  cr_assert_eq((void *)cairn_tensor_i32(i32), i32->data);
  cr_assert_eq((void *)cairn_tensor_i64(i64), i64->data);
  cr_assert_null(cairn_tensor_f32(i32));
  cr_assert_null(cairn_tensor_i32(f));
  cr_assert_null(cairn_tensor_i64(i32));
  cr_assert_null(cairn_tensor_f32(NULL));
  cr_assert_null(cairn_tensor_i64(NULL));

  cr_assert_eq(cairn_tensor_fill(f, -1.5f), CAIRN_OK);
  for (int i = 0; i < 4; i++) cr_assert_eq(cairn_tensor_f32(f)[i], -1.5f);
  cr_assert_eq(cairn_tensor_fill(i32, 1.0f), CAIRN_E_DTYPE);
  ASSERT_MSG_HAS("expected f32");
  cr_assert_eq(cairn_tensor_fill(NULL, 1.0f), CAIRN_E_NULL);
  cairn_tensor_free(f);
  cairn_tensor_free(i32);
  cairn_tensor_free(i64);
}
