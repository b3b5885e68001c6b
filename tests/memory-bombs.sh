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
#     into the checkpoint; it used to be held whole, 1.06 GB);
#   - foreign files whose headers cost more than their bytes, each verified
#     under /usr/bin/time -v with a peak RSS of at most 4 x the input + 64 MiB
#     (doc/interop-formats.md, "Memory"): a 12 MB safetensors file of 200,000
#     zero-size tensors (1.2 KB each in a jansson tree, 20 x the file), a
#     TensorFlow index of 300,000 entries (5 MB; 300 B per entry before) —
#     both must still verify — and an index of one honest Snappy block
#     decoding to 128 MiB from 6 MB, which is refused as over the limit a
#     file of that size can honestly expand to.
# The limit leaves room for what OpenBLAS and OpenMP reserve at start-up
# (about 200 MB with one thread here): the tools are first run under it
# without input, and the test is skipped when they cannot start. The npz
# and foreign-file cases need /usr/bin/python3 (skipped without), the latter
# /usr/bin/time too. Needs $top_builddir; writes only into a temporary
# directory (about 25 MB).

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
FMNIST="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"
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

echo "1..17"
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

# ---- foreign files: memory proportional to the file, not to its header --------------------
# gen.py MODE ...: writes the inputs (a LevelDB table writer with CRC32C, enough for these)
cat >"$T/gen.py" <<'PYEOF'
import struct, sys
T = []
for i in range(256):
    c = i
    for _ in range(8): c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    T.append(c)
def crc32c(b, crc=0):
    crc ^= 0xffffffff
    t = T
    for x in b: crc = t[(crc ^ x) & 0xff] ^ (crc >> 8)
    return crc ^ 0xffffffff
def mask(c): return ((((c >> 15) | (c << 17)) & 0xffffffff) + 0xa282ead8) & 0xffffffff
def varint(v):
    o = bytearray()
    while v >= 0x80: o.append((v & 0x7f) | 0x80); v >>= 7
    o.append(v); return bytes(o)
def block(entries):  # [(key, value)]: a restart every 16 entries, keys prefix-shared
    b, rs, last = bytearray(), [], b""
    for i, (k, v) in enumerate(entries):
        sh = 0
        if i % 16 == 0: rs.append(len(b))
        else:
            while sh < min(len(k), len(last)) and k[sh] == last[sh]: sh += 1
        b += varint(sh) + varint(len(k) - sh) + varint(len(v)) + k[sh:] + v
        last = k
    for r in rs or [0]: b += struct.pack("<I", r)
    return bytes(b + struct.pack("<I", len(rs or [0])))
def trailer(data, typ): return bytes([typ]) + struct.pack("<I", mask(crc32c(bytes([typ]), crc32c(data))))
def table(blocks, prefix):  # blocks: [(stored bytes, type, last key)]
    out, idx = bytearray(), []
    for data, typ, lastkey in blocks:
        idx.append((lastkey, varint(len(out)) + varint(len(data))))
        out += data + trailer(data, typ)
    meta = block([]); mh = varint(len(out)) + varint(len(meta)); out += meta + trailer(meta, 0)
    ib = block(idx); ih = varint(len(out)) + varint(len(ib)); out += ib + trailer(ib, 0)
    ft = mh + ih
    open(prefix + ".index", "wb").write(out + ft + bytes(40 - len(ft)) + struct.pack("<Q", 0xdb4775248b80fb57))
    open(prefix + ".data-00000-of-00001", "wb").close()
HEADER = b"\x08\x01\x1a\x02\x08\x01"  # BundleHeaderProto: 1 shard, version {producer 1}
# BundleEntryProto: float, shape [0], the (masked) CRC32C of no bytes
ZERO_F32 = b"\x08\x01\x12\x02\x12\x00\x35" + struct.pack("<I", mask(0))
mode, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if mode == "st":  # n zero-size f32 tensors
    h = ("{" + ",".join('"t%07d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}' % i for i in range(n)) + "}").encode()
    h += b" " * (-len(h) % 8)
    open(out, "wb").write(struct.pack("<Q", len(h)) + h)
elif mode == "tf":  # n zero-size f32 tensors, uncompressed blocks of 256 entries
    ents = [(b"", HEADER)] + [(b"t%07d" % i, ZERO_F32) for i in range(n)]
    table([(block(ents[i:i + 256]), 0, ents[i:i + 256][-1][0]) for i in range(0, len(ents), 256)], out)
else:  # snappy: one data block of n MiB, Snappy-compressed: a tensor entry whose
    # unknown field 15 holds zeros, stored as 64-byte copies (3 bytes each, 21:1)
    pad = (n << 20) - 200
    val = ZERO_F32 + b"\x7a" + varint(pad)
    head = varint(0) + varint(0) + varint(len(HEADER)) + HEADER + varint(0) + varint(3) + varint(len(val) + pad) + b"big" + val
    tail = struct.pack("<II", 0, 1)
    def lit(d): return (bytes([(len(d) - 1) << 2]) if len(d) <= 60 else bytes([61 << 2]) + struct.pack("<H", len(d) - 1)) + d
    left = pad - 64
    comp = varint(len(head) + pad + len(tail)) + lit(head + bytes(64)) + bytes([63 << 2 | 2, 64, 0]) * (left // 64)
    if left % 64: comp += bytes([(left % 64 - 1) << 2 | 2, 64, 0])
    table([(comp + lit(tail), 1, b"big")], out)
PYEOF
# rss_check WHAT INPUT_BYTES: the peak RSS in $T/time against 4 x INPUT_BYTES + 64 MiB
rss_check() {
  kb=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): *//p' "$T/time")
  bound=$(( (4 * $2 + 67108864) / 1024 ))
  if [ -n "$kb" ] && [ "$kb" -le "$bound" ]; then ok "... peak RSS $kb KB <= 4 x $2 bytes + 64 MiB = $bound KB ($1)"
  else not_ok "... peak RSS ${kb:-?} KB <= 4 x $2 bytes + 64 MiB = $bound KB ($1)" "$T/time"; fi
}
# measured CMD...: runs CMD (under the limits) with its peak RSS in $T/time
measured() { run limited /usr/bin/time -v -o "$T/time" "$@"; }
if [ -x "$PY" ] && [ -x /usr/bin/time ] && "$PY" "$T/gen.py" st 200000 "$T/zero.safetensors" &&
  "$PY" "$T/gen.py" tf 300000 "$T/idx" && "$PY" "$T/gen.py" snappy 128 "$T/snappy"; then
  measured "$TOOL" verify "$T/zero.safetensors"
  if [ "$rc" -eq 0 ] && grep -q "OK (safetensors, 200000 tensors" "$T/out"; then
    ok "safetensors of 200000 zero-size tensors ($(wc -c <"$T/zero.safetensors") bytes) verifies"
  else not_ok "safetensors of 200000 zero-size tensors verifies (exit $rc)"; fi
  rss_check "safetensors header" "$(wc -c <"$T/zero.safetensors")"
  measured "$TOOL" verify "$T/idx"
  if [ "$rc" -eq 0 ] && grep -q "OK (TensorFlow checkpoint (bundle version 1), 300000 tensors" "$T/out"; then
    ok "TF index of 300000 entries ($(wc -c <"$T/idx.index") bytes) verifies"
  else not_ok "TF index of 300000 entries verifies (exit $rc)"; fi
  rss_check "TF index entries" "$(wc -c <"$T/idx.index")"
  measured "$TOOL" verify "$T/snappy"
  if [ "$rc" -eq 1 ] && grep -q "data block decompresses to 134217570 bytes, over the limit $((2 * $(wc -c <"$T/snappy.index") + 16777216)) (twice the index file + 16 MiB" "$T/out"; then
    ok "TF index of $(wc -c <"$T/snappy.index") bytes with a Snappy block of 128 MiB: refused, the sizes named (exit 1)"
  else not_ok "TF index with a Snappy block of 128 MiB: refused, the sizes named (exit $rc)"; fi
  rss_check "one Snappy block" "$(wc -c <"$T/snappy.index")"
else
  for i in 1 2 3 4 5 6; do skip "foreign files' memory: needs /usr/bin/python3 and /usr/bin/time"; done
fi
exit 0
