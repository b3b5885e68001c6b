#!/bin/sh
# tests/npz-large.sh — ckpt-inspect import of a deflated .npz member larger
# than 1 GiB, run by `make check` (TAP). The member (2^30 + 8 bytes: a .npy
# of 134,217,713 float64 zeros) is written here by /usr/bin/python3's zlib
# at level 9, about 1 MB, as numpy.savez_compressed writes such an array;
# one read of the compressed data then inflates to more than zlib's output
# window of 1 GiB, so zlib is left holding output when the input is used up
# (a reader that takes "no input left" for "cut short" rejects the file).
# Needs about 1.1 GiB of memory (the import holds the array) and 10 MB of
# disk; skipped with the reason when they, or python3, are missing. Takes
# about 10 s. Needs $top_builddir; writes only into a temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
TOOL="$top_builddir/tools/ckpt-inspect"
PY=/usr/bin/python3

tap_tmpdir npz-large

if ! [ -x "$PY" ] || ! "$PY" -c 'import zlib, struct' 2>/dev/null; then
  echo "1..0 # SKIP needs /usr/bin/python3 with zlib to write the archive"
  exit 0
fi
avail_kb=$(df -Pk "$T" | awk 'NR == 2 { print $4 }')
if [ -z "$avail_kb" ] || [ "$avail_kb" -lt 65536 ]; then
  echo "1..0 # SKIP less than 64 MB free in ${TMPDIR:-/tmp} (the test writes about 10 MB)"
  exit 0
fi
mem_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo 2>/dev/null)
if [ -n "$mem_kb" ] && [ "$mem_kb" -lt 2097152 ]; then
  echo "1..0 # SKIP less than 2 GiB of memory available (the import holds a 1 GiB array)"
  exit 0
fi

echo "1..3"
TAP_LINES=15

# One member big.npy, deflated: the header, then segments of 64 MiB of
# zeros each compressed on its own and ended by a full flush (so one
# compressed segment serves them all, and writing takes a second or two,
# not fifteen), the rest ended by the final block. Sizes and CRC-32 are
# the real ones: only the size is unusual.
if "$PY" - "$T/big.npz" >"$T/out" 2>"$T/err" <<'PYEOF'
import struct, sys, zlib
path = sys.argv[1]
count = (1 << 27) - 15
d = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d,), }" % count
d += " " * (128 - 10 - 1 - len(d)) + "\n"
head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode()
usize = len(head) + 8 * count
seg = 64 << 20
zeros = bytes(seg)
def deflate(data, mode):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(mode)
one = deflate(zeros, zlib.Z_FULL_FLUSH)
body, crc, left = [deflate(head, zlib.Z_FULL_FLUSH)], zlib.crc32(head), 8 * count
while left > seg:
    body.append(one)
    crc = zlib.crc32(zeros, crc)
    left -= seg
body.append(deflate(bytes(left), zlib.Z_FINISH))
crc = zlib.crc32(bytes(left), crc)
data = b"".join(body)
assert len(data) <= 1 << 20, len(data)  # one read of the compressed bytes
name = b"big.npy"
lh = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(data), usize, len(name), 0) + name
cd = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc, len(data), usize, len(name),
                 0, 0, 0, 0, 0, 0) + name
end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(cd), len(lh) + len(data), 0)
open(path, "wb").write(lh + data + cd + end)
PYEOF
then
  ok "an .npz with one deflated member of 1073741832 bytes ($(wc -c <"$T/big.npz") bytes compressed)"
else
  not_ok "writing the .npz"
fi
"$TOOL" import "$T/big.npz" "$T/big.ckpt" >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 0 ] && grep -q -F "imported 1 tensor into $T/big.ckpt" "$T/out"; then
  ok "import of the member over 1 GiB: exit 0"
else
  not_ok "import of the member over 1 GiB (exit $rc)"
fi
# The shape, the size and the CRC32C of 1073741704 zero bytes (the
# checkpoint writer's checksum of what the import decoded).
"$TOOL" list "$T/big.ckpt" >"$T/out" 2>"$T/err"
if grep -q -E '^big +f64 +\(134217713,\) +1073741704 +[0-9]+ +[0-9.]+x +b6140fd6 ' "$T/out"; then
  ok "... the tensor: f64 (134217713,), 1073741704 bytes, all zero (crc32c b6140fd6)"
else
  not_ok "... the tensor: f64 (134217713,), 1073741704 bytes, all zero (crc32c b6140fd6)"
fi
exit 0
