/* TensorFlow tensor bundle constants shared by tfbundle_read.c and
 * tfbundle_write.c (never installed). Field numbers are those of
 * tensorflow/core/protobuf/tensor_bundle.proto, tensor_shape.proto,
 * versions.proto and types.proto. */
#ifndef CAIRN_TFBUNDLE_IMPL_H
#define CAIRN_TFBUNDLE_IMPL_H

#include "leveldb_table.h"

/* DataType values (types.proto). */
#define TF_DT_FLOAT 1
#define TF_DT_DOUBLE 2
#define TF_DT_INT32 3
#define TF_DT_UINT8 4
#define TF_DT_INT16 5
#define TF_DT_INT8 6
#define TF_DT_STRING 7
#define TF_DT_INT64 9
#define TF_DT_BOOL 10
#define TF_DT_BFLOAT16 14
#define TF_DT_UINT16 17
#define TF_DT_HALF 19
#define TF_DT_UINT32 22
#define TF_DT_UINT64 23

/* The bundle version this writer produces and the reader accepts
 * (TensorFlow's kTensorBundleVersion and kTensorBundleMinConsumer). */
#define TF_BUNDLE_VERSION 1
#define TF_BUNDLE_MIN_CONSUMER 0
#define TF_MAX_SHARDS 100000u

/* cairn dtype ↔ TF DataType; 0 / CAIRN_DTYPE_INVALID-like 0 when none. */
int cairn__tf_dtype_from_cairn(cairn_dtype dt);
cairn_dtype cairn__tf_dtype_to_cairn(int tf);
/* "prefix.data-%05d-of-%05d" (malloc'd). */
char *cairn__tf_shard_name(const char *prefix, uint32_t shard, uint32_t n);

#endif
