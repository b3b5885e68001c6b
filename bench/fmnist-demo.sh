# Sourced by the scripts that run the Fashion-MNIST demo. fmnist_demo_need
# NAME BUILD sets fm (the demo program) and data (Debian's dataset
# directory), exits 2 when the demo is not built and 0 (skipped, saying
# why) without the dataset, and exports the OpenBLAS core type as
# blas-coretype.sh does.
fmnist_demo_need() {
  data=/usr/share/datasets/fashion-mnist
  fm=$2/tools/cairn-fmnist/cairn-fmnist
  [ -x "$fm" ] || { echo "$1: $fm not built" >&2; exit 2; }
  if ! [ -r $data/train-images-idx3-ubyte.gz ]; then
    echo "$1: skipped: no $data (Debian: apt-get install dataset-fashion-mnist)" >&2
    exit 0
  fi
  . "$here/blas-coretype.sh"
  blas_coretype_export "$2/tools/cairn-info/cairn-info" "$1"
}
