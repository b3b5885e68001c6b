#!/bin/sh
# tests/inspect-corrupt.sh — ckpt-inspect on damaged and hostile checkpoints,
# run by `make check` (TAP):
#   - diff reads and verifies every tensor it reports on: a copy with one
#     flipped data bit is reported as corrupt (file and tensor named, exit
#     2), never as "same", whatever the tolerance, on either side, and
#     whatever the other file holds;
#   - verify calls a file whose contents exceed the reader's limits BAD
#     (exit 1), like any other bad file; 2 stays for files that cannot be
#     checked.
# Checkpoints are made here with `ckpt-inspect import` from tests/data's
# inspect-a.npz and inspect-b.npz. The file over the limits is crafted with
# /usr/bin/python3 (its footer rewritten, CRC32C recomputed); skipped
# without it. Needs $top_builddir and $top_srcdir (set by the Makefile);
# writes only into a fresh temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"
DATA="$top_srcdir/tests/data"
PY=/usr/bin/python3

tap_tmpdir inspect-corrupt

echo "1..22"
TAP_LINES=15
out_has() { grep -q -F -e "$1" "$T/out"; }
err_has() { grep -q -F -e "$1" "$T/err"; }
# offset_of FILE HEX...: offset of the first occurrence of the bytes, or nothing
offset_of() {
  f=$1
  shift
  od -An -v -tx1 "$f" | tr -s ' \n' '\n\n' | grep -v '^$' | awk -v pat="$*" '
    BEGIN { np = split(pat, w, " ") }
    { b[NR - 1] = $1 }
    END {
      for (i = 0; i + np <= NR; i++) {
        for (k = 1; k <= np && b[i + k - 1] == w[k]; k++) ;
        if (k > np) { print i; exit }
      }
    }'
}
# poke FILE OFFSET OCTAL: overwrites one byte
poke() { printf "\\$3" | dd of="$1" bs=1 seek="$2" count=1 conv=notrunc 2>/dev/null; }

# ---- diff of a corrupt copy -------------------------------------------------
# Raw (uncompressed) layout, so the data of 'big' (f32 0, 0.125, 0.25, ...)
# is in the file as it is; one bit of its third byte of 0.125 is flipped
# (0x00 -> 0x01): its chunk CRC and the tensor CRC fail, the index is intact.
G="$T/good.ckpt"
B="$T/bad.ckpt"
run "$TOOL" import --compress none "$DATA/inspect-a.npz" "$G"
off=$(offset_of "$G" 00 00 00 3e 00 00 80 3e)
if [ "$rc" -eq 0 ] && [ -n "$off" ] && cp "$G" "$B" && poke "$B" $((off + 2)) 001 && ! cmp -s "$G" "$B"; then
  ok "a checkpoint and a copy with one flipped bit in the data of 'big'"
else
  not_ok "a checkpoint and a copy with one flipped bit in the data of 'big' (import exit $rc, offset '$off')"
fi
expect 1 "verify of the copy: BAD (exit 1)" "$TOOL" verify "$B"
check "... names 'big'" out_has "cannot be read intact: big"

expect 2 "diff GOOD BAD: exit 2, not 'same'" "$TOOL" diff "$G" "$B"
check "... names the corrupt file and tensor, with the checksum failure" \
  err_has "ckpt-inspect: $B: tensor 'big': data is corrupt: '$B' offset "
check "... counts the corrupt tensors of that file and points to verify" \
  err_has "ckpt-inspect: $B: 1 of 21 tensors cannot be read intact (corrupt data): the checkpoints are not compared; 'ckpt-inspect verify $B' checks the whole file"
check "... prints no report on standard output (no 'same')" sh -c '! [ -s "$1" ]' sh "$T/out"
check "... does not blame the intact file" sh -c '! grep -q -F -e "$2:" "$1"' sh "$T/err" "$G"

expect 2 "diff --atol 0 GOOD BAD: exit 2" "$TOOL" diff --atol 0 "$G" "$B"
expect 2 "diff --atol 1e9 --rtol 1 GOOD BAD (any tolerance): exit 2" "$TOOL" diff --atol 1e9 --rtol 1 "$G" "$B"
expect 2 "diff BAD GOOD (the corrupt file first): exit 2" "$TOOL" diff "$B" "$G"
check "... names it" err_has "ckpt-inspect: $B: tensor 'big': data is corrupt: "
expect 2 "diff --json GOOD BAD: exit 2, no JSON claiming same" "$TOOL" diff --json "$G" "$B"
check "... standard output is empty" sh -c '! [ -s "$1" ]' sh "$T/out"
# inspect-b differs from inspect-a in every way (tensors added, removed,
# retyped, reshaped): the corrupt tensor is found whatever its role.
run "$TOOL" import --compress none "$DATA/inspect-b.npz" "$T/b.ckpt"
expect 2 "diff BAD OTHER (a file with every kind of difference): exit 2 naming 'big'" "$TOOL" diff "$B" "$T/b.ckpt"
check "... names 'big' of the corrupt file" err_has "ckpt-inspect: $B: tensor 'big': "

cp "$G" "$T/copy.ckpt"
expect 0 "diff of an intact copy: still exit 0" "$TOOL" diff "$G" "$T/copy.ckpt"
check "... 21 same" out_has "# 21 same, 0 different"

# ---- verify: contents beyond the reader's limits are BAD -------------------------
# The footer (last 64 bytes) announces 1,000,001 tensors (the reader's
# limit is 1,000,000), with its masked CRC32C recomputed so that only the
# limit is wrong.
if [ -x "$PY" ] && "$PY" - "$G" "$T/many.ckpt" <<'EOF'
import struct, sys
def crc32c(data):
    tab = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        tab.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = tab[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
def masked(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
buf = bytearray(open(sys.argv[1], "rb").read())
ft = len(buf) - 64
assert buf[ft:ft + 4] == b"CRNF"
struct.pack_into("<Q", buf, ft + 32, 1000001)
struct.pack_into("<I", buf, ft + 60, masked(crc32c(bytes(buf[ft:ft + 60]))))
open(sys.argv[2], "wb").write(buf)
EOF
then
  expect 1 "verify of a file announcing more tensors than the reader's limit: BAD (exit 1, not 2)" \
    "$TOOL" verify "$T/many.ckpt"
  check "... says BAD and gives the count and the limit" \
    out_has "$T/many.ckpt: BAD: size exceeds a configured limit: '$T/many.ckpt': 1000001 tensors exceed the limit 1000000"
  expect 1 "verify --json of it: exit 1" "$TOOL" verify --json "$T/many.ckpt"
  check "... status CAIRN_E_LIMIT, not ok" out_has '"ok": false, "incomplete": false, "status": "CAIRN_E_LIMIT"'
else
  for k in 1 2 3 4; do skip "verify of a file beyond the reader's limits: needs /usr/bin/python3 to craft it"; done
fi

[ "$n" -eq 22 ] || echo "# ran $n tests, planned 22"
exit 0
