#!/usr/bin/env bash
# Writes Debian's Fashion-MNIST (package dataset-fashion-mnist) as HDF5 shards:
#   DIR/train/shard-0000i-of-00004.h5 (60000 samples), DIR/test/... (10000 samples)
# usage: scripts/prepare-fmnist.sh DIR [MPIDDP_BINARY]
set -euo pipefail
dir=${1:?usage: prepare-fmnist.sh DIR [MPIDDP_BINARY]}
here=$(cd "$(dirname "$0")" && pwd)
script=prepare-fmnist.sh
# shellcheck source=scripts/find-mpiddp.sh
source "$here/find-mpiddp.sh"
src=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -r "$src/train-images-idx3-ubyte.gz" ] || {
  echo "prepare-fmnist.sh: $src/train-images-idx3-ubyte.gz not found (apt-get install dataset-fashion-mnist)" >&2; exit 2; }
# mpiddp shard refuses a directory that is not empty: a part already converted is kept.
convert() {  # convert PART IMAGES LABELS SHARDS
  if [ -n "$(ls -A "$dir/$1" 2>/dev/null)" ]; then echo "$dir/$1 already holds shards: kept (remove it to convert again)"; return; fi
  "$mpiddp" shard --format idx --images "$src/$2" --labels "$src/$3" --out "$dir/$1" --shards "$4"
}
convert train train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz 4
convert test t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz 1
