/* Initializers: constants, and counter-based random fills.
 *
 * Element i of a variable named `name` in a registry seeded with `seed` is
 * drawn from the Philox block
 *     philox(counter = (i mod 2³², i / 2³², attempt, kind), key = seed ^ fnv1a(name))
 * so a value depends only on (seed, name, shape, init): not on the thread
 * count, the chunking, or the order in which variables are created. One
 * block per element (attempt 0); truncated normals redraw with attempt+1.
 *
 *   uniform      f32: 24 bits, u = k·2⁻²⁴; f64: 53 bits, u = k·2⁻⁵³; in [0, 1)
 *                x = lo + (hi − lo)·u, pulled below hi if rounding reached it
 *   normal       Box–Muller on one block (53-bit u1 ∈ (0, 1], u2 ∈ [0, 1)):
 *                z = √(−2 ln u1)·cos(2π u2), computed in double for f32 too
 *   truncated    z redrawn while |z| > 2, as tf.truncated_normal
 *   glorot       uniform in [−l, l), l = √(3·scale), scale = 1 / max(1, (fan_in + fan_out)/2)
 *                (tf.glorot_uniform_initializer = VarianceScaling(1, fan_avg, uniform))
 *   he_normal    truncated normal, stddev = √(2 / max(1, fan_in)) / 0.87962566103423978
 *                (VarianceScaling(2, fan_in, truncated_normal), TF ≥ 1.13; the
 *                constant is the stddev of a standard normal truncated to ±2)
 */
#include "var_impl.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "cairn/rng.h"
#include "cairn/var.h"

#define TRUNC_STDDEV 0.87962566103423978 /* stddev of N(0, 1) truncated to [-2, 2] */
#define MAX_ATTEMPTS 256u                /* P(256 rejections) = 0.0455^256: never */

static const char *kind_name(cairn_init_kind k) {
  switch (k) {
    case CAIRN_INIT_ZEROS: return "zeros";
    case CAIRN_INIT_ONES: return "ones";
    case CAIRN_INIT_CONSTANT: return "constant";
    case CAIRN_INIT_UNIFORM: return "uniform";
    case CAIRN_INIT_NORMAL: return "normal";
    case CAIRN_INIT_TRUNCATED_NORMAL: return "truncated_normal";
    case CAIRN_INIT_GLOROT_UNIFORM: return "glorot_uniform";
    case CAIRN_INIT_HE_NORMAL: return "he_normal";
  }
  return "?";
}

static int is_random(cairn_init_kind k) { return k >= CAIRN_INIT_UNIFORM && k <= CAIRN_INIT_HE_NORMAL; }

/* ---- constants -------------------------------------------------------------- */

/* x rounded to nearest-even in a binary format with `mb` mantissa and `eb`
 * exponent bits (f16: 10, 5; bf16: 7, 8), directly from double so that
 * there is no double rounding. */
static uint16_t encode_small_float(double x, int mb, int eb) {
  uint16_t sign = signbit(x) ? (uint16_t)(1u << (mb + eb)) : 0;
  int bias = (1 << (eb - 1)) - 1, emin = 1 - bias;
  uint32_t inf = ((1u << eb) - 1) << mb;
  if (isnan(x)) return (uint16_t)(sign | inf | (1u << (mb - 1)));
  double a = fabs(x);
  /* Subnormal: a multiple of 2^(emin - mb); rounding up to 2^emin gives
   * mantissa 1 << mb, which is exactly the encoding of the smallest normal. */
  if (a < ldexp(1.0, emin)) return (uint16_t)(sign | (uint32_t)rint(ldexp(a, mb - emin)));
  int e;
  double f = frexp(a, &e); /* a = f·2^e, f ∈ [0.5, 1) */
  e -= 1;
  if (e > bias) return (uint16_t)(sign | inf);
  /* A mantissa that rounds up to 1 << mb carries into the exponent. */
  uint32_t bits = ((uint32_t)(e + bias) << mb) + (uint32_t)rint((2.0 * f - 1.0) * (double)(1u << mb));
  return (uint16_t)(sign | (bits >= inf ? inf : bits));
}

/* The bit pattern of `v` as one element of dt (in the low bytes). The value
 * has been validated by check_constant. */
static uint64_t encode_constant(cairn_dtype dt, double v) {
  switch (dt) {
    case CAIRN_DTYPE_F32: {
      float f = (float)v;
      uint32_t u;
      memcpy(&u, &f, sizeof u);
      return u;
    }
    case CAIRN_DTYPE_F64: {
      uint64_t u;
      memcpy(&u, &v, sizeof u);
      return u;
    }
    case CAIRN_DTYPE_F16: return encode_small_float(v, 10, 5);
    case CAIRN_DTYPE_BF16: return encode_small_float(v, 7, 8);
    case CAIRN_DTYPE_I8: case CAIRN_DTYPE_I16: case CAIRN_DTYPE_I32: case CAIRN_DTYPE_I64:
      return (uint64_t)(int64_t)v; /* two's complement; the low bytes are the narrow value */
    case CAIRN_DTYPE_U8: case CAIRN_DTYPE_U16: case CAIRN_DTYPE_U32: case CAIRN_DTYPE_U64:
      return (uint64_t)v;
    case CAIRN_DTYPE_BOOL: return v != 0.0;
  }
  return 0;
}

/* Checks that v is exactly representable (integers, bool) or finite after
 * rounding (floats) in dt. */
static cairn_status check_constant(const char *fn, const char *name, cairn_dtype dt, double v) {
  if (!isfinite(v))
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': constant %g is not finite", fn, name, v);
  double lo = 0, hi = 0; /* integer range [lo, hi) as exact doubles */
  switch (dt) {
    case CAIRN_DTYPE_F64: return CAIRN_OK;
    case CAIRN_DTYPE_F32:
      if (fabs(v) > FLT_MAX) break;
      return CAIRN_OK;
    case CAIRN_DTYPE_F16: case CAIRN_DTYPE_BF16: {
      uint16_t b = (uint16_t)encode_constant(dt, v);
      uint16_t inf = dt == CAIRN_DTYPE_F16 ? 0x7c00 : 0x7f80;
      if ((b & inf) == inf) break;
      return CAIRN_OK;
    }
    case CAIRN_DTYPE_BOOL:
      if (v == 0.0 || v == 1.0) return CAIRN_OK;
      return cairn__fail(CAIRN_E_INVALID, "%s: '%s': constant %g for a bool, expected 0 or 1", fn, name, v);
    case CAIRN_DTYPE_I8: lo = -0x1p7; hi = 0x1p7; goto integer;
    case CAIRN_DTYPE_I16: lo = -0x1p15; hi = 0x1p15; goto integer;
    case CAIRN_DTYPE_I32: lo = -0x1p31; hi = 0x1p31; goto integer;
    case CAIRN_DTYPE_I64: lo = -0x1p63; hi = 0x1p63; goto integer;
    case CAIRN_DTYPE_U8: hi = 0x1p8; goto integer;
    case CAIRN_DTYPE_U16: hi = 0x1p16; goto integer;
    case CAIRN_DTYPE_U32: hi = 0x1p32; goto integer;
    case CAIRN_DTYPE_U64: hi = 0x1p64; goto integer;
  }
  return cairn__fail(CAIRN_E_INVALID, "%s: '%s': constant %g does not fit %s", fn, name, v, cairn_dtype_name(dt));
integer:
  /* As TF's constant of an integer dtype: no silent truncation. */
  if (v != trunc(v))
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': constant %g is not an integer, and the dtype is %s", fn, name,
                       v, cairn_dtype_name(dt));
  if (v < lo || v >= hi)
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': constant %g is outside the range of %s", fn, name, v,
                       cairn_dtype_name(dt));
  return CAIRN_OK;
}

/* ---- validation ------------------------------------------------------------- */

cairn_status cairn__init_check(const char *fn, const char *name, cairn_dtype dt, cairn_init init) {
  if (!name) name = "";
  if (cairn_dtype_size(dt) == 0) return cairn__fail(CAIRN_E_INVALID, "%s: '%s': unknown dtype %d", fn, name, (int)dt);
  if ((unsigned)init.kind > (unsigned)CAIRN_INIT_HE_NORMAL)
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': unknown initializer kind %d", fn, name, (int)init.kind);
  const char *k = kind_name(init.kind);
  if (!is_random(init.kind))
    return init.kind == CAIRN_INIT_CONSTANT ? check_constant(fn, name, dt, init.a) : CAIRN_OK;

  if (dt != CAIRN_DTYPE_F32 && dt != CAIRN_DTYPE_F64)
    return cairn__fail(CAIRN_E_DTYPE, "%s: '%s': %s initializer needs f32 or f64, not %s", fn, name, k,
                       cairn_dtype_name(dt));
  double maxv = dt == CAIRN_DTYPE_F32 ? FLT_MAX : DBL_MAX;
  switch (init.kind) {
    case CAIRN_INIT_UNIFORM:
      if (!isfinite(init.a) || !isfinite(init.b))
        return cairn__fail(CAIRN_E_INVALID, "%s: '%s': uniform bounds [%g, %g) are not finite", fn, name, init.a,
                           init.b);
      if (init.b < init.a)
        return cairn__fail(CAIRN_E_INVALID, "%s: '%s': uniform needs lo <= hi, got [%g, %g)", fn, name, init.a,
                           init.b);
      if (fabs(init.a) > maxv || fabs(init.b) > maxv || !(init.b - init.a <= DBL_MAX))
        return cairn__fail(CAIRN_E_INVALID, "%s: '%s': uniform bounds [%g, %g) exceed the %s range", fn, name,
                           init.a, init.b, cairn_dtype_name(dt));
      return CAIRN_OK;
    case CAIRN_INIT_NORMAL: case CAIRN_INIT_TRUNCATED_NORMAL:
      if (!isfinite(init.a) || !isfinite(init.b))
        return cairn__fail(CAIRN_E_INVALID, "%s: '%s': %s mean %g / stddev %g are not finite", fn, name, k, init.a,
                           init.b);
      if (init.b < 0)
        return cairn__fail(CAIRN_E_INVALID, "%s: '%s': %s stddev %g < 0", fn, name, k, init.b);
      /* |z| < 8.6 for 53-bit Box–Muller: keep mean ± 9·stddev finite. */
      if (!(fabs(init.a) + 9.0 * init.b <= maxv))
        return cairn__fail(CAIRN_E_INVALID, "%s: '%s': %s mean %g ± 9·stddev %g exceeds the %s range", fn, name, k,
                           init.a, init.b, cairn_dtype_name(dt));
      return CAIRN_OK;
    default: /* glorot, he: no parameters */
      return CAIRN_OK;
  }
}

/* ---- random fills ----------------------------------------------------------- */

typedef struct fill_ctx {
  void *data;
  int f64;          /* else f32 */
  int truncated;    /* normal: redraw |z| > 2 */
  int uniform;      /* else normal */
  uint32_t key[2];
  uint32_t tag;     /* the init kind: counter word 3 */
  double lo, hi;    /* uniform */
  double mean, sd;  /* normal */
} fill_ctx;

static inline void draw(const fill_ctx *c, uint64_t i, uint32_t attempt, uint32_t out[4]) {
  const uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), attempt, c->tag};
  cairn_philox4x32(ctr, c->key, out);
}

static inline uint64_t bits53(uint32_t hi, uint32_t lo) { return ((uint64_t)hi << 21) | (lo >> 11); }

/* Standard normal for element i (Box–Muller, one block per attempt). */
static inline double std_normal(const fill_ctx *c, uint64_t i) {
  for (uint32_t attempt = 0;; attempt++) {
    uint32_t w[4];
    draw(c, i, attempt, w);
    double u1 = (double)(bits53(w[0], w[1]) + 1) * 0x1p-53; /* (0, 1]: log never sees 0 */
    double u2 = (double)bits53(w[2], w[3]) * 0x1p-53;
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    if (!c->truncated || fabs(z) <= 2.0) return z;
    if (attempt + 1 == MAX_ATTEMPTS) return z > 0 ? 2.0 : -2.0;
  }
}

static void fill_range(void *ctx, size_t lo, size_t hi) {
  const fill_ctx *c = ctx;
  if (c->uniform && !c->f64) {
    float *p = c->data;
    const float flo = (float)c->lo, fhi = (float)c->hi, below = nextafterf(fhi, -INFINITY);
    const double width = c->hi - c->lo;
    for (size_t i = lo; i < hi; i++) {
      uint32_t w[4];
      draw(c, i, 0, w);
      float v = (float)(c->lo + width * ((double)(w[0] >> 8) * 0x1p-24));
      if (v >= fhi && c->hi > c->lo) v = below;
      p[i] = v < flo ? flo : v;
    }
  } else if (c->uniform) {
    double *p = c->data;
    const double below = nextafter(c->hi, -INFINITY), width = c->hi - c->lo;
    for (size_t i = lo; i < hi; i++) {
      uint32_t w[4];
      draw(c, i, 0, w);
      double v = c->lo + width * ((double)bits53(w[0], w[1]) * 0x1p-53);
      if (v >= c->hi && c->hi > c->lo) v = below;
      p[i] = v < c->lo ? c->lo : v;
    }
  } else if (!c->f64) {
    float *p = c->data;
    for (size_t i = lo; i < hi; i++) p[i] = (float)(c->mean + c->sd * std_normal(c, i));
  } else {
    double *p = c->data;
    for (size_t i = lo; i < hi; i++) p[i] = c->mean + c->sd * std_normal(c, i);
  }
}

/* TF's _compute_fans: (..., in, out) with receptive field r = Π leading dims. */
static void compute_fans(const cairn_tensor *t, double *fan_in, double *fan_out) {
  if (t->rank == 0) {
    *fan_in = *fan_out = 1.0;
  } else if (t->rank == 1) {
    *fan_in = *fan_out = (double)t->shape[0];
  } else {
    double r = 1.0;
    for (int i = 0; i < t->rank - 2; i++) r *= (double)t->shape[i];
    *fan_in = (double)t->shape[t->rank - 2] * r;
    *fan_out = (double)t->shape[t->rank - 1] * r;
  }
}

/* ---- constant fills --------------------------------------------------------- */

typedef struct const_ctx {
  void *data;
  size_t esize;
  uint64_t bits;
} const_ctx;

static void const_range(void *ctx, size_t lo, size_t hi) {
  const const_ctx *c = ctx;
  switch (c->esize) {
    case 1: memset((uint8_t *)c->data + lo, (int)(uint8_t)c->bits, hi - lo); break;
    case 2: for (size_t i = lo; i < hi; i++) ((uint16_t *)c->data)[i] = (uint16_t)c->bits; break;
    case 4: for (size_t i = lo; i < hi; i++) ((uint32_t *)c->data)[i] = (uint32_t)c->bits; break;
    default: for (size_t i = lo; i < hi; i++) ((uint64_t *)c->data)[i] = c->bits; break;
  }
}

cairn_status cairn_init_fill(cairn_tensor *t, cairn_init init, uint64_t seed, const char *name) {
  static const char fn[] = "init_fill";
  if (!t) return cairn__fail(CAIRN_E_NULL, "%s: tensor is NULL", fn);
  if (!name) name = "";
  cairn_status s = cairn__init_check(fn, name, t->dtype, init);
  if (s) return s;
  if (t->size == 0) return CAIRN_OK;
  if (!t->data) return cairn__fail(CAIRN_E_NULL, "%s: '%s': tensor has no data", fn, name);
  size_t n = (size_t)t->size;

  if (!is_random(init.kind)) {
    const_ctx c = {t->data, cairn_dtype_size(t->dtype), 0};
    if (init.kind == CAIRN_INIT_ZEROS) {
      memset(t->data, 0, n * c.esize);
      return CAIRN_OK;
    }
    c.bits = encode_constant(t->dtype, init.kind == CAIRN_INIT_ONES ? 1.0 : init.a);
    cairn__par_for(n, const_range, &c);
    return CAIRN_OK;
  }

  uint64_t k = seed ^ cairn_hash_name(name);
  fill_ctx c = {.data = t->data,
                .f64 = t->dtype == CAIRN_DTYPE_F64,
                .key = {(uint32_t)k, (uint32_t)(k >> 32)},
                .tag = (uint32_t)init.kind};
  double fan_in, fan_out;
  compute_fans(t, &fan_in, &fan_out);
  switch (init.kind) {
    case CAIRN_INIT_UNIFORM:
      c.uniform = 1;
      c.lo = init.a;
      c.hi = init.b;
      break;
    case CAIRN_INIT_GLOROT_UNIFORM: {
      double avg = (fan_in + fan_out) / 2.0;
      double limit = sqrt(3.0 / (avg > 1.0 ? avg : 1.0)); /* = √(6 / (fan_in + fan_out)) */
      c.uniform = 1;
      c.lo = -limit;
      c.hi = limit;
      break;
    }
    case CAIRN_INIT_HE_NORMAL:
      c.truncated = 1;
      c.mean = 0.0;
      c.sd = sqrt(2.0 / (fan_in > 1.0 ? fan_in : 1.0)) / TRUNC_STDDEV;
      break;
    default: /* NORMAL, TRUNCATED_NORMAL */
      c.truncated = init.kind == CAIRN_INIT_TRUNCATED_NORMAL;
      c.mean = init.a;
      c.sd = init.b;
      break;
  }
  cairn__par_for(n, fill_range, &c);
  return CAIRN_OK;
}
