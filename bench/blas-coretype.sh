# Sourced by the bench scripts. An OpenBLAS older than the CPU falls back to
# slow kernels (cairn/runtime.h); cairn's programs then re-run themselves
# with a fitting OPENBLAS_CORETYPE. blas_coretype_export CAIRN_INFO NAME
# exports the same value for every program the script runs, PyTorch
# included (it uses the same OpenBLAS), unless the user already set one.
blas_coretype_export() {
  [ -z "${OPENBLAS_CORETYPE:-}" ] || return 0
  ct=$("$1" --blas-coretype 2>/dev/null) && [ -n "$ct" ] || return 0
  export OPENBLAS_CORETYPE="$ct"
  echo "$2: OPENBLAS_CORETYPE=$ct for cairn and PyTorch alike (OpenBLAS fell back to slow kernels on this CPU)" >&2
}
