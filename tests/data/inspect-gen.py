# Writes tests/data/inspect-{a,a-deflate,b,c}.npz, the fixtures of tests/ckpt-inspect.sh.
# Run once with numpy (cd tests/data && python3 inspect-gen.py); the outputs are committed.
import numpy as np
a = {
    'dense/kernel': np.array([[0.5, -1.25, 2.0], [3.0, 0.1, -0.2], [1e-3, 7.0, 8.5], [-9.0, 10.0, 0.0]], dtype=np.float32),
    'dense/bias': np.array([0.1, 0.2, 0.3], dtype=np.float32),
    'big': (np.arange(1200, dtype=np.float32) / 8).reshape(40, 30),
    'pi': np.array(np.pi),
    'half': np.array([1.0, -2.5, np.inf, -np.inf, np.nan], dtype=np.float16),
    'ints/i8': np.array([-128, 0, 127], dtype=np.int8),
    'ints/i16': np.array([-32768, 32767], dtype=np.int16),
    'ints/i32': np.array([[-2147483648, 2147483647]], dtype=np.int32),
    'ints/i64': np.array([-9223372036854775808, 9223372036854775807], dtype=np.int64),
    'ints/u8': np.array([0, 255], dtype=np.uint8),
    'ints/u16': np.array([65535], dtype=np.uint16),
    'ints/u32': np.array([4294967295], dtype=np.uint32),
    'ints/u64': np.array([18446744073709551615], dtype=np.uint64),
    'mask': np.array([[True, False], [False, True]]),
    'empty': np.zeros((0, 3), dtype=np.float32),
    'rank8': np.arange(2, dtype=np.float32).reshape(1, 1, 1, 1, 1, 1, 1, 2),
    'zeros': np.zeros(1000, dtype=np.float32),
    'tiny': np.array([1e-5, 2.5, -300.0], dtype=np.float64),
    'bidi\u202eevil': np.array([1.0], dtype=np.float32),
    'fortran': np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)),
    'bigendian': np.array([1, -2, 3], dtype='>i4'),
}
np.savez('inspect-a.npz', **a)
np.savez_compressed('inspect-a-deflate.npz', **a)
# b: every kind of difference from a
b = {k: v for k, v in a.items() if k not in ('zeros',)}            # removed: zeros
b['added'] = np.array([1, 2, 3], dtype=np.int32)                   # added
b['dense/bias'] = a['dense/bias'].astype(np.float64)              # dtype changed
b['mask'] = np.array([True, False, False, True])                   # shape changed
k = a['dense/kernel'].copy(); k[1, 2] = -0.25; k[3, 0] = -9.5      # values changed
b['dense/kernel'] = k
np.savez('inspect-b.npz', **b)
# c: a with small value changes only (within atol 1e-2, rtol 1e-2)
c = dict(a)
k = a['dense/kernel'].copy(); k[0, 0] += np.float32(1e-3)
c['dense/kernel'] = k
big = a['big'].copy(); big[39, 29] *= np.float32(1.001)
c['big'] = big
np.savez('inspect-c.npz', **c)
