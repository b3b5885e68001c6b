#!/bin/sh
# tests/interop.sh — TensorFlow checkpoints and safetensors files through
# the tools, run by `make check` (TAP):
#   - NumPy reads what the safetensors writer wrote (numpy.frombuffer on
#     the offsets the header gives), and the reader reads a file a short
#     Python script writes from the format description;
#   - ckpt-inspect export --format tf|safetensors and import round trips,
#     diff across formats, --dtype conversion;
#   - safetensors has no checksum: a flipped data bit shows in diff, a
#     flipped header bit is refused;
#   - cairn-fmnist warm-start --from a TensorFlow checkpoint prefix, a
#     safetensors file or an .npz trains exactly as from cairn's own
#     checkpoint (same accuracy, same bits);
#   - a safetensors file cut short is reported as such, with no advice
#     about interrupted saves or recover (which are about cairn's files);
#   - export whose writer fails frees what it opened (under valgrind, when
#     it is installed).
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"
PROG="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
PY=/usr/bin/python3

tap_tmpdir interop
echo "1..15"

have_numpy=0
[ -x "$PY" ] && "$PY" -c 'import numpy' 2>/dev/null && have_numpy=1

# ---- 1-2. safetensors and NumPy ----------------------------------------------------------
if [ "$have_numpy" -eq 1 ]; then
  # A file written by following the format description: u64 header length,
  # the JSON header, the raw little-endian bytes.
  "$PY" - "$T/py.safetensors" <<'PYEOF'
import json, struct, sys
import numpy as np
arrays = {"dense/kernel": np.arange(12, dtype="<f4").reshape(3, 4) / 7,
          "dense/bias": np.array([1.5, -2.25], dtype="<f8"),
          "global_step": np.array(42, dtype="<i8"),
          "mask": np.array([[True, False], [False, True]]),
          "h": np.array([0.5, 65504, -1e-3], dtype="<f2")}
codes = {"float32": "F32", "float64": "F64", "int64": "I64", "bool": "BOOL", "float16": "F16"}
header, data = {"__metadata__": {"source": "numpy"}}, b""
for name, a in arrays.items():
    raw = a.tobytes()
    header[name] = {"dtype": codes[str(a.dtype)], "shape": list(a.shape),
                    "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
h = json.dumps(header).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + data)
np.savez(sys.argv[1][:-12] + ".npz", **{k: v for k, v in arrays.items()})
PYEOF
  run "$TOOL" import "$T/py.npz" "$T/from-npz.ckpt"
  run "$TOOL" diff "$T/py.safetensors" "$T/from-npz.ckpt"
  if [ "$rc" -eq 0 ] && "$TOOL" meta "$T/py.safetensors" | grep -q '^source  *str  *"numpy"$'; then
    ok "the reader reads a safetensors file written by a Python script from the format description"
  else
    not_ok "the reader reads a safetensors file written by a Python script (diff exit $rc)"
  fi
  run "$TOOL" export --format safetensors "$T/from-npz.ckpt" "$T/out.safetensors"
  run "$PY" - "$T/out.safetensors" "$T/py.npz" <<'PYEOF'
import json, struct, sys
import numpy as np
buf = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", buf[:8])[0]
header = json.loads(buf[8:8 + n])
assert (8 + n) % 8 == 0, "header padded to 8 bytes"
ref = np.load(sys.argv[2])
types = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "BOOL": "?", "F16": "<f2"}
names = [k for k in header if k != "__metadata__"]
assert sorted(names) == sorted(ref.files), names
for k in names:
    e = header[k]
    b, end = e["data_offsets"]
    a = np.frombuffer(buf[8 + n + b:8 + n + end], dtype=types[e["dtype"]]).reshape(e["shape"])
    assert a.dtype == ref[k].dtype and a.shape == ref[k].shape and a.tobytes() == ref[k].tobytes(), k
print("numpy read", len(names), "tensors")
PYEOF
  if [ "$rc" -eq 0 ]; then ok "NumPy reads back what the safetensors writer wrote, bit for bit"
  else not_ok "NumPy reads back what the safetensors writer wrote (exit $rc)"; fi
else
  skip "safetensors from a Python script" "needs /usr/bin/python3 with numpy"
  skip "NumPy reads the safetensors writer's output" "needs /usr/bin/python3 with numpy"
fi

# ---- 3-6. round trips through the tools ------------------------------------------------------
S="$T/data"
fmnist_data "$S"
SMALL="--data-dir $S --hidden 16,8 --batch-size 8 --seed 7 --log-every 0 --threads 1"
R="$T/ref"
run "$PROG" train --checkpoint-dir "$R" $SMALL --max-steps 80 --save-checkpoint-steps 100000
[ "$rc" -eq 0 ] || not_ok "reference training run (exit $rc)"
C="$R/model.ckpt-80"
run "$TOOL" export --format tf "$C" "$T/tf/model.ckpt-80"
if [ "$rc" -ne 0 ]; then mkdir -p "$T/tf" && run "$TOOL" export --format tf "$C" "$T/tf/model.ckpt-80"; fi
run2() { "$@" >"$T/out2" 2>"$T/err2"; rc2=$?; }
run2 "$TOOL" diff "$C" "$T/tf/model.ckpt-80"
if [ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ] && [ -f "$T/tf/model.ckpt-80.index" ] &&
  [ -f "$T/tf/model.ckpt-80.data-00000-of-00001" ] && grep -q '^model_checkpoint_path: "model.ckpt-80"$' "$T/tf/checkpoint" &&
  "$TOOL" verify "$T/tf/model.ckpt-80" >/dev/null && "$TOOL" list "$T/tf" | grep -q '^# .*TensorFlow checkpoint'; then
  ok "export --format tf: a bundle and its state file; diff against the source: same; verify and list (directory) accept it"
else
  not_ok "export --format tf (exit $rc, diff $rc2)" "$T/out" "$T/err" "$T/out2"
fi
run "$TOOL" import "$T/tf/model.ckpt-80" "$T/back.ckpt"
run2 "$TOOL" diff "$C" "$T/back.ckpt"
if [ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ]; then ok "import of the TF bundle: the same tensors as the source"
else not_ok "import of the TF bundle (exit $rc, diff $rc2)" "$T/err" "$T/out2"; fi
run "$TOOL" export --dtype bf16 "$C" "$T/m.safetensors"
if [ "$rc" -eq 0 ] && "$TOOL" list "$T/m.safetensors" | grep -q '^dense/kernel  *bf16 ' &&
  "$TOOL" list "$T/m.safetensors" | grep -q '^global_step  *i64 ' && grep -q 'converted to bf16' "$T/out"; then
  ok "export --dtype bf16 to .safetensors converts the floating-point tensors only"
else
  not_ok "export --dtype bf16 (exit $rc)"
fi
run "$TOOL" export --format tf "$C" "$T/tf/model.ckpt-80"
if [ "$rc" -eq 2 ] && grep -q 'exists; pass --force' "$T/err"; then ok "export --format tf does not replace a bundle without --force"
else not_ok "export --format tf over an existing bundle (exit $rc)"; fi

# ---- 7-8. safetensors has no checksum ------------------------------------------------------------
run "$TOOL" export "$C" "$T/s.safetensors"
size=$(wc -c <"$T/s.safetensors")
cp "$T/s.safetensors" "$T/flip.safetensors"
# the last byte is data (the output layer's last bias): flip its low bit
last=$(od -An -tu1 -j $((size - 1)) -N1 "$T/s.safetensors" | tr -d ' ')
printf "$(printf '\\%03o' $((last ^ 1)))" | dd of="$T/flip.safetensors" bs=1 seek=$((size - 1)) conv=notrunc 2>/dev/null
run "$TOOL" diff "$T/s.safetensors" "$T/flip.safetensors"
run2 "$TOOL" verify "$T/flip.safetensors"
if [ "$rc" -eq 1 ] && [ "$rc2" -eq 0 ] && grep -q 'no checksums' "$T/out2"; then
  ok "a flipped data bit of a safetensors file passes verify (no checksum) and shows in diff"
else
  not_ok "a flipped data bit of a safetensors file (diff exit $rc, verify $rc2)" "$T/out" "$T/out2"
fi
cp "$T/s.safetensors" "$T/flip.safetensors"
# one dtype in the header: "F32" becomes "F22"
at=$(grep -abo '"F32"' "$T/s.safetensors" | head -1 | cut -d: -f1)
printf '2' | dd of="$T/flip.safetensors" bs=1 seek=$((at + 2)) conv=notrunc 2>/dev/null
run "$TOOL" verify "$T/flip.safetensors"
if [ "$rc" -ne 0 ] && grep -q 'safetensors header: .* has dtype "F22"' "$T/out"; then ok "a damaged safetensors header is refused, naming the file"
else not_ok "a damaged safetensors header (verify exit $rc)"; fi

# ---- 9-12. warm start from a TF checkpoint, safetensors, .npz ----------------------------------------
WARM="--data-dir $S --seed 7 --batch-size 8 --log-every 0 --threads 1 --max-steps 40 --eval-every 40 --method init_fn"
run "$PROG" warm-start --from "$C" --checkpoint-dir "$T/w-own" $WARM
cp "$T/out" "$T/own.out"
rc_own=$rc
run "$PROG" warm-start --from "$T/tf/model.ckpt-80" --checkpoint-dir "$T/w-tf" $WARM
acc_own=$(sed -n 's/.*test_accuracy=\(0\.[0-9]*\).*/\1/p' "$T/own.out" | tail -1)
acc_tf=$(sed -n 's/.*test_accuracy=\(0\.[0-9]*\).*/\1/p' "$T/out" | tail -1)
if [ "$rc_own" -eq 0 ] && [ "$rc" -eq 0 ] && [ -n "$acc_tf" ] && [ "$acc_tf" = "$acc_own" ]; then
  ok "warm-start --from a TF checkpoint prefix reaches the accuracy of warm-start from cairn's own ($acc_tf)"
else
  not_ok "warm-start --from a TF checkpoint (exit $rc_own/$rc, accuracy '$acc_own' vs '$acc_tf')" "$T/own.out" "$T/out" "$T/err"
fi
run "$TOOL" diff "$T/w-own/model.ckpt-40" "$T/w-tf/model.ckpt-40"
if [ "$rc" -eq 0 ]; then ok "... and ends with the same bits in every tensor"
else not_ok "warm-start from TF and from cairn end differently (diff exit $rc)"; fi

run "$PROG" warm-start --from "$T/s.safetensors" --checkpoint-dir "$T/w-st" $WARM
run2 "$TOOL" diff "$T/w-own/model.ckpt-40" "$T/w-st/model.ckpt-40"
if [ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ]; then ok "warm-start --from a safetensors file: the same bits as from cairn's own"
else not_ok "warm-start --from a safetensors file (exit $rc, diff $rc2)" "$T/err" "$T/out2"; fi

# an .npz is read through cairn_ckpt_open too (the npz backend), no import needed
run "$TOOL" export "$C" "$T/s.npz"
run "$PROG" warm-start --from "$T/s.npz" --checkpoint-dir "$T/w-npz" $WARM
run2 "$TOOL" diff "$T/w-own/model.ckpt-40" "$T/w-npz/model.ckpt-40"
if [ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ]; then ok "warm-start --from an .npz: the same bits as from cairn's own"
else not_ok "warm-start --from an .npz (exit $rc, diff $rc2)" "$T/err" "$T/out2"; fi

# ---- 13-14. a foreign file cut short: no interrupted-save advice -------------------------------
head -c $(($(wc -c <"$T/s.safetensors") - 4)) "$T/s.safetensors" >"$T/short.safetensors"
run "$TOOL" verify "$T/short.safetensors"
if [ "$rc" -eq 1 ] && grep -q 'past the end of the file' "$T/out" && grep -q 'recover does not apply' "$T/out" &&
  ! grep -q 'was interrupted\|copies every complete tensor' "$T/out"; then
  ok "verify of a safetensors file cut short: says recover does not apply, no interrupted-save advice"
else not_ok "verify of a safetensors file cut short: no interrupted-save advice (exit $rc)"; fi
run "$TOOL" list "$T/short.safetensors"
if [ "$rc" -ne 0 ] && grep -q 'recover does not apply' "$T/err" && ! grep -q 'was interrupted' "$T/err"; then
  ok "list of it: the same, without the hint meant for cairn's own files"
else not_ok "list of a safetensors file cut short: no interrupted-save hint (exit $rc)"; fi


# ---- 15. export whose writer fails frees the source checkpoint (valgrind) ---------------------
if command -v valgrind >/dev/null 2>&1 && [ -x "$top_builddir/libtool" ]; then
  leaks=
  for fmt in safetensors tf; do # tf fails at open, safetensors at commit
    OMP_NUM_THREADS=1 timeout 300 "$top_builddir/libtool" --mode=execute valgrind -q --leak-check=full \
      --errors-for-leak-kinds=definite --error-exitcode=99 "$TOOL" export --format $fmt "$C" "$T/no-such-dir/o" \
      >"$T/out" 2>"$T/err"
    r=$?
    [ "$r" -eq 2 ] || leaks="$leaks $fmt:exit$r" # 2: the error; 99: valgrind found a leak
  done
  if [ -z "$leaks" ]; then ok "export --format safetensors|tf into a missing directory fails without leaking the source"
  else not_ok "export into a missing directory leaks or crashes ($leaks)"; fi
else
  skip "export's error path leaks nothing" "needs valgrind"
fi

[ "$failed" -eq 0 ]
