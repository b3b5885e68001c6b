/* What the TensorFlow bundle's reader (tfbundle_read.c) and writer
 * (tfbundle_write.c) share: the dtype codes and the data shards' names.
 * Its own file, so that the reader (whose backend table names the
 * writer's functions) and the writer do not depend on each other. */
#define _GNU_SOURCE 1
#include "tfbundle_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  int tf;
  cairn_dtype dt;
} tf_dtypes[] = {
    {TF_DT_FLOAT, CAIRN_DTYPE_F32},   {TF_DT_DOUBLE, CAIRN_DTYPE_F64}, {TF_DT_HALF, CAIRN_DTYPE_F16},
    {TF_DT_BFLOAT16, CAIRN_DTYPE_BF16}, {TF_DT_INT8, CAIRN_DTYPE_I8},   {TF_DT_INT16, CAIRN_DTYPE_I16},
    {TF_DT_INT32, CAIRN_DTYPE_I32},   {TF_DT_INT64, CAIRN_DTYPE_I64},  {TF_DT_UINT8, CAIRN_DTYPE_U8},
    {TF_DT_UINT16, CAIRN_DTYPE_U16},  {TF_DT_UINT32, CAIRN_DTYPE_U32}, {TF_DT_UINT64, CAIRN_DTYPE_U64},
    {TF_DT_BOOL, CAIRN_DTYPE_BOOL},
};

int cairn__tf_dtype_from_cairn(cairn_dtype dt) {
  for (size_t i = 0; i < sizeof tf_dtypes / sizeof tf_dtypes[0]; i++)
    if (tf_dtypes[i].dt == dt) return tf_dtypes[i].tf;
  return 0;
}

cairn_dtype cairn__tf_dtype_to_cairn(int tf) {
  for (size_t i = 0; i < sizeof tf_dtypes / sizeof tf_dtypes[0]; i++)
    if (tf_dtypes[i].tf == tf) return tf_dtypes[i].dt;
  return (cairn_dtype)0;
}

char *cairn__tf_shard_name(const char *prefix, uint32_t shard, uint32_t n) {
  size_t len = strlen(prefix) + 32;
  char *s = malloc(len);
  if (s) snprintf(s, len, "%s.data-%05u-of-%05u", prefix, shard, n);
  return s;
}
