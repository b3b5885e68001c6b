#!/bin/sh
# tests/ckpt-inspect.sh — every ckpt-inspect subcommand and exit status, run
# by `make check` (TAP). Needs $top_builddir and $top_srcdir (set by the
# Makefile); writes only into a fresh temporary directory.
#
# Fixtures (tests/data): inspect-a.npz, inspect-a-deflate.npz (the same
# arrays, numpy.savez_compressed), inspect-b.npz (every kind of difference
# from a), inspect-c.npz (a with two values nudged by ~1e-3) were written
# once by numpy (tests/data/inspect-gen.py); inspect-meta.ckpt (a bf16
# tensor and metadata of every type) by tests/data/inspect-meta-gen.c with
# the library's writer. Checkpoints are made here with `ckpt-inspect import`;
# the format's golden files (tests/data/v1-*.crn) are read when present.
# numpy, when /usr/bin/python3 has it, checks export and imports numpy's own
# files; JSON is parsed by /usr/bin/python3 when it exists.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"
DATA="$top_srcdir/tests/data"
PY=/usr/bin/python3
TIME=/usr/bin/time

tap_tmpdir ckpt-inspect-test

TAP_LINES=15

# no_ctrl FILE: no control byte other than newline and tab
no_ctrl() {
  ! od -An -v -tx1 "$1" | tr ' ' '\n' | grep -q -E '^(0[0-8]|0[b-f]|1[0-9a-f]|7f)$'
}
# no_bytes FILE OCTAL-PRINTF-STRING: the byte sequence does not occur
no_bytes() { ! LC_ALL=C grep -q -F -e "$(printf "$2")" "$1"; }
have_python=0
[ -x "$PY" ] && "$PY" -c 'import json, zipfile' 2>/dev/null && have_python=1
have_numpy=0
[ "$have_python" = 1 ] && "$PY" -c 'import numpy' 2>/dev/null && have_numpy=1
# json_ok FILE [PYTHON-EXPRESSION on d]: valid JSON (and the expression holds)
json_ok() {
  if [ "$have_python" = 1 ]; then
    "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if len(sys.argv) < 3 or eval(sys.argv[2]) else 1)' "$@"
  else
    head -c 1 "$1" | grep -q '{' && tail -c 2 "$1" | grep -q '}'
  fi
}
size_of() { wc -c <"$1" | tr -d ' '; }

# ---- usage, help, version ----------------------------------------------------

expect 0 "--help exits 0" "$TOOL" --help
check "--help lists every subcommand" sh -c 'for s in list show diff verify meta recover export import; do grep -q "ckpt-inspect $s" "$1" || exit 1; done' sh "$T/out"
expect 0 "-h exits 0" "$TOOL" -h
expect 0 "help diff exits 0" "$TOOL" help diff
check "help diff describes --atol" out_has "atol"
expect 0 "show --help exits 0" "$TOOL" show --help
check "show --help is show's usage" out_has "usage: ckpt-inspect show"
expect 0 "--version exits 0" "$TOOL" --version
check "--version names the format version" out_has "format 1\."
expect 2 "no arguments: exit 2" "$TOOL"
expect 2 "unknown subcommand: exit 2" "$TOOL" frobnicate x
check "unknown subcommand is named" err_has "frobnicate"
expect 2 "help for an unknown subcommand: exit 2" "$TOOL" help frobnicate
expect 2 "missing argument: exit 2" "$TOOL" list
expect 2 "too many arguments: exit 2" "$TOOL" list a b
expect 2 "unknown option: exit 2" "$TOOL" list --frob x
expect 2 "option of another subcommand: exit 2" "$TOOL" list --atol 1 x
expect 2 "bad --atol value: exit 2" "$TOOL" diff --atol=-1 a b
expect 2 "options before the subcommand are parsed as its options" "$TOOL" --atol 1 list x
check "... and refused where they do not apply" err_has "does not apply"

# ---- import (fixtures) -------------------------------------------------------

A="$T/a.ckpt"
expect 0 "import a stored .npz (numpy.savez)" "$TOOL" import "$DATA/inspect-a.npz" "$A"
check "import reports the tensor count" out_has "imported 21 tensors"
expect 0 "import a deflated .npz (numpy.savez_compressed)" "$TOOL" import "$DATA/inspect-a-deflate.npz" "$T/a-deflate.ckpt"
expect 0 "import b" "$TOOL" import "$DATA/inspect-b.npz" "$T/b.ckpt"
expect 0 "import c" "$TOOL" import "$DATA/inspect-c.npz" "$T/c.ckpt"
expect 0 "import with --compress none" "$TOOL" import --compress none "$DATA/inspect-a.npz" "$T/raw.ckpt"
expect 0 "import with --compress=shuffle" "$TOOL" import --compress=shuffle "$DATA/inspect-a.npz" "$T/shuf.ckpt"
expect 2 "import onto an existing file without --force: exit 2" "$TOOL" import "$DATA/inspect-a.npz" "$A"
check "... and says --force" err_has "force"
expect 0 "import --force replaces it" "$TOOL" import --force "$DATA/inspect-a.npz" "$A"
expect 2 "import --compress bogus: exit 2" "$TOOL" import --compress=bogus "$DATA/inspect-a.npz" "$T/x.ckpt"
expect 2 "import of a missing file: exit 2" "$TOOL" import "$T/nonexistent.npz" "$T/x.ckpt"
check "... names the file" err_has "nonexistent.npz"
printf 'this is not a zip file at all, just text\n' >"$T/text.npz"
expect 2 "import of a non-ZIP file: exit 2" "$TOOL" import "$T/text.npz" "$T/x.ckpt"
check "... says it is not a ZIP" err_has "not a ZIP"
head -c 5000 "$DATA/inspect-a.npz" >"$T/cut.npz"
expect 2 "import of a truncated .npz: exit 2" "$TOOL" import "$T/cut.npz" "$T/x.ckpt"
cp "$DATA/inspect-a.npz" "$T/flip.npz"
chmod u+w "$T/flip.npz"
# offset 200 is inside the data of the first member (dense/kernel.npy)
printf '\132' | dd of="$T/flip.npz" bs=1 seek=200 count=1 conv=notrunc 2>/dev/null
expect 2 "import of an .npz with a corrupt member: exit 2" "$TOOL" import "$T/flip.npz" "$T/x.ckpt"
check "... names the CRC-32 mismatch and the member" sh -c 'grep -q "CRC-32" "$1" && grep -q "dense/kernel.npy" "$1"' sh "$T/err"
check "a failed import leaves no output file" test ! -e "$T/x.ckpt"
check "a failed import leaves no temporary file" sh -c '! ls "$1" | grep -q "x.ckpt"' sh "$T"

# ---- list ------------------------------------------------------------------

expect 0 "list exits 0" "$TOOL" list "$A"
check "list shows names, dtypes and shapes" sh -c 'grep -q "^dense/kernel  *f32  *(4, 3) " "$1" && grep -q "^ints/u64  *u64  *(1,) " "$1" && grep -q "^pi  *f64  *() " "$1" && grep -q "^rank8  *f32  *(1, 1, 1, 1, 1, 1, 1, 2) " "$1" && grep -q "^half  *f16 " "$1" && grep -q "^mask  *bool  *(2, 2) " "$1"' sh "$T/out"
check "list shows raw bytes and the CRC32C" sh -c 'grep -q "^big  *f32  *(40, 30)  *4800 .* [0-9a-f]\{8\} " "$1"' sh "$T/out"
check "list counts 21 tensors" out_has "21 tensors"
expect 0 "list --json exits 0" "$TOOL" list --json "$A"
expect 0 "--json before the subcommand" "$TOOL" --json list "$A"
check "list --json is valid JSON with 21 tensors" json_ok "$T/out" 'd["tensor_count"] == 21 and len(d["tensors"]) == 21 and any(t["name"] == "big" and t["shape"] == [40, 30] and t["raw_bytes"] == 4800 for t in d["tensors"])'
run "$TOOL" list --json "$T/a-deflate.ckpt"
cp "$T/out" "$T/list-deflate.json"
run "$TOOL" list --json "$A"
check "the deflated and stored .npz import to the same tensors (CRC32C)" sh -c 'grep -o "\"crc32c\": \"[0-9a-f]*\"" "$1" >"$1.c"; grep -o "\"crc32c\": \"[0-9a-f]*\"" "$2" >"$2.c"; cmp -s "$1.c" "$2.c"' sh "$T/out" "$T/list-deflate.json"
expect 2 "list of a missing file: exit 2" "$TOOL" list "$T/missing.ckpt"
check "... names the file" err_has "missing.ckpt"
expect 2 "list of a non-checkpoint: exit 2" "$TOOL" list "$T/text.npz"
check "... gives the cairn status text" err_has "malformed or unsupported file"

# Directories and prefixes
mkdir "$T/run"
cp "$A" "$T/run/model.ckpt-1"
cp "$T/b.ckpt" "$T/run/model.ckpt-2"
expect 0 "list of a directory uses its latest checkpoint" "$TOOL" list "$T/run"
check "... which is model.ckpt-2" out_has "model.ckpt-2"
expect 2 "a prefix that is not a file: exit 2" "$TOOL" list "$T/run/model.ckpt"
check "... and the files with that prefix are listed" sh -c 'grep -q "prefix" "$1" && grep -q "model.ckpt-1" "$1" && grep -q "model.ckpt-2" "$1"' sh "$T/err"
expect 2 "a TensorFlow-style .index path: exit 2" "$TOOL" list "$T/run/model.ckpt-1.index"
check "... says cairn uses one file and which" sh -c 'grep -q "one file" "$1" && grep -q "model.ckpt-1" "$1"' sh "$T/err"
mkdir "$T/empty-dir"
expect 2 "a directory without checkpoints: exit 2" "$TOOL" list "$T/empty-dir"

# ---- show ------------------------------------------------------------------

expect 0 "show exits 0" "$TOOL" show "$A" dense/kernel
check "show prints dtype, shape and summary" sh -c 'grep -q "^dense/kernel: f32 (4, 3), 12 elements" "$1" && grep -q "min -9  max 10 " "$1" && grep -q "nan 0  +inf 0  -inf 0" "$1"' sh "$T/out"
# numpy's repr of the fixture (checked against numpy 1.24)
cat >"$T/expect" <<'EOF'
array([[ 5.00e-01, -1.25e+00,  2.00e+00],
       [ 3.00e+00,  1.00e-01, -2.00e-01],
       [ 1.00e-03,  7.00e+00,  8.50e+00],
       [-9.00e+00,  1.00e+01,  0.00e+00]], dtype=float32)
EOF
check "show prints the values as numpy's repr does" sh -c 'tail -n 4 "$1" | cmp -s - "$2"' sh "$T/out" "$T/expect"
run "$TOOL" show "$A" dense/bias
check "show f32 vector" sh -c 'tail -n 1 "$1" | grep -q -x "array(\[0.1, 0.2, 0.3\], dtype=float32)"' sh "$T/out"
run "$TOOL" show "$A" pi
check "show f64 scalar" sh -c 'grep -q "^min 3.141592653589793 " "$1" && tail -n 1 "$1" | grep -q -x "array(3.14159265)"' sh "$T/out"
run "$TOOL" show "$A" half
check "show f16 with NaN and Inf counted" sh -c 'grep -q "nan 1  +inf 1  -inf 1" "$1" && tail -n 1 "$1" | grep -q -x "array(\[ 1. , -2.5,  inf, -inf,  nan\], dtype=float16)"' sh "$T/out"
run "$TOOL" show "$A" ints/i64
check "show i64 extremes exactly" sh -c 'grep -q "min -9223372036854775808  max 9223372036854775807" "$1" && tail -n 1 "$1" | grep -q -x "array(\[-9223372036854775808,  9223372036854775807\])"' sh "$T/out"
run "$TOOL" show "$A" ints/u64
check "show u64" sh -c 'tail -n 1 "$1" | grep -q -x "array(\[18446744073709551615\], dtype=uint64)"' sh "$T/out"
run "$TOOL" show "$A" ints/i8
check "show i8" sh -c 'tail -n 1 "$1" | grep -q -x "array(\[-128,    0,  127\], dtype=int8)"' sh "$T/out"
run "$TOOL" show "$A" bigendian
check "show a big-endian import (converted)" sh -c 'tail -n 1 "$1" | grep -q -x "array(\[ 1, -2,  3\], dtype=int32)"' sh "$T/out"
run "$TOOL" show "$A" fortran
check "show a Fortran-order import (transposed to C order)" sh -c 'tail -n 2 "$1" | tr -d "\n" | grep -q -x "array(\[\[0., 1., 2.\],       \[3., 4., 5.\]\])"' sh "$T/out"
run "$TOOL" show "$A" mask
check "show bool" sh -c 'grep -q "true 2  false 2" "$1" && tail -n 2 "$1" | tr -d "\n" | grep -q -x "array(\[\[ True, False\],       \[False,  True\]\])"' sh "$T/out"
run "$TOOL" show "$A" empty
check "show an empty tensor" sh -c 'tail -n 1 "$1" | grep -q -x "array(\[\], shape=(0, 3), dtype=float32)"' sh "$T/out"
run "$TOOL" show "$A" rank8
check "show rank 8" sh -c 'tail -n 1 "$1" | grep -q -x "array(\[\[\[\[\[\[\[\[0., 1.\]\]\]\]\]\]\]\], dtype=float32)"' sh "$T/out"
run "$TOOL" show "$A" tiny
check "show switches to scientific notation as numpy does" sh -c 'tail -n 1 "$1" | grep -q -x "array(\[ 1.0e-05,  2.5e+00, -3.0e+02\])"' sh "$T/out"
expect 0 "show of a large tensor" "$TOOL" show "$A" big
check "... elides the middle (numpy summary)" sh -c 'grep -q "^       \.\.\.,$" "$1" && grep -q "^array(\[\[0.00000e+00, 1.25000e-01, 2.50000e-01, \.\.\., 3.37500e+00,$" "$1" && test "$(wc -l <"$1")" -eq 15' sh "$T/out"
expect 0 "show --all of a large tensor" "$TOOL" show --all "$A" big
check "... prints every value" sh -c '! grep -q "\.\.\." "$1" && grep -q " 1.49875e+02\]\],$" "$1" && grep -q "^      dtype=float32)$" "$1" && grep -q " 7.51250e+01," "$1"' sh "$T/out"
expect 2 "show of a missing tensor: exit 2" "$TOOL" show "$A" no/such/tensor
check "... names the tensor and the status" sh -c 'grep -q "no/such/tensor" "$1" && grep -q "not found" "$1"' sh "$T/err"
expect 2 "show of a missing file: exit 2" "$TOOL" show "$T/missing.ckpt" big

# ---- diff ------------------------------------------------------------------

expect 0 "diff of a checkpoint with itself: exit 0" "$TOOL" diff "$A" "$A"
check "... 21 same" out_has "21 same, 0 different"
expect 0 "diff of the stored and deflated imports: exit 0" "$TOOL" diff "$A" "$T/a-deflate.ckpt"
expect 0 "diff across compression modes: exit 0" "$TOOL" diff "$T/raw.ckpt" "$T/shuf.ckpt"
expect 1 "diff a b: exit 1" "$TOOL" diff "$A" "$T/b.ckpt"
check "... added, removed, dtype, shape and values" sh -c 'grep -q "^added: *added  i32 (3,)" "$1" && grep -q "^removed: *zeros  f32 (1000,)" "$1" && grep -q "^dtype: *dense/bias  f32 (3,) -> f64 (3,)" "$1" && grep -q "^shape: *mask  bool (2, 2) -> (4,)" "$1" && grep -q "^values: *dense/kernel  2 of 12 elements differ, max abs diff 0.5, max rel diff 0.2$" "$1"' sh "$T/out"
expect 1 "diff --json a b: exit 1" "$TOOL" diff --json "$A" "$T/b.ckpt"
check "... valid JSON with each kind of change" json_ok "$T/out" 'not d["same"] and [x["name"] for x in d["added"]] == ["added"] and [x["name"] for x in d["removed"]] == ["zeros"] and sorted(x["change"] for x in d["changed"]) == ["dtype", "shape", "values"] and [x for x in d["changed"] if x["change"] == "values"][0]["max_abs_diff"] == 0.5'
expect 1 "diff a c (values nudged ~1e-3): exit 1" "$TOOL" diff "$A" "$T/c.ckpt"
check "... two tensors with value changes" sh -c 'grep -q "^values: *big  1 of 1200 elements differ" "$1" && grep -q "^values: *dense/kernel  1 of 12" "$1"' sh "$T/out"
expect 0 "diff --rtol 1e-2 a c: equal within tolerance, exit 0" "$TOOL" diff --rtol 1e-2 "$A" "$T/c.ckpt"
check "... listed as close" out_has "^close: *big"
expect 1 "diff --atol=1e-2 a c: big still differs (0.15), exit 1" "$TOOL" diff --atol=1e-2 "$A" "$T/c.ckpt"
check "... only big" sh -c 'grep -q "^values: *big" "$1" && grep -q "^close: *dense/kernel" "$1"' sh "$T/out"
expect 0 "diff --json --atol 1 --rtol 0 a c: exit 0" "$TOOL" diff --json --atol 1 --rtol 0 "$A" "$T/c.ckpt"
check "... valid JSON, same" json_ok "$T/out" 'd["same"] and d["n_different"] == 0 and len(d["close"]) == 2'
expect 2 "diff with a missing file: exit 2" "$TOOL" diff "$A" "$T/missing.ckpt"
expect 2 "diff with a non-checkpoint: exit 2" "$TOOL" diff "$A" "$T/text.npz"

# ---- verify ------------------------------------------------------------------

expect 0 "verify of a good file: exit 0" "$TOOL" verify "$A"
check "... says OK" out_has ": OK"
expect 0 "verify --json of a good file: exit 0" "$TOOL" verify --json "$A"
check "... valid JSON, ok" json_ok "$T/out" 'd["ok"] and not d["incomplete"] and d["tensor_count"] == 21'
expect 0 "verify of a directory (its latest checkpoint)" "$TOOL" verify "$T/run"

# A corrupt byte inside tensor data (raw.ckpt has no compression: the
# middle of the file is the data of 'big' or 'zeros').
R="$T/raw.ckpt"
SZ=$(size_of "$R")
cp "$R" "$T/corrupt.ckpt"
off=$((SZ / 3))
printf '\132' | dd of="$T/corrupt.ckpt" bs=1 seek=$off count=1 conv=notrunc 2>/dev/null
check "the corrupt copy differs from the original" sh -c '! cmp -s "$1" "$2"' sh "$R" "$T/corrupt.ckpt"
expect 1 "verify of a corrupt file: exit 1" "$TOOL" verify "$T/corrupt.ckpt"
check "... says BAD and names a tensor that cannot be read" sh -c 'grep -q "BAD" "$1" && grep -q "cannot be read intact" "$1"' sh "$T/out"
expect 1 "verify --json of a corrupt file: exit 1" "$TOOL" verify --json "$T/corrupt.ckpt"
check "... valid JSON, not ok, bad tensors named" json_ok "$T/out" 'not d["ok"] and d["status"] != "CAIRN_OK" and len(d["bad_tensors"]) >= 1'
# diff decodes every tensor: a corrupt copy is an error, not "same" (tests/inspect-corrupt.sh)
expect 2 "diff of the corrupt copy reports it (exit 2)" "$TOOL" diff "$R" "$T/corrupt.ckpt"
expect 2 "show of the corrupted tensor: exit 2" sh -c '"$1" show "$2" big && "$1" show "$2" zeros' sh "$TOOL" "$T/corrupt.ckpt"

# A truncated file (a save killed half way)
head -c $((SZ * 6 / 10)) "$R" >"$T/trunc.ckpt"
expect 1 "verify of a truncated file: exit 1" "$TOOL" verify "$T/trunc.ckpt"
check "... says INCOMPLETE and suggests recover" sh -c 'grep -q "INCOMPLETE" "$1" && grep -q "recover" "$1"' sh "$T/out"
expect 1 "verify --json of a truncated file: exit 1" "$TOOL" verify --json "$T/trunc.ckpt"
check "... valid JSON, incomplete" json_ok "$T/out" 'd["incomplete"] and not d["ok"] and d["status"] == "CAIRN_E_TRUNCATED" and "recover" in d["hint"]'
expect 2 "list of a truncated file: exit 2" "$TOOL" list "$T/trunc.ckpt"
check "... explains it is incomplete and suggests recover" sh -c 'grep -q "incomplete" "$1" && grep -q "recover" "$1"' sh "$T/err"
expect 2 "verify of a missing file: exit 2" "$TOOL" verify "$T/missing.ckpt"
expect 1 "verify of a file that is not a checkpoint: exit 1" "$TOOL" verify "$T/text.npz"

# ---- an .npz read as a checkpoint (cairn_ckpt_open's npz backend) ----------------
expect 0 "list of an .npz: exit 0" "$TOOL" list "$DATA/inspect-a.npz"
check "... says NumPy .npz and counts its 21 tensors" out_has "NumPy .npz, 21 tensors"
check "... names its tensors without .npy" sh -c 'grep -q "^dense/kernel  *f32  *(4, 3) " "$1" && grep -q "^fortran  *f64  *(2, 3) " "$1" && ! grep -q "\.npy" "$1"' sh "$T/out"
expect 0 "verify of an .npz: exit 0" "$TOOL" verify "$DATA/inspect-a.npz"
check "... every member's CRC-32 checked" out_has "OK (NumPy .npz, 21 tensors; every checksum and rule verified)"
run "$TOOL" show "$A" fortran
cp "$T/out" "$T/show-ckpt"
expect 0 "show of a Fortran-order .npz tensor: exit 0" "$TOOL" show "$DATA/inspect-a.npz" fortran
check "... the same values as the imported checkpoint's" sh -c 'tail -n +2 "$1" >"$1.v"; tail -n +2 "$2" >"$2.v"; cmp -s "$1.v" "$2.v"' sh "$T/show-ckpt" "$T/out"
expect 0 "diff of the .npz with its import: exit 0 (same)" "$TOOL" diff "$A" "$DATA/inspect-a.npz"
check "... 21 same" out_has "21 same, 0 different"
expect 0 "diff of the deflated .npz with its import: exit 0 (same)" "$TOOL" diff "$A" "$DATA/inspect-a-deflate.npz"
expect 1 "verify of an .npz with a corrupt member: exit 1" "$TOOL" verify "$T/flip.npz"
check "... BAD, naming the CRC-32 mismatch and the member" sh -c 'grep -q "BAD" "$1" && grep -q "CRC-32" "$1" && grep -q "dense/kernel.npy" "$1"' sh "$T/out"
expect 2 "list of a truncated .npz: exit 2" "$TOOL" list "$T/cut.npz"
check "... names the file and says it is not a whole ZIP" sh -c 'grep -q "cut.npz" "$1" && grep -q "ZIP" "$1"' sh "$T/err"

# latest checkpoint with a newest that is cut short: falls back, says why
mkdir "$T/run2"
cp "$A" "$T/run2/model.ckpt-1"
cp "$T/trunc.ckpt" "$T/run2/model.ckpt-2"
expect 0 "a directory whose newest checkpoint is incomplete" "$TOOL" list "$T/run2"
check "... uses the previous one and says why" sh -c 'grep -q "model.ckpt-1" "$1" && grep -q "model.ckpt-2" "$2"' sh "$T/out" "$T/err"

# ---- recover ------------------------------------------------------------------

expect 0 "recover a truncated file: exit 0" "$TOOL" recover "$T/trunc.ckpt" "$T/salvaged.ckpt"
check "... prints the counts" sh -c 'grep -q "^recovered [1-9][0-9]* tensors\{0,1\}, lost [0-9]" "$1"' sh "$T/out"
expect 0 "the salvaged file verifies" "$TOOL" verify "$T/salvaged.ckpt"
expect 1 "the salvaged file lacks the tensors after the cut (diff exit 1)" "$TOOL" diff "$R" "$T/salvaged.ckpt"
check "... which are reported removed, none changed" sh -c 'grep -q "^removed:" "$1" && ! grep -q "^values:" "$1" && ! grep -q "^added:" "$1"' sh "$T/out"
expect 2 "recover onto an existing file without --force: exit 2" "$TOOL" recover "$T/trunc.ckpt" "$T/salvaged.ckpt"
expect 0 "recover --force replaces it" "$TOOL" recover --force "$T/trunc.ckpt" "$T/salvaged.ckpt"
expect 0 "recover of a complete file copies it" "$TOOL" recover "$A" "$T/copy.ckpt"
check "... all 21 tensors, none lost" out_has "recovered 21 tensors, lost 0"
expect 0 "... and the copy has the same tensors" "$TOOL" diff "$A" "$T/copy.ckpt"
expect 2 "recover of a missing file: exit 2" "$TOOL" recover "$T/missing.ckpt" "$T/x.ckpt"
expect 2 "recover of a file that is not a checkpoint: exit 2" "$TOOL" recover "$T/text.npz" "$T/x.ckpt"
expect 2 "recover onto its own input: exit 2" "$TOOL" recover --force "$T/trunc.ckpt" "$T/trunc.ckpt"

# ---- meta ------------------------------------------------------------------

expect 0 "meta of a file without metadata: exit 0" "$TOOL" meta "$A"
check "... 0 metadata keys" out_has "0 metadata keys"
M="$DATA/inspect-meta.ckpt"
if [ -f "$M" ]; then
  expect 0 "meta: exit 0" "$TOOL" meta "$M"
  check "meta shows every type" sh -c 'grep -q "^global_step  *u64  *1000$" "$1" && grep -q "^offset  *i64  *-42$" "$1" && grep -q "^lr  *f64  *0.001$" "$1" && grep -q "^done  *bool  *true$" "$1" && grep -q "^rng  *bytes  *\[40 bytes\] 000102" "$1" && grep -q "truncated" "$1"' sh "$T/out"
  check "meta escapes control characters in strings" sh -c 'grep -q "^note  *str  *\"evil\\\\x1b\[31mred\\\\nline\\\\u202e\"$" "$1"' sh "$T/out"
  check "meta output has no raw control bytes" no_ctrl "$T/out"
  expect 0 "meta --all shows every byte" "$TOOL" meta --all "$M"
  check "... all 40" out_has "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627$"
  expect 0 "meta --json: exit 0" "$TOOL" meta --json "$M"
  check "... valid JSON with typed values" json_ok "$T/out" '{m["key"]: m["value"] for m in d["meta"]} == {"done": True, "global_step": 1000, "lr": 0.001, "note": "evil\x1b[31mred\nline\u202e", "offset": -42, "rng": bytes(range(40)).hex()}'
  check "... escapes the control characters" sh -c 'grep -q "evil\\\\u001b\[31mred\\\\nline\\\\u202e" "$1"' sh "$T/out"
  run "$TOOL" show "$M" w_bf16
  check "show bf16 (converted to float for display)" sh -c 'grep -q "^w_bf16: bf16 (2, 3)" "$1" && grep -q "nan 1  +inf 1  -inf 0" "$1" && tail -n 2 "$1" | tr -d "\n" | grep -q -x "array(\[\[ 1.00e+00, -2.50e+00,  3.14e+00\],       \[ 9.99e-04,       inf,       nan\]\], dtype=bfloat16)"' sh "$T/out"
  expect 0 "export of a bf16 tensor" "$TOOL" export "$M" "$T/meta.npz"
  check "... notes the widening to float32" sh -c 'grep -q "bf16 tensor .w_bf16. exported as float32" "$1"' sh "$T/err"
  expect 0 "... and the export imports back" "$TOOL" import "$T/meta.npz" "$T/meta-rt.ckpt"
  run "$TOOL" show "$T/meta-rt.ckpt" w_bf16
  check "... as f32 with the same values" sh -c 'grep -q "^w_bf16: f32 (2, 3)" "$1" && tail -n 2 "$1" | tr -d "\n" | grep -q -x "array(\[\[ 1.000000e+00, -2.500000e+00,  3.140625e+00\],       \[ 9.994507e-04,           inf,           nan\]\], dtype=float32)"' sh "$T/out"
else
  for t in 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do skip "tests/data/inspect-meta.ckpt missing"; done
fi
expect 2 "meta of a missing file: exit 2" "$TOOL" meta "$T/missing.ckpt"

# ---- control characters (rule 35) ----------------------------------------------

run "$TOOL" list "$A"
check "a bidi override in a tensor name is escaped" sh -c 'grep -q "^bidi\\\\u202eevil " "$1"' sh "$T/out"
check "... and never written raw" no_bytes "$T/out" '\342\200\256'
run "$TOOL" list --json "$A"
check "... nor in JSON" sh -c 'grep -q "\"bidi\\\\u202eevil\"" "$1"' sh "$T/out"
check "... whose JSON decodes to the real name" json_ok "$T/out" '"bidi\u202eevil" in [t["name"] for t in d["tensors"]]'
expect 0 "show accepts a name typed in its escaped form" "$TOOL" show "$A" 'bidi\u202eevil'
ESC=$(printf '\033')
cp "$A" "$T/x${ESC}[31mred.ckpt"
expect 0 "list of a path with an escape character" "$TOOL" list "$T/x${ESC}[31mred.ckpt"
check "... prints it escaped" sh -c 'grep -q "x\\\\x1b\[31mred.ckpt" "$1"' sh "$T/out"
check "... with no raw control byte" no_ctrl "$T/out"
expect 2 "show of a name with control characters: exit 2" "$TOOL" show "$A" "$(printf 'a\033]0;owned\007b')"
check "... the error escapes them" sh -c 'grep -q "a\\\\x1b\]0;owned\\\\x07b" "$1"' sh "$T/err"
check "... with no raw control byte" no_ctrl "$T/err"
expect 2 "an unknown option with control characters: exit 2" "$TOOL" list "$(printf -- '--\033[2J')" x
check "... is escaped" no_ctrl "$T/err"

# ---- export ------------------------------------------------------------------

expect 0 "export: exit 0" "$TOOL" export "$A" "$T/a.npz"
check "... reports 21 tensors" out_has "exported 21 tensors"
check "... writes a ZIP (PK signature)" sh -c 'head -c 2 "$1" | grep -q PK' sh "$T/a.npz"
check "... leaves no temporary file" sh -c '! ls "$1" | grep -q "a.npz.tmp"' sh "$T"
expect 2 "export onto an existing file without --force: exit 2" "$TOOL" export "$A" "$T/a.npz"
expect 0 "export --force" "$TOOL" export --force "$A" "$T/a.npz"
expect 2 "export of a missing checkpoint: exit 2" "$TOOL" export "$T/missing.ckpt" "$T/m.npz"
expect 2 "export into a missing directory: exit 2" "$TOOL" export "$A" "$T/no/such/dir/a.npz"
expect 2 "export of a corrupt checkpoint: exit 2" "$TOOL" export "$T/corrupt.ckpt" "$T/corrupt.npz"
check "... leaves no output" test ! -e "$T/corrupt.npz"

# Round trip through our own export, always
expect 0 "import of our own export" "$TOOL" import "$T/a.npz" "$T/a-rt.ckpt"
expect 0 "round trip export/import keeps every tensor (diff exit 0)" "$TOOL" diff "$A" "$T/a-rt.ckpt"
check "... bit for bit (no 'close')" sh -c '! grep -q "^close:" "$1" && grep -q "21 same, 0 different" "$1"' sh "$T/out"
expect 0 "export of the round-tripped checkpoint" "$TOOL" export "$T/a-rt.ckpt" "$T/a-rt.npz"
check "... is byte-identical to the first export (reproducible)" cmp -s "$T/a.npz" "$T/a-rt.npz"

# The format's golden files, when present: verify, list --json, meta, export
for g in "$DATA"/v1-*.crn; do
  [ -f "$g" ] || continue
  b=$(basename "$g")
  expect 0 "verify golden $b" "$TOOL" verify "$g"
  expect 0 "list --json golden $b" "$TOOL" list --json "$g"
  check "... valid JSON" json_ok "$T/out"
  expect 0 "meta --json golden $b" "$TOOL" meta --json "$g"
  check "... valid JSON" json_ok "$T/out"
  expect 0 "export golden $b" "$TOOL" export "$g" "$T/$b.npz"
  if [ "$have_numpy" = 1 ]; then
    check "... numpy.load reads it" "$PY" -c 'import numpy, sys; z = numpy.load(sys.argv[1]); [z[k] for k in z.files]' "$T/$b.npz"
  else
    skip "numpy not installed"
  fi
done

# ---- numpy -------------------------------------------------------------------

if [ "$have_numpy" = 1 ]; then
  check "numpy.load reads the export: every array, dtype and value" "$PY" -c '
import sys, numpy as np
a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
assert sorted(a.files) == sorted(b.files), (a.files, b.files)
for k in a.files:
    x, y = a[k], b[k]
    assert x.shape == y.shape, k
    assert x.dtype.newbyteorder("=") == y.dtype.newbyteorder("="), (k, x.dtype, y.dtype)
    assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), k
    assert y.flags.c_contiguous
' "$DATA/inspect-a.npz" "$T/a.npz"
  check "numpy writes random arrays of every dtype (savez and savez_compressed)" "$PY" -c '
import sys, numpy as np
r = np.random.default_rng(7)
d = {}
for t in ["f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]:
    for rank in range(0, 5):
        shape = tuple(int(s) for s in r.integers(0, 4, rank))
        x = r.standard_normal(shape) * 100
        d["%s/r%d" % (t, rank)] = x.astype(t)
d["bool"] = r.integers(0, 2, (3, 5)).astype(bool)
d["layer.0/weight"] = r.standard_normal((64, 33)).astype("f4")
d["be/f8"] = np.arange(5, dtype=">f8")
d["fortran/3d"] = np.asfortranarray(np.arange(24, dtype="i4").reshape(2, 3, 4))
np.savez(sys.argv[1], **d)
np.savez_compressed(sys.argv[2], **d)
' "$T/np.npz" "$T/npc.npz"
  expect 0 "import of numpy.savez output" "$TOOL" import "$T/np.npz" "$T/np.ckpt"
  expect 0 "import of numpy.savez_compressed output" "$TOOL" import "$T/npc.npz" "$T/npc.ckpt"
  expect 0 "... the two imports are the same" "$TOOL" diff "$T/np.ckpt" "$T/npc.ckpt"
  expect 0 "export of the numpy import" "$TOOL" export "$T/np.ckpt" "$T/np-rt.npz"
  check "numpy -> cairn -> numpy keeps every array (C order, values, dtypes)" "$PY" -c '
import sys, numpy as np
a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
assert sorted(a.files) == sorted(b.files)
for k in a.files:
    x, y = a[k], b[k]
    assert x.shape == y.shape and x.dtype.newbyteorder("=") == y.dtype.newbyteorder("="), k
    assert np.array_equal(x, y) and (y.ndim < 2 or y.flags.c_contiguous), k
' "$T/np.npz" "$T/np-rt.npz"
  check "show prints every fixture tensor exactly as numpy's repr" sh -c '
    for name in dense/kernel dense/bias big pi half ints/i8 ints/i16 ints/i32 ints/i64 ints/u8 ints/u16 ints/u32 ints/u64 mask empty rank8 zeros tiny fortran bigendian; do
      "$1" show "$2" "$name" | sed 1,2d >"$4/mine" || exit 1
      "$5" -c "import numpy, sys; print(repr(numpy.load(sys.argv[1])[sys.argv[2]]))" "$3" "$name" >"$4/numpy" || exit 1
      cmp -s "$4/mine" "$4/numpy" || { echo "# $name differs"; exit 1; }
    done' sh "$TOOL" "$A" "$DATA/inspect-a.npz" "$T" "$PY"
  check "show --all prints as numpy's repr with no threshold" sh -c '
    "$1" show --all "$2" big | sed 1,2d >"$4/mine" &&
    "$5" -c "import numpy, sys; numpy.set_printoptions(threshold=sys.maxsize); print(repr(numpy.load(sys.argv[1])[\"big\"]))" "$3" >"$4/numpy" &&
    cmp -s "$4/mine" "$4/numpy"' sh "$TOOL" "$A" "$DATA/inspect-a.npz" "$T" "$PY"
  "$PY" -c '
import numpy as np, sys
np.savez(sys.argv[1], i=np.array([2**62, 5], "i8"), f=np.array([np.nan, 1.0, np.inf]), u=np.array([2**64 - 1], "u8"))
np.savez(sys.argv[2], i=np.array([2**62 + 1, 5], "i8"), f=np.array([np.nan, np.nan, np.inf]), u=np.array([2**64 - 2], "u8"))
' "$T/x1.npz" "$T/x2.npz"
  "$TOOL" import "$T/x1.npz" "$T/x1.ckpt" >/dev/null && "$TOOL" import "$T/x2.npz" "$T/x2.ckpt" >/dev/null
  expect 1 "diff sees a difference of 1 in 2^62 (i64) and in u64" "$TOOL" diff "$T/x1.ckpt" "$T/x2.ckpt"
  check "... exactly, and NaN on one side only" sh -c 'grep -q "^values: *i  1 of 2 elements differ, max abs diff 1," "$1" && grep -q "^values: *u  1 of 1 elements differ, max abs diff 1," "$1" && grep -q "^values: *f  1 of 3 elements differ (1 NaN on one side only)" "$1"' sh "$T/out"
  expect 0 "diff: NaN equals NaN, inf equals inf" "$TOOL" diff "$T/x1.ckpt" "$T/x1.ckpt"
  "$PY" -c 'import numpy as np, sys; np.savez(sys.argv[1], z=np.array([1j, 2]))' "$T/complex.npz"
  expect 2 "import of an unsupported dtype (complex): exit 2" "$TOOL" import "$T/complex.npz" "$T/x.ckpt"
  check "... names the member and the dtype" sh -c 'grep -q "z.npy" "$1" && grep -q "<c16" "$1"' sh "$T/err"
  "$PY" -c 'import numpy as np, sys; np.savez(sys.argv[1], z=np.zeros((1,) * 9, "f4"))' "$T/rank9.npz"
  expect 2 "import of a rank-9 array: exit 2" "$TOOL" import "$T/rank9.npz" "$T/x.ckpt"
  "$PY" -c 'import numpy as np, sys; np.savez(sys.argv[1], o=np.array([None, 1], dtype=object))' "$T/object.npz" 2>/dev/null
  expect 2 "import of an object array (pickle): exit 2" "$TOOL" import "$T/object.npz" "$T/x.ckpt"
else
  for t in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do skip "numpy not installed"; done
fi

# Hostile ZIPs, made with Python's zipfile (no numpy needed)
if [ "$have_python" = 1 ]; then
  "$PY" -W ignore -c '
import struct, sys, zipfile
d = sys.argv[1]
hdr = b"{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: (2,), }"
hdr += b" " * (63 - 10 - len(hdr)) + b"\n"
npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + struct.pack("<2f", 1.5, -2.0)
def mk(name, members, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(d + "/" + name, "w", compression=compression) as z:
        for n, b in members:
            z.writestr(n, b)
mk("ok.npz", [("w.npy", npy)])
mk("slip.npz", [("../evil.npy", npy)])
mk("abs.npz", [("/etc/evil.npy", npy)])
mk("dup.npz", [("a.npy", npy), ("a.npy", npy)])
mk("hdr.npz", [("h.npy", npy.replace(b"fortran_order", b"fortran_ordeX"))])
mk("short.npz", [("s.npy", npy[:-4])])
mk("bzip.npz", [("b.npy", npy)], zipfile.ZIP_BZIP2)
mk("other.npz", [("README.txt", b"hello"), ("w.npy", npy)])
# a deflated member that inflates past its declared size (both headers patched)
h2 = hdr.replace(b"(2,)", b"(262144,)")
big = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h2)) + h2 + bytes(1 << 20)
mk("bomb.npz", [("z.npy", big)], zipfile.ZIP_DEFLATED)
b = bytearray(open(d + "/bomb.npz", "rb").read())
struct.pack_into("<I", b, 22, 1000)
struct.pack_into("<I", b, b.index(b"PK\x01\x02") + 24, 1000)
open(d + "/bomb.npz", "wb").write(b)
' "$T"
  expect 0 "import of a minimal ZIP written by Python's zipfile" "$TOOL" import "$T/ok.npz" "$T/ok.ckpt"
  run "$TOOL" show "$T/ok.ckpt" w
  check "... with the right values" sh -c 'tail -n 1 "$1" | grep -q -x "array(\[ 1.5, -2. \], dtype=float32)"' sh "$T/out"
  expect 2 "import refuses a member named ../evil.npy" "$TOOL" import "$T/slip.npz" "$T/x.ckpt"
  check "... as an unsafe name" err_has "unsafe name"
  expect 2 "import refuses an absolute member name" "$TOOL" import "$T/abs.npz" "$T/x.ckpt"
  expect 2 "import refuses duplicate member names" "$TOOL" import "$T/dup.npz" "$T/x.ckpt"
  check "... naming the duplicate" err_has "appears twice"
  expect 2 "import refuses a .npy header with an unexpected key" "$TOOL" import "$T/hdr.npz" "$T/x.ckpt"
  expect 2 "import refuses .npy data shorter than its shape" "$TOOL" import "$T/short.npz" "$T/x.ckpt"
  check "... saying so" err_has "not fully written"
  expect 2 "import refuses an unsupported compression method" "$TOOL" import "$T/bzip.npz" "$T/x.ckpt"
  check "... naming it" err_has "method 12"
  expect 2 "import refuses a member that inflates past its declared size" "$TOOL" import "$T/bomb.npz" "$T/x.ckpt"
  check "... saying so" err_has "more than its declared"
  expect 0 "import skips members that are not .npy" "$TOOL" import "$T/other.npz" "$T/other.ckpt"
  check "... with a warning naming them" err_has "skipping member .README.txt."
  check "no failed import left a file behind" test ! -e "$T/x.ckpt"
else
  for t in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17; do skip "no /usr/bin/python3 to write hostile ZIPs"; done
fi

# The ZIP layer is libzip: ZIP64 archives, end records checked before
# libzip allocates from them, damage named with the member, Fortran order.
if [ "$have_python" = 1 ]; then
  "$PY" -W ignore -c '
import struct, sys, zipfile, zlib
d = sys.argv[1]
def npy(descr, shape, data, fortran=False):
    h = "{\x27descr\x27: \x27%s\x27, \x27fortran_order\x27: %s, \x27shape\x27: (%s), }" % (
        descr, fortran, "".join("%d," % k for k in shape))
    h += " " * (127 - 10 - len(h)) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data
w = npy("<f4", (2,), struct.pack("<2f", 1.5, -2.0))
def mk(name, members, compression=zipfile.ZIP_STORED, zip64=False):
    with zipfile.ZipFile(d + "/" + name, "w", compression=compression) as z:
        for n, b in members:
            with z.open(n, "w", force_zip64=zip64) as f:
                f.write(b)
# with_end64(buf, n): the same archive ended by a ZIP64 end record and
# locator claiming n members (the classic end record says "see ZIP64")
def with_end64(buf, n=None):
    e = buf.rindex(b"PK\x05\x06")
    cnt, cd_size, cd_off = struct.unpack_from("<HII", buf, e + 10)
    n = cnt if n is None else n
    e64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_off)
    loc = struct.pack("<IIQI", 0x07064B50, 0, e, 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return buf[:e] + e64 + loc + end
mk("z64.npz", [("w.npy", w), ("v.npy", w)], zip64=True)
b = open(d + "/z64.npz", "rb").read()
open(d + "/z64.npz", "wb").write(with_end64(b))
open(d + "/z64-hostile.npz", "wb").write(with_end64(b, 1 << 40))
open(d + "/z64-nofit.npz", "wb").write(with_end64(b, 999999))
mk("notnpy.npz", [("w.npy", b"hello, not an array")])
# the second directory entry points at the first member: the first
# member, its bytes read twice (the zip-bomb trick)
mk("overlap.npz", [("a.npy", w), ("b.npy", w)])
b = bytearray(open(d + "/overlap.npz", "rb").read())
struct.pack_into("<I", b, b.rindex(b"PK\x01\x02") + 42, 0)
open(d + "/overlap.npz", "wb").write(b)
# a deflated member whose CRC-32 (in both headers) is wrong
mk("crc.npz", [("w.npy", w)], zipfile.ZIP_DEFLATED)
b = bytearray(open(d + "/crc.npz", "rb").read())
struct.pack_into("<I", b, 14, zlib.crc32(w) ^ 1)
struct.pack_into("<I", b, b.index(b"PK\x01\x02") + 16, zlib.crc32(w) ^ 1)
open(d + "/crc.npz", "wb").write(b)
# the central directory says deflate, the local header stored
mk("damaged.npz", [("w.npy", w)])
b = bytearray(open(d + "/damaged.npz", "rb").read())
struct.pack_into("<H", b, b.index(b"PK\x01\x02") + 10, 8)
open(d + "/damaged.npz", "wb").write(b)
# Fortran order: (2, 3) holding 0..5 in C order; zeros of 32 MiB (the
# limit: transposed in memory) and of 32 MiB + 8 KiB (refused)
mk("fortran.npz", [("f.npy", npy("<f4", (2, 3), struct.pack("<6f", 0, 3, 1, 4, 2, 5), True))])
mk("fortran-limit.npz", [("f.npy", npy("<f4", (2048, 4096), bytes(32 << 20), True))], zipfile.ZIP_DEFLATED)
mk("fortran-big.npz", [("f.npy", npy("<f4", (2049, 4096), bytes(2049 * 4096 * 4), True))], zipfile.ZIP_DEFLATED)
' "$T"
  expect 0 "import of a ZIP64 archive (ZIP64 end record, ZIP64 extra fields)" "$TOOL" import "$T/z64.npz" "$T/z64.ckpt"
  run "$TOOL" show "$T/z64.ckpt" v
  check "... with the right values" sh -c 'tail -n 1 "$1" | grep -q -x "array(\[ 1.5, -2. \], dtype=float32)"' sh "$T/out"
  expect 2 "a ZIP64 end record claiming 2^40 members is refused before libzip reads it" "$TOOL" import "$T/z64-hostile.npz" "$T/x.ckpt"
  check "... naming the count and the limit" err_has "claims 1099511627776 members, over the limit of 1000000"
  expect 2 "a ZIP64 end record claiming more members than its directory can hold" "$TOOL" import "$T/z64-nofit.npz" "$T/x.ckpt"
  check "... saying so" err_has "999999 members cannot fit in a"
  expect 2 "members that overlap are refused" "$TOOL" import "$T/overlap.npz" "$T/x.ckpt"
  check "... saying so" err_has "members overlap"
  expect 2 "a member named .npy that is not a .npy array" "$TOOL" import "$T/notnpy.npz" "$T/x.ckpt"
  check "... names the member: not a .npy array" err_has "member 'w.npy': not a .npy array"
  expect 2 "a deflated member with a bad CRC-32" "$TOOL" import "$T/crc.npz" "$T/x.ckpt"
  check "... is reported as corrupt, naming the member" err_has "member 'w.npy': CRC-32 .* does not match the stored"
  expect 2 "a damaged ZIP (directory and local header disagree)" "$TOOL" import "$T/damaged.npz" "$T/x.ckpt"
  check "... says so" err_has "a damaged ZIP"
  run "$TOOL" import "$T/hdr.npz" "$T/x.ckpt"
  check "a bad .npy header is named: the member and the unexpected key" err_has "member 'h.npy': .npy header has an unexpected key 'fortran_ordeX'"
  run "$TOOL" import "$T/cut.npz" "$T/x.ckpt"
  check "a truncated .npz: not a ZIP, no end record" err_has "not a ZIP (.npz) file: no end-of-central-directory record"
  expect 0 "import of a Fortran-order (2, 3) array" "$TOOL" import "$T/fortran.npz" "$T/fortran.ckpt"
  run "$TOOL" show "$T/fortran.ckpt" f
  check "... transposed to C order" sh -c 'tail -n 2 "$1" | tr -d "\n" | grep -q -F "array([[0., 1., 2.],       [3., 4., 5.]], dtype=float32)"' sh "$T/out"
  if "$TIME" -v true >/dev/null 2>&1; then
    "$TIME" -v -o "$T/time" "$TOOL" import "$T/fortran-limit.npz" "$T/fl.ckpt" >"$T/out" 2>"$T/err"
    rc=$?
    rss=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): *//p' "$T/time")
    bound=$((4 * ($(wc -c <"$T/fortran-limit.npz") + 1023) / 1024 + 65536))
    check "a 32 MiB Fortran-order array (the limit) imports within 4 x input + 64 MiB (peak ${rss:-?} KiB <= $bound KiB)" \
      sh -c '[ "$1" -eq 0 ] && [ -n "$2" ] && [ "$2" -le "$3" ]' sh "$rc" "$rss" "$bound"
  else
    expect 0 "a 32 MiB Fortran-order array (the limit) imports" "$TOOL" import "$T/fortran-limit.npz" "$T/fl.ckpt"
  fi
  expect 2 "a Fortran-order array over 32 MiB is refused" "$TOOL" import "$T/fortran-big.npz" "$T/x.ckpt"
  check "... saying why and what to do" sh -c 'grep -q "Fortran-order array of rank 2 and 33570816 bytes" "$1" && grep -q "ascontiguousarray" "$1"' sh "$T/err"
  check "no failed import left a file behind" test ! -e "$T/x.ckpt"
else
  for t in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22; do skip "no /usr/bin/python3 to write the archives"; done
fi

echo "1..$n"
[ "$failed" -eq 0 ]
