#!/bin/sh
# tests/ckpt-compact.sh — compact checkpoints (codec 3, byte planes + zstd)
# through the tools, run by `make check` (TAP): ckpt-inspect's CODEC column,
# import and recompress with --compress compact (in place and to another
# file, refusing a damaged input), and cairn-fmnist train --compress compact.
# Needs $top_builddir and $top_srcdir; writes only into a temporary directory.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"
FM="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
DATA="$top_srcdir/tests/data"
tap_tmpdir ckpt-compact-test

# 1-2: list shows each tensor's codec
expect 0 "list the compact golden file" timeout 60 "$TOOL" list "$DATA/v1-compact.crn"
check "... with a CODEC column naming compact chunks" sh -c 'grep -q "CODEC$" "$1" && grep -q "^bytes .* compact$" "$1"' sh "$T/out"
# 3-4: a 1.0 file says raw / lz4 / shuffle
expect 0 "list a shuffle golden file" timeout 60 "$TOOL" list "$DATA/v1-shuffle.crn"
check "... codec shuffle" grep -q "shuffle" "$T/out"
# 5-8: recompress to another file, then in place, then back
cp "$DATA/v1-chunked.crn" "$T/a.crn"
expect 0 "recompress --compress compact IN OUT" timeout 60 "$TOOL" recompress --compress compact "$T/a.crn" "$T/b.crn"
check "... OUT is a valid 1.1 file with compact chunks" sh -c '"$1" verify "$2" | grep -q "format 1.1" && "$1" list "$2" | grep -q compact' sh "$TOOL" "$T/b.crn"
expect 0 "recompress in place (OUT == IN) back to lz4" timeout 60 "$TOOL" recompress --compress lz4 "$T/b.crn" "$T/b.crn"
check "... same tensors as the original, format 1.0 again, no temporary file left" sh -c '"$1" diff "$2" "$3" >/dev/null && "$1" verify "$3" | grep -q "format 1.0" && ! ls "$4" | grep -q "\.tmp\."' sh "$TOOL" "$T/a.crn" "$T/b.crn" "$T"
# 9: an existing other OUT is not replaced without --force
expect 2 "recompress refuses an existing OUT without --force" timeout 60 "$TOOL" recompress --compress compact "$T/a.crn" "$T/b.crn"
# 10-11: a damaged IN is refused and OUT is not written
cp "$T/a.crn" "$T/bad.crn"
sz=$(wc -c <"$T/bad.crn")
printf '\377' | dd of="$T/bad.crn" bs=1 seek=$((sz / 3)) conv=notrunc 2>/dev/null
expect 1 "recompress refuses a damaged IN (exit 1)" timeout 60 "$TOOL" recompress --compress compact "$T/bad.crn" "$T/c.crn"
check "... and writes nothing" test ! -e "$T/c.crn"
# 12: an unknown mode names the choices
expect 2 "--compress with an unknown mode" timeout 60 "$TOOL" recompress --compress zip "$T/a.crn" "$T/d.crn"
# 13-14: cairn-fmnist train --compress compact
if [ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte ] || [ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  expect 0 "cairn-fmnist train --compress compact" timeout 300 "$FM" train --checkpoint-dir "$T/fm" --max-steps 20 --compress compact
  check "... writes compact checkpoints" sh -c '"$1" list "$2" | grep -q "compact"' sh "$TOOL" "$T/fm"
else
  skip "cairn-fmnist train --compress compact" "no Fashion-MNIST data"
  skip "... writes compact checkpoints" "no Fashion-MNIST data"
fi

echo "1..$n"
[ "$failed" -eq 0 ]
