#!/usr/bin/env bash
# The CPU convolution decision, measured: mpiddp's convolutions on the
# process's library (`mpiddp bench conv --kernels auto`: oneDNN's primitives
# where the build links it, else im2col + OpenBLAS; not the per-layer kernels
# train.cpu_kernels = auto adds, which `bench conv --kernels own|winograd|
# own_winograd4` times; the method is printed per layer) next to oneDNN's
# convolution as PyTorch calls it (Debian's python3-torch), on the shapes of
# inputs/fmnist_cnn.ini's two conv2d layers, 1 thread, batch 64. Each product
# (forward, weight gradient, input gradient) is timed alone.
# usage: scripts/bench-conv.sh [BATCH]      environment: MPIDDP (binary)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
mpiddp=${MPIDDP:-$root/build/mpiddp}
batch=${1:-64}
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "bench-conv: needs python3-torch (/usr/bin/python3)" >&2; exit 2; }
# field NAME LINE: the number after NAME ("forward 30.5 ms ...")
field() { awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i + 1)}' <<<"$2"; }
printf "| layer (batch %d) | product | mpiddp (process library) ms | oneDNN (PyTorch) ms | PyTorch / mpiddp |\n" "$batch"
printf "|---|---|---|---|---|\n"
total_ours=0 total_torch=0
for shape in "1 28 32" "32 14 64"; do
  read -r channels size out <<<"$shape"
  args=(--batch "$batch" --channels "$channels" --size "$size" --out "$out" --kernel 3 --padding 1)
  ours=$("$mpiddp" bench conv "${args[@]}")
  echo "conv2d ${channels}x${size}x${size} -> $out: mpiddp runs $(head -1 <<<"$ours" | sed 's/^conv \(.*\) batch .*/\1/')" >&2
  theirs=$(/usr/bin/python3 "$here/bench_torch_conv.py" "${args[@]}")
  for product in forward weight-grad input-grad; do
    a=$(field "$product" "$ours") b=$(field "$product" "$theirs")
    total_ours=$(/usr/bin/python3 -c "print($total_ours + $a)") total_torch=$(/usr/bin/python3 -c "print($total_torch + $b)")
    printf "| conv2d %sx%sx%s -> %s | %s | %s | %s | %s |\n" "$channels" "$size" "$size" "$out" "$product" "$a" "$b" \
      "$(/usr/bin/python3 -c "print(f'{$b / $a:.2f}x')")"
  done
done
printf "| all | all | %.3f | %.3f | %s |\n" "$total_ours" "$total_torch" \
  "$(/usr/bin/python3 -c "print(f'{$total_torch / $total_ours:.2f}x')")"
