#!/bin/sh
# tests/format-advice.sh — ckpt-inspect's advice for foreign checkpoints
# names the format it found and works when followed (TAP): a TF bundle's
# data shard named instead of its prefix; a bundle whose .index is missing;
# a SavedModel-style directory (DIR/variables.index); `import` of a
# truncated safetensors file; a misspelled file or prefix. Needs $top_builddir and $top_srcdir.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"
PROG="$top_builddir/examples/finetune"

tap_tmpdir format-advice
echo "1..7"

"$PROG" pretrain --dir "$T/pre" >/dev/null 2>&1
mkdir -p "$T/tf" "$T/sm"
"$TOOL" export --format tf "$T/pre/model.ckpt-100" "$T/tf/model" >/dev/null 2>&1
"$TOOL" export --format safetensors "$T/pre/model.ckpt-100" "$T/m.safetensors" >/dev/null 2>&1

# 1. the data shard: "open the bundle by its prefix", and that works
run "$TOOL" list "$T/tf/model.data-00000-of-00001"
if [ "$rc" -ne 0 ] && grep -qF "is the data shard of a TensorFlow bundle, not a checkpoint by itself: open the bundle by its prefix '$T/tf/model'" "$T/err" &&
  "$TOOL" list "$T/tf/model" >/dev/null 2>&1; then
  ok "a data shard: the advice names the prefix, and the prefix lists"
else
  not_ok "a data shard: the advice names the prefix, and the prefix lists (exit $rc)"
fi

# 2. the .index missing: said so, for the prefix and for the shard
cp "$T/tf/model.data-00000-of-00001" "$T/sm/"
mv "$T/sm/model.data-00000-of-00001" "$T/sm/lost.data-00000-of-00001"
run "$TOOL" list "$T/sm/lost"
check "a prefix whose .index is missing is named as such" \
  grep -qF "a TensorFlow bundle whose index '$T/sm/lost.index' is missing" "$T/err"
run "$TOOL" list "$T/sm/lost.data-00000-of-00001"
check "its data shard: the index is missing, copy it too" grep -qF "its index is missing, so the bundle '$T/sm/lost' cannot be read" "$T/err"
rm -f "$T/sm/lost.data-00000-of-00001"

# 3. a SavedModel-style directory: the advice names DIR/variables, which lists
cp "$T/tf/model.index" "$T/sm/variables.index"
cp "$T/tf/model.data-00000-of-00001" "$T/sm/variables.data-00000-of-00001"
run "$TOOL" list "$T/sm"
if grep -qF "open the bundle by its prefix '$T/sm/variables'" "$T/err" && "$TOOL" list "$T/sm/variables" >/dev/null 2>&1; then
  ok "a SavedModel-style directory: the advice names DIR/variables, which lists"
else
  not_ok "a SavedModel-style directory: the advice names DIR/variables, which lists (exit $rc)"
fi

# 4. import of a truncated safetensors file: truncated, not "not a ZIP"
head -c 200 "$T/m.safetensors" >"$T/t.safetensors"
run "$TOOL" import "$T/t.safetensors" "$T/out.ckpt"
if [ "$rc" -ne 0 ] && grep -q "a safetensors file, not a ZIP (.npz) file, and it is truncated" "$T/err" &&
  ! grep -q "end-of-central-directory" "$T/err"; then
  ok "import of a truncated safetensors file says truncated"
else
  not_ok "import of a truncated safetensors file says truncated (exit $rc)"
fi
# 5. a misspelled checkpoint file, and a misspelled TF prefix: the closest
#    names, and the one named lists
run "$TOOL" list "$T/pre/model.ckt-100"
if [ "$rc" -ne 0 ] && grep -qF "no such file or directory (did you mean 'model.ckpt-100'" "$T/err" &&
  "$TOOL" list "$T/pre/model.ckpt-100" >/dev/null 2>&1; then
  ok "a misspelled file: the closest checkpoint named, and it lists"
else
  not_ok "a misspelled file: the closest checkpoint named, and it lists (exit $rc)"
fi
run "$TOOL" list "$T/tf/modle"
check "a misspelled TF prefix: the bundle's prefix named" grep -qF "(did you mean 'model'?)" "$T/err"
[ "$failed" -eq 0 ]
