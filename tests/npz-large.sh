#!/bin/sh
# tests/npz-large.sh — ckpt-inspect import of deflated .npz members far
# larger than the file, run by `make check` (TAP). Two archives of zeros
# are written here by /usr/bin/python3's zlib at level 9, as
# numpy.savez_compressed writes such arrays, each member expanding about
# 1000 times:
#   - about 1 MB holding one member of 2^30 + 8 bytes (a .npy of
#     134,217,713 float64 zeros): one read of the compressed data then
#     inflates to more than zlib's output window of 1 GiB, so zlib is left
#     holding output when the input is used up (a reader that takes "no
#     input left" for "cut short" rejects the file);
#   - about 3 MB holding one member of 3 GiB + 128 bytes (402,653,184
#     float64 zeros);
# and one of 100,000 small members (about 25 MB, written with zipfile),
# where the directory is what takes memory.
# Each import must succeed, give a checkpoint that verifies and holds
# zeros (the CRC32C of that many zero bytes), and stay within a peak
# resident set of 4 times the input file plus 64 MiB, as /usr/bin/time -v
# measures it: the members are streamed into the checkpoint, never held
# whole (before they were: 1.06 GB and 3.15 GB). The checkpoints are about
# 4, 13 and 23 MB; at most about 50 MB is on disk at once. Skipped with the
# reason when python3 or 128 MB of disk are missing; the memory checks are
# skipped without /usr/bin/time. Takes about 40 s. Needs $top_builddir;
# writes only into a temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"
PY=/usr/bin/python3
TIME=/usr/bin/time

tap_tmpdir npz-large

if ! [ -x "$PY" ] || ! "$PY" -c 'import zlib, struct' 2>/dev/null; then
  echo "1..0 # SKIP needs /usr/bin/python3 with zlib to write the archive"
  exit 0
fi
avail_kb=$(df -Pk "$T" | awk 'NR == 2 { print $4 }')
if [ -z "$avail_kb" ] || [ "$avail_kb" -lt 131072 ]; then
  echo "1..0 # SKIP less than 128 MB free in ${TMPDIR:-/tmp} (the test writes about 50 MB)"
  exit 0
fi
have_time=0
"$TIME" -v true >/dev/null 2>&1 && have_time=1

echo "1..13"
TAP_LINES=15

# mknpz FILE COUNT: one member big.npy, deflated, holding COUNT float64
# zeros: the header, then segments of 64 MiB of zeros each compressed on
# its own and ended by a full flush (so one compressed segment serves them
# all, and writing takes a second or two, not fifteen), the rest ended by
# the final block. Sizes and CRC-32 are the real ones: only the size is
# unusual.
mknpz() {
  "$PY" - "$1" "$2" >"$T/out" 2>"$T/err" <<'PYEOF'
import struct, sys, zlib
path, count = sys.argv[1], int(sys.argv[2])
d = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d,), }" % count
d += " " * (128 - 10 - 1 - len(d)) + "\n"
head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode()
usize = len(head) + 8 * count
assert usize < 0xFFFFFFFF
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
if usize < 2 << 30:
    assert len(data) <= 1 << 20, len(data)  # one read of the compressed bytes
name = b"big.npy"
lh = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(data), usize, len(name), 0) + name
cd = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc, len(data), usize, len(name),
                 0, 0, 0, 0, 0, 0) + name
end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(cd), len(lh) + len(data), 0)
open(path, "wb").write(lh + data + cd + end)
PYEOF
}

# import_measured NPZ CKPT: the import under /usr/bin/time -v (when there);
# sets rc, and rss_kb to the peak resident set in KiB (empty without it)
import_measured() {
  rss_kb=
  if [ "$have_time" = 1 ]; then
    "$TIME" -v -o "$T/time" "$TOOL" import "$1" "$2" >"$T/out" 2>"$T/err"
    rc=$?
    rss_kb=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): *//p' "$T/time")
  else
    run "$TOOL" import "$1" "$2"
  fi
}

# rss_check NPZ WHAT: the peak against 4 × the file + 64 MiB
rss_check() {
  size_kb=$((($(wc -c <"$1") + 1023) / 1024))
  bound_kb=$((4 * size_kb + 65536))
  if [ "$have_time" != 1 ]; then
    skip "$2: peak RSS within 4 x input + 64 MiB" "no /usr/bin/time"
  elif [ -n "$rss_kb" ] && [ "$rss_kb" -le "$bound_kb" ]; then
    ok "$2: peak RSS $rss_kb KiB <= 4 x $size_kb KiB + 64 MiB = $bound_kb KiB"
  else
    not_ok "$2: peak RSS ${rss_kb:-?} KiB <= 4 x $size_kb KiB + 64 MiB = $bound_kb KiB" "$T/time" "$T/err"
  fi
}

# ---- about 1 MB, one member over 1 GiB ------------------------------------------
if mknpz "$T/big.npz" $(((1 << 27) - 15)); then
  ok "an .npz with one deflated member of 1073741832 bytes ($(wc -c <"$T/big.npz") bytes compressed)"
else
  not_ok "writing the .npz"
fi
import_measured "$T/big.npz" "$T/big.ckpt"
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
rss_check "$T/big.npz" "... of the 1 MB file"
run "$TOOL" verify "$T/big.ckpt"
if [ "$rc" -eq 0 ]; then ok "... and the checkpoint verifies"; else not_ok "... and the checkpoint verifies (exit $rc)"; fi
rm -f "$T/big.ckpt"

# ---- about 3 MB, one member of 3 GiB ---------------------------------------------
if mknpz "$T/big3.npz" $((3 << 27)); then
  ok "an .npz with one deflated member of 3221225600 bytes ($(wc -c <"$T/big3.npz") bytes compressed)"
else
  not_ok "writing the 3 GiB .npz"
fi
import_measured "$T/big3.npz" "$T/big3.ckpt"
if [ "$rc" -eq 0 ] && grep -q -F "imported 1 tensor into $T/big3.ckpt" "$T/out"; then
  ok "import of the 3 GiB member: exit 0"
else
  not_ok "import of the 3 GiB member (exit $rc)"
fi
"$TOOL" list "$T/big3.ckpt" >"$T/out" 2>"$T/err"
if grep -q -E '^big +f64 +\(402653184,\) +3221225472 +[0-9]+ +[0-9.]+x +16177d2f ' "$T/out"; then
  ok "... the tensor: f64 (402653184,), 3221225472 bytes, all zero (crc32c 16177d2f)"
else
  not_ok "... the tensor: f64 (402653184,), 3221225472 bytes, all zero (crc32c 16177d2f)"
fi
rss_check "$T/big3.npz" "... of the 3 MB file"
run "$TOOL" verify "$T/big3.ckpt"
if [ "$rc" -eq 0 ]; then ok "... and the checkpoint verifies"; else not_ok "... and the checkpoint verifies (exit $rc)"; fi
rm -f "$T/big3.ckpt" "$T/big3.npz"

# ---- 100,000 small members: the directory's memory ------------------------------------
# Where the bytes are in the central directory, libzip's entries and the
# checkpoint's index grow with the member count (still within the bound).
if "$PY" -W ignore - "$T/many.npz" >"$T/out" 2>"$T/err" <<'PYEOF'
import struct, sys, zipfile
h = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"
h += " " * (127 - 10 - len(h)) + "\n"
npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<4f", 0, 1, 2, 3)
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for i in range(100000):
        z.writestr("layer%06d.npy" % i, npy)
PYEOF
then
  ok "an .npz of 100000 members of 144 bytes ($(wc -c <"$T/many.npz") bytes)"
else
  not_ok "writing the .npz of 100000 members"
fi
import_measured "$T/many.npz" "$T/many.ckpt"
if [ "$rc" -eq 0 ] && grep -q -F "imported 100000 tensors into $T/many.ckpt" "$T/out"; then
  ok "import of 100000 members: exit 0"
else
  not_ok "import of 100000 members (exit $rc)"
fi
rss_check "$T/many.npz" "... of the 100000 members"
exit 0
