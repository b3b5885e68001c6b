/* cairn/status.h — status codes shared by every cairn call.
 *
 * Every fallible function returns a cairn_status: CAIRN_OK (0) or a negative
 * code. The code says what kind of failure; cairn_errmsg() says which file,
 * variable, shape or offset was at fault, e.g.
 *   "dense_forward: X is (32, 784) but W is (512, 10): X.cols != W.rows".
 * The detail is per thread: it describes the last failed call made by the
 * calling thread and stays valid until that thread's next failing call. It
 * holds up to 16383 bytes, the size of every message buffer in cairn
 * (the handles' cairn_session_errmsg() and the like too); longer details
 * end with "...".
 */
#ifndef CAIRN_STATUS_H
#define CAIRN_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CAIRN_BUILDING) && defined(__GNUC__)
#define CAIRN_API __attribute__((visibility("default")))
#else
#define CAIRN_API
#endif

#if defined(__GNUC__)
#define CAIRN_NODISCARD __attribute__((warn_unused_result))
#else
#define CAIRN_NODISCARD
#endif

/* Marks a function kept for one release under its old name
 * (doc/deprecated.md): calling it warns with msg, which names the
 * replacement. The old function is a real exported function, so programs
 * and libraries built against the older header still link. */
#if defined(__GNUC__)
#define CAIRN_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define CAIRN_DEPRECATED(msg)
#endif

/* X(name, value, message): the one list of codes; the enum and
 * cairn_status_str() are both generated from it. */
#define CAIRN_STATUS_LIST(X)                                                   \
  X(CAIRN_OK, 0, "success")                                                    \
  X(CAIRN_E_INVALID, -1, "invalid argument")                                   \
  X(CAIRN_E_NULL, -2, "required pointer is NULL")                              \
  X(CAIRN_E_SHAPE, -3, "shape mismatch")                                       \
  X(CAIRN_E_DTYPE, -4, "dtype mismatch")                                       \
  X(CAIRN_E_NOMEM, -5, "out of memory")                                        \
  X(CAIRN_E_NOT_FOUND, -6, "not found")                                        \
  X(CAIRN_E_EXISTS, -7, "already exists")                                      \
  X(CAIRN_E_UNINITIALIZED, -8, "variable not initialized")                     \
  X(CAIRN_E_OUT_OF_RANGE, -9, "end of data (out of range)")                    \
  X(CAIRN_E_IO, -10, "I/O error")                                              \
  X(CAIRN_E_NOSPC, -11, "no space left on device")                             \
  X(CAIRN_E_FORMAT, -12, "malformed or unsupported file")                      \
  X(CAIRN_E_CORRUPT, -13, "data is corrupt")                                   \
  X(CAIRN_E_TRUNCATED, -14, "file is truncated (incomplete)")                  \
  X(CAIRN_E_LIMIT, -15, "size exceeds a configured limit")                     \
  X(CAIRN_E_UNSUPPORTED, -16, "not supported by this build or version")       \
  X(CAIRN_E_STATE, -17, "call not valid in the object's current state")       \
  X(CAIRN_E_ABORTED, -18, "aborted (recoverable: retry on a new session)")     \
  X(CAIRN_E_UNAVAILABLE, -19, "unavailable (recoverable: retry on a new session)") \
  X(CAIRN_E_DEADLINE, -20, "deadline exceeded")                                \
  X(CAIRN_E_NOT_READY, -21, "model not ready (initialization incomplete)")     \
  X(CAIRN_E_STOP, -22, "stop requested")                                       \
  X(CAIRN_E_NAN_LOSS, -23, "NaN loss during training")                         \
  X(CAIRN_E_CANCELLED, -24, "cancelled")                                       \
  X(CAIRN_E_BUSY, -25, "in use by another process")

typedef enum cairn_status {
#define CAIRN_STATUS_ENUM_(name, value, msg) name = value,
  CAIRN_STATUS_LIST(CAIRN_STATUS_ENUM_)
#undef CAIRN_STATUS_ENUM_
} cairn_status;

/* Static text for a code ("shape mismatch"); never NULL. */
CAIRN_API const char *cairn_status_str(cairn_status s);

/* Detail of the calling thread's last failure; "" if none. Never NULL. */
CAIRN_API const char *cairn_errmsg(void);

#ifdef __cplusplus
}
#endif
#endif
