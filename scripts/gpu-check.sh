#!/usr/bin/env bash
# The GPU check, in one call on a machine with a GPU (see README "GPUs"):
#   1. what the machine has (GPU, driver, libraries), 2. the gpu tests (CUDA ops
#   against the CPU, finite differences, NCCL, DDP with 2 ranks sharing the GPU,
#   training curves, bf16, resume), 3. the Fashion-MNIST MLP on the GPU (world 1
#   over NCCL, world 2 sharing the GPU over MPI), 4. bench matmul (bf16) and a
#   large-MLP bench (4 layers of 4096, batch 4096, bf16); then a summary table.
# Uses gpu-bundle.tar.xz (scripts/gpu-bundle.sh) when present, else BUILD_DIR
# (default build/). Writes logs and summary.txt to $OUT (default /tmp/gpu-check).
#   usage: scripts/gpu-check.sh [BUILD_DIR]
# A dry run on a machine without a GPU checks the script's own plumbing:
#   GPU_CHECK_DRY_RUN=1 scripts/gpu-check.sh      (CPU, fp32, MPI, small MLP)
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

if [ -f gpu-bundle.tar.xz ]; then
  bundle=/tmp/gpu-bundle
  rm -rf "$bundle" && tar -xJf gpu-bundle.tar.xz -C /tmp
  pmix=$bundle/ompi/lib/x86_64-linux-gnu/pmix2
  export OPAL_PREFIX=$bundle/ompi PMIX_INSTALL_PREFIX=$pmix PMIX_MCA_mca_base_component_path=$pmix/lib/pmix
  export PATH=$bundle/ompi/bin:$bundle/bin:$PATH FMNIST_DIR=$bundle/data
  export LD_LIBRARY_PATH=$bundle/lib:$bundle/ompi/lib/x86_64-linux-gnu/openmpi/lib:${LD_LIBRARY_PATH:-}
  bin=$bundle/bin; tests=$bundle/bin
else
  build=${1:-build}; bin=$build; tests=$build/tests
fi
# CUDA's libraries: the toolkit's, or the ones PyTorch's wheels bring.
for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           $(python3 -c 'import nvidia, os; p = nvidia.__path__[0]; print(" ".join(os.path.join(p, d, "lib") for d in os.listdir(p)))' 2>/dev/null); do
  [ -d "$dir" ] && LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$dir
done
export LD_LIBRARY_PATH
MPIDDP=$bin/mpiddp
export MPIDDP MPIEXEC=mpirun MPIDDP_SOURCE_DIR=$src

echo "=== machine ==="
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
command -v mpirun || echo "no mpirun"
missing=$(ldd "$MPIDDP" | grep "not found")
[ -n "$missing" ] && { echo "missing libraries:"; echo "$missing"; }
"$MPIDDP" inspect devices | tee "$out/devices.txt"
dev=cuda nccl=nccl bf16=bf16 big_shape="--inputs 4096 --hidden 4096,4096,4096 --outputs 4096 --batch 4096"
if [ -n "${GPU_CHECK_DRY_RUN:-}" ]; then
  dev=cpu nccl=mpi bf16=fp32 big_shape="--inputs 256 --hidden 256,256,256 --outputs 256 --batch 256"
  note "DRY RUN on the CPU: the gpu tests skip, the GPU numbers below are CPU numbers"
elif ! grep -q "^usable GPUs: [1-9]" "$out/devices.txt"; then
  note "no usable GPU: nothing to check"; exit 77
fi

step() {  # step NAME TIMEOUT command...: runs it, logs to $out/NAME.log, records pass/fail
  local name=$1 limit=$2; shift 2
  local start=$SECONDS rc=0
  timeout "$limit" "$@" > "$out/$name.log" 2>&1 || rc=$?
  local verdict="FAIL rc=$rc"
  [ $rc -eq 0 ] && verdict=pass
  [ $rc -eq 77 ] && verdict="skipped: $(grep -h -m1 SKIPPED "$out/$name.log")"
  note "$(printf '%-28s %s (%d s)' "$name" "$verdict" $((SECONDS - start)))"
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || tail -5 "$out/$name.log"
  return $rc
}

echo "=== gpu tests ==="
MPIDDP_TEST_DEVICE=cuda step gpu_ops 180 mpirun -n 1 "$tests/gpu_tests"
MPIDDP_TEST_DEVICE=cuda step gpu_ddp_2ranks 180 mpirun -n 2 "$tests/mpi_tests" "[ddp]"
step gpu_training 400 bash tests/integration/gpu_test_training.sh
grep -E "^(ok|FAIL)" "$out/gpu_training.log" | tee -a "$summary"

echo "=== Fashion-MNIST MLP on the GPU ==="
"$src/scripts/prepare-fmnist.sh" "$out/fmnist" "$MPIDDP" > "$out/prepare.log" 2>&1
data=(--data.train "$out/fmnist/train" --data.test "$out/fmnist/test")
fmnist() {  # fmnist NAME RANKS args...
  local name=$1 ranks=$2; shift 2
  rm -rf "${out:?}/$name"   # a re-check replaces its own earlier run (a fresh start refuses a used run.dir)
  step "$name" 200 mpirun -n "$ranks" "$MPIDDP" train inputs/fmnist_mlp.ini "${data[@]}" --run.dir "$out/$name" "$@" &&
    python3 - "$out/$name/summary.json" "$name" <<'PY' | tee -a "$summary"
import json, sys
s = json.load(open(sys.argv[1]))
print(f"  {sys.argv[2]}: accuracy {s['test_accuracy']:.4f}, {s['train_samples_per_s']:.0f} samples/s, "
      f"{s['wall_s']:.1f} s wall, {s['epochs']} epochs")
PY
}
fmnist fmnist_w1_nccl_fp32 1 --train.device $dev --dist.backend $nccl
fmnist fmnist_w1_nccl_bf16 1 --train.device $dev --dist.backend $nccl --train.precision $bf16
fmnist fmnist_w2_shared_mpi 2 --train.device $dev --train.share_device true --dist.backend mpi

echo "=== benchmarks ==="
step matmul_bf16 120 "$MPIDDP" bench matmul --precision bf16 --size 8192 --seconds 3
rate=$(grep -o "[0-9.]* TFLOP/s" "$out/matmul_bf16.log" | awk '{print $1}')
# shellcheck disable=SC2086
step big_mlp_nccl 180 mpirun -n 1 "$MPIDDP" bench mlp --device $dev --precision $bf16 $big_shape --steps 50 \
  --backend $nccl --comm both
# shellcheck disable=SC2086
step big_mlp_staged 180 mpirun -n 1 "$MPIDDP" bench mlp --device $dev --precision $bf16 $big_shape --steps 50 \
  --backend $nccl --comm on --data staged
step small_mlp_gpu 120 mpirun -n 1 "$MPIDDP" bench mlp --device $dev --batch 64 --steps 500 --comm both
python3 - "$out" "${rate:-0}" <<'PY' | tee -a "$summary"
import re, sys, os
out, rate = sys.argv[1], float(sys.argv[2] or 0)
def rows(name):
    path = os.path.join(out, name + ".log")
    text = open(path).read() if os.path.exists(path) else ""
    table = {m.group(1).strip(): (float(m.group(2)), float(m.group(3)), float(m.group(4)))
             for m in re.finditer(r"^(with all-reduce|no communication)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", text, re.M)}
    exposed = re.search(r"exposed communication: ([\d.]+)%", text)
    return table, exposed.group(1) if exposed else "?"
print(f"\nbf16 matmul 8192^3 measured: {rate:.1f} TFLOP/s (reference ~790)")
print(f"{'bench':<52} {'step ms':>9} {'samples/s':>11} {'TFLOP/s':>9} {'% matmul':>9} {'% of 790':>9} {'exposed comm':>13}")
for name, label in [("big_mlp_nccl", "4x4096 MLP, batch 4096, bf16, NCCL"),
                    ("big_mlp_staged", "same, batch copied from the host"),
                    ("small_mlp_gpu", "784-256-128-10, batch 64, fp32")]:
    table, exposed = rows(name)
    for mode, (ms, sps, tf) in table.items():
        share = f"{100 * tf / rate:.1f}" if rate else "?"
        print(f"{label + ' / ' + mode:<52} {ms:>9.3f} {sps:>11.0f} {tf:>9.2f} {share:>9} {100 * tf / 790:>9.1f} {exposed + '%':>13}")
PY
echo "=== summary ($summary) ==="
cat "$summary"
grep -q "FAIL" "$summary" && exit 1
exit 0
