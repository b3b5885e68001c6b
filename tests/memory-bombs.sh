#!/bin/sh
# tests/memory-bombs.sh — inputs whose headers claim far more than they
# hold, read under a 1 GiB address-space limit (ulimit -v), run by
# `make check` (TAP). Each must fail with a message that says what is
# wrong with the file, not run out of memory:
#   - cairn-fmnist train on a gzip IDX whose header claims 3,000,000,000
#     bytes of images over 100 bytes of data, and on one whose 200 MB of
#     zeros (an 870 KB gzip) are less than its header claims: the reader's
#     buffer grows with the data actually decompressed, so both are reported
#     as truncated, at the offset where the data ends;
#   - cairn-fmnist train on 300,000 real (zero) images with 320 labels: the
#     counts are compared before the images are widened to float32 (which
#     would need 940 MB more);
#   - ckpt-inspect import of an .npz whose member claims 3 GiB over 4 MiB of
#     deflate data: the member is streamed, so the sizes are compared at its
#     end, with a peak resident set under 4 times the file + 64 MiB;
#   - ckpt-inspect import of a valid 1 MB .npz whose member inflates to
#     1 GiB of zeros: it must succeed under the limit (the member streams
#     into the checkpoint; it used to be held whole, 1.06 GB).
# The limit leaves room for what OpenBLAS and OpenMP reserve at start-up
# (about 200 MB with one thread here): the tools are first run under it
# without input, and the test is skipped when they cannot start. The npz
# case needs /usr/bin/python3 (skipped without). Needs $top_builddir;
# writes only into a temporary directory (about 1 MB).

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
FMNIST="$top_builddir/tools/cairn-fmnist"
TOOL="$top_builddir/tools/ckpt-inspect"
PY=/usr/bin/python3
TIME=/usr/bin/time
LIMIT_KB=1048576
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

tap_tmpdir memory-bombs

# limited CMD...: runs CMD under the address-space limit, with a time limit
# (a program that cannot even start under the limit must not hang the suite)
limited() { (ulimit -v "$LIMIT_KB" && exec timeout 120 "$@"); }
if ! (ulimit -v "$LIMIT_KB") 2>/dev/null; then
  echo "1..0 # SKIP ulimit -v is not available in this shell"
  exit 0
fi
if ! limited "$FMNIST" --help >/dev/null 2>&1 || ! limited "$TOOL" --version >/dev/null 2>&1; then
  echo "1..0 # SKIP the tools do not start under ulimit -v $LIMIT_KB (their libraries reserve more)"
  exit 0
fi

echo "1..11"
TAP_LINES=15
err_has() { grep -q -F -e "$1" "$T/err"; }

# be32 N: N as 4 big-endian bytes (octal escapes for printf)
be32() { awk -v n="$1" 'BEGIN { for (s = 16777216; s >= 1; s /= 256) printf "\\%03o", int(n / s) % 256 }'; }
# A small valid data set: 320 training and 64 test examples of 4x4 pixels.
# images FILE N ROWS COLS: IDX u8 header then N*ROWS*COLS zero bytes, gzip'ed
images() {
  { printf "\\000\\000\\010\\003$(be32 "$2")$(be32 "$3")$(be32 "$4")"; head -c $(($2 * $3 * $4)) /dev/zero; } |
    gzip -1 -c >"$1"
}
# labels FILE N: IDX u8 labels 0..9 repeated
labels() {
  { printf "\\000\\000\\010\\001$(be32 "$2")"; awk -v n="$2" 'BEGIN { for (i = 0; i < n; i++) printf "%c", 48 + i % 10 }' | tr '0-9' '\000-\011'; } |
    gzip -c >"$1"
}
mkset() {
  mkdir -p "$1" && images "$1/train-images-idx3-ubyte.gz" 320 4 4 && labels "$1/train-labels-idx1-ubyte.gz" 320 &&
    images "$1/t10k-images-idx3-ubyte.gz" 64 4 4 && labels "$1/t10k-labels-idx1-ubyte.gz" 64
}
train() { limited "$FMNIST" train --data-dir "$1" --checkpoint-dir "$T/ckpt-$(basename "$1")" --hidden 8 --batch-size 8 --max-steps 1 --threads 1 --log-every 0; }

# ---- gzip IDX, header claims 3e9 bytes, 100 bytes present -----------------------------
mkset "$T/hdr"
{ printf "\\000\\000\\010\\003$(be32 3000)$(be32 1000)$(be32 1000)"; head -c 100 /dev/zero; } | gzip -c >"$T/hdr/train-images-idx3-ubyte.gz"
run train "$T/hdr"
if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] &&
  err_has "train-images-idx3-ubyte.gz': file ends at offset 116 inside the data: expected 3000000000 bytes from offset 16, 2999999900 missing"; then
  ok "gzip IDX claiming 3e9 bytes over 100: reported as truncated at offset 116 (exit $rc)"
else
  not_ok "gzip IDX claiming 3e9 bytes over 100: reported as truncated at offset 116 (exit $rc)"
fi
if ! err_has "out of memory" && ! err_has "cannot allocate"; then ok "... without running out of memory"; else not_ok "... without running out of memory"; fi

# ---- gzip IDX, 200 MB of real zeros, header claims 3e9 bytes --------------------------------
mkset "$T/zeros"
{ printf "\\000\\000\\010\\003$(be32 3000)$(be32 1000)$(be32 1000)"; head -c 200000000 /dev/zero; } | gzip -1 -c >"$T/zeros/train-images-idx3-ubyte.gz"
run train "$T/zeros"
if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] &&
  err_has "file ends at offset 200000016 inside the data: expected 3000000000 bytes from offset 16, 2800000000 missing"; then
  ok "gzip IDX of $(wc -c <"$T/zeros/train-images-idx3-ubyte.gz") bytes inflating to 200 MB, claiming 3e9: truncated at offset 200000016 (exit $rc)"
else
  not_ok "gzip IDX inflating to 200 MB, claiming 3e9: truncated at offset 200000016 (exit $rc)"
fi
if ! err_has "out of memory" && ! err_has "cannot allocate"; then ok "... without running out of memory"; else not_ok "... without running out of memory"; fi

# ---- 300,000 images, 320 labels: checked before widening to float32 -------------------------
mkset "$T/count"
images "$T/count/train-images-idx3-ubyte.gz" 300000 28 28
run train "$T/count"
if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] && err_has "train-labels-idx1-ubyte.gz: expected 300000 labels (one per image)"; then
  ok "300000 images (235 MB) with 320 labels: the label count is refused (exit $rc)"
else
  not_ok "300000 images (235 MB) with 320 labels: the label count is refused (exit $rc)"
fi
if ! err_has "out of memory" && ! err_has "cannot allocate"; then ok "... before widening the images (no out of memory)"; else not_ok "... before widening the images (no out of memory)"; fi

# ---- npz member claiming 3 GiB over 4 MiB of deflate data -------------------------------------
if [ -x "$PY" ] && "$PY" - "$T/bomb.npz" >"$T/out" 2>"$T/err" <<'PYEOF'
import struct, sys, zipfile
path = sys.argv[1]
d = "{'descr': '|u1', 'fortran_order': False, 'shape': (4194304,), }"
d += " " * (128 - 10 - 1 - len(d)) + "\n"
with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=0) as z:
    z.writestr("a.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode() + bytes(4 << 20))
buf = bytearray(open(path, "rb").read())
claim = 3 << 30   # within deflate's 1032:1 of the 4 MiB stored, far beyond the data
struct.pack_into("<I", buf, 22, claim)                  # local header: uncompressed size
cd = buf.rindex(b"PK\x01\x02")
struct.pack_into("<I", buf, cd + 24, claim)             # central directory: the same
open(path, "wb").write(buf)
PYEOF
then
  run limited "$TOOL" import "$T/bomb.npz" "$T/bomb.ckpt"
  if [ "$rc" -eq 2 ] && err_has "bomb.npz: member 'a.npy' inflates to 4194432 bytes, but its header declares 3221225472"; then
    ok "npz member claiming 3 GiB over 4 MiB: the sizes are named (exit 2)"
  else
    not_ok "npz member claiming 3 GiB over 4 MiB: the sizes are named (exit $rc)"
  fi
  if ! err_has "out of memory"; then ok "... without running out of memory"; else not_ok "... without running out of memory"; fi
  if "$TIME" -v true >/dev/null 2>&1; then
    "$TIME" -v -o "$T/time" "$TOOL" import "$T/bomb.npz" "$T/bomb.ckpt" >/dev/null 2>&1
    rss=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): *//p' "$T/time")
    bound=$((4 * ($(wc -c <"$T/bomb.npz") + 1023) / 1024 + 65536))
    check "... peak RSS ${rss:-?} KiB <= 4 x input + 64 MiB = $bound KiB" sh -c '[ -n "$1" ] && [ "$1" -le "$2" ]' sh "$rss" "$bound"
  else
    skip "npz bomb: peak RSS" "no /usr/bin/time"
  fi
else
  skip "npz bomb: needs /usr/bin/python3 to write it"
  skip "npz bomb: needs /usr/bin/python3 to write it"
  skip "npz bomb: needs /usr/bin/python3 to write it"
fi

# ---- a valid npz of 1 MB holding 1 GiB of zeros ------------------------------------------------
if [ -x "$PY" ] && "$PY" - "$T/zeros.npz" >"$T/out" 2>"$T/err" <<'PYEOF'
import struct, sys, zlib
path, count = sys.argv[1], (1 << 27) - 15
d = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d,), }" % count
d += " " * (128 - 10 - 1 - len(d)) + "\n"
head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode()
usize, seg = len(head) + 8 * count, 64 << 20
def deflate(data, mode):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(mode)
zeros = bytes(seg)
one = deflate(zeros, zlib.Z_FULL_FLUSH)   # 64 MiB of zeros, compressed once, used 15 times
body, crc, left = [deflate(head, zlib.Z_FULL_FLUSH)], zlib.crc32(head), 8 * count
while left > seg:
    body.append(one)
    crc = zlib.crc32(zeros, crc)
    left -= seg
body.append(deflate(bytes(left), zlib.Z_FINISH))
crc = zlib.crc32(bytes(left), crc)
data, name = b"".join(body), b"zeros.npy"
lh = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(data), usize, len(name), 0) + name
cd = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc, len(data), usize, len(name),
                 0, 0, 0, 0, 0, 0) + name
end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(cd), len(lh) + len(data), 0)
open(path, "wb").write(lh + data + cd + end)
PYEOF
then
  run limited "$TOOL" import "$T/zeros.npz" "$T/zeros.ckpt"
  if [ "$rc" -eq 0 ]; then
    ok "valid npz of $(wc -c <"$T/zeros.npz") bytes inflating to 1 GiB of zeros: imports under ulimit -v $LIMIT_KB"
  else
    not_ok "valid npz of $(wc -c <"$T/zeros.npz") bytes inflating to 1 GiB of zeros: imports under ulimit -v $LIMIT_KB (exit $rc)"
  fi
  run "$TOOL" verify "$T/zeros.ckpt"
  if [ "$rc" -eq 0 ] && "$TOOL" list "$T/zeros.ckpt" 2>/dev/null | grep -q -E '^zeros +f64 +\(134217713,\) +1073741704 .* b6140fd6 '; then
    ok "... the checkpoint verifies and holds 134217713 float64 zeros (crc32c b6140fd6)"
  else
    not_ok "... the checkpoint verifies and holds 134217713 float64 zeros (crc32c b6140fd6)"
  fi
  rm -f "$T/zeros.ckpt"
else
  skip "npz of 1 GiB of zeros: needs /usr/bin/python3 to write it"
  skip "npz of 1 GiB of zeros: needs /usr/bin/python3 to write it"
fi
exit 0
