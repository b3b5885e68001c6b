#!/bin/sh
# tests/readme-finetune.sh — the README's "Fine-tuning" snippets are the
# code of examples/finetune.c, and that program works (TAP): each snippet
# (the lines between "/* README: NAME */" and "/* end */" in the example,
# less two spaces of indentation) must appear verbatim in README.md; then,
# for each of the four methods, a first run restores the pretrained dense
# layer (and not its Adam slot) and initializes the head, a restart resumes
# the run's own checkpoint, and "dense/kernal" is refused, naming
# "dense/kernel". Needs $top_builddir and $top_srcdir.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
PROG="$top_builddir/examples/finetune"
SRC="$top_srcdir/examples/finetune.c"
README="$top_srcdir/README.md"

tap_tmpdir readme-finetune

methods="warm_start init_fn local_init_op restore"
echo "1..13"

# ---- the snippets -------------------------------------------------------------------
# flat FILE: the file on one line, newlines as \001, so that a block is a substring.
flat() { tr '\n' '\001' <"$1"; }
flat "$README" >"$T/readme.flat"
for m in $methods; do
  awk -v name="$m" '
    $0 ~ "/\\* README: " name " \\*/" { on = 1; next }
    on && /\/\* end \*\// { exit }
    on { sub(/^  /, ""); print }' "$SRC" >"$T/snippet.$m"
  flat "$T/snippet.$m" >"$T/snippet.$m.flat"
  if [ -s "$T/snippet.$m" ] && grep -qF -f "$T/snippet.$m.flat" "$T/readme.flat"; then
    ok "README shows examples/finetune.c's $m snippet verbatim"
  else
    not_ok "README shows examples/finetune.c's $m snippet verbatim" "$T/snippet.$m"
  fi
done

# ---- the program ----------------------------------------------------------------------
run "$PROG" pretrain --dir "$T/pre"
check "pretrain writes pre/model.ckpt-100" test "$rc" -eq 0 -a -f "$T/pre/model.ckpt-100"
for m in $methods; do
  # From the directory: its newest checkpoint.
  run "$PROG" "$m" --from "$T/pre" --dir "$T/$m" --steps 20
  start="$m: start at step 0: dense/kernel 10 dense/bias 20 dense/kernel/Adam 0.5 head/kernel 3"
  if [ "$rc" -eq 0 ] && grep -qxF "$start" "$T/out" && grep -qxF "$m: done at step 20" "$T/out"; then
    run "$PROG" "$m" --from "$T/pre" --dir "$T/$m" --steps 40
    if [ "$rc" -eq 0 ] && grep -q "^$m: start at step 20: dense/kernel 10.02 " "$T/out" &&
      grep -qxF "$m: done at step 40" "$T/out"; then
      ok "$m: pretrained layer restored, head initialized; the restart resumes step 20"
    else
      not_ok "$m: the restart resumes step 20 (exit $rc)"
    fi
  else
    not_ok "$m: pretrained layer restored, head initialized (exit $rc)"
  fi
  run "$PROG" "$m" --from "$T/pre/model.ckpt-100" --dir "$T/typo-$m" --typo
  if [ "$rc" -eq 1 ] && grep -q "'dense/kernal'.*did you mean 'dense/kernel'?" "$T/err"; then
    ok "$m: 'dense/kernal' is refused, naming 'dense/kernel'"
  else
    not_ok "$m: 'dense/kernal' is refused, naming 'dense/kernel' (exit $rc)"
  fi
done
[ "$failed" -eq 0 ]
