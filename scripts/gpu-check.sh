#!/usr/bin/env bash
# The GPU check: one call on a machine with a GPU answers everything in one table.
#   usage: scripts/gpu-check.sh [OUTDIR]
# OUTDIR (default: $OUT if set, else /tmp/gpu-check) receives table.txt and every
# step's log (logs/NAME.log; when OUTDIR is $OUT, whose files come back at most 8
# at a time, the logs are packed into logs.tar.gz). The table is printed last;
# each row is PASS, FAIL or SKIP with its reason:
#   gpu_ops, gpu_ddp_2ranks   the gpu tests: CUDA ops against the CPU, finite differences, NCCL; DDP, 2 ranks, 1 GPU
#   matmul_bf16               bench matmul: the measured bf16 peak the MLP rows are compared with
#   big_mlp_nccl, _staged     bench mlp, 4 layers of 4096, batch 4096, bf16: samples/s, TFLOP/s, share of the
#   small_mlp                 matmul peak, exposed communication (--comm both); 784-256-128-10, batch 64, fp32
#   fmnist_w1_nccl_{fp32,tf32,bf16}, fmnist_w2_shared_mpi
#                             Fashion-MNIST MLP, 15 epochs: world 1 over NCCL, world 2 sharing one GPU over MPI
#   zero_w2_shared_bf16       ddp.zero_stage 1 against 0, 2 ranks sharing the GPU over MPI, bf16: a model sized
#                             from the free memory (behind a PyTorch ballast) that stage 0 cannot hold and stage 1 trains
#   cnn_fmnist_{fp32,bf16}    a small CNN (conv/BatchNorm/ReLU/max-pool/linear) on Fashion-MNIST, 300 steps: the
#                             loss must fall (cuDNN convolutions; bf16 convolves with TF32 math for now)
#   big_cnn_tf32              bench mlp --layers: a VGG-style CNN on 3x64x64, batch 256: samples/s and TFLOP/s
#                             The CNN rows SKIP, with the reason, when this process finds no cuDNN.
#   gpu_training              tests/integration/gpu_test_training.sh (loss curve vs the CPU, accuracy, resume)
#   sanitizer_memcheck, sanitizer_racecheck
#                             a short training under compute-sanitizer (SKIP when it is missing or refuses the GPU)
# cuDNN is opened by mpiddp at run time (not carried by the bundle: ~500 MB) from mpiddp's library path: the
# toolkit's folders and PyTorch's wheels (site-packages/nvidia/cudnn/lib) as above, and /usr/lib/x86_64-linux-gnu;
# the table names the one mpiddp opened.
# Binaries: GPU_BUNDLE (gpu-bundle.tar.xz from scripts/gpu-bundle.sh, or an unpacked bundle folder; by default
# ./gpu-bundle.tar.xz when present), else BUILD_DIR (default build). Only mpiddp, its tests and the bundled
# Open MPI see the bundle's libraries (wrappers; python3 and other tools keep the host's).
# Time: every step runs under `timeout`, all of them within GPU_CHECK_BUDGET_S (default 420 s); about 5 minutes
# on an H200 are expected.
# Exit: 0 when no row failed, 1 when one did; 2 (one line) when it cannot start: a required CUDA library (or
# version) is missing; 77 when there is no usable GPU.
# GPU_CHECK_DRY_RUN=1 checks the script itself on a machine without a GPU (CI does, with the system's MPI,
# HDF5 and BLAS hidden: tests/integration/test_gpu_check_dry_run.sh): the same steps on the CPU, fp32 over
# MPI, short runs and a small MLP; the steps that need a GPU SKIP with the reason.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
out=${1:-${OUT:-/tmp/gpu-check}}
mkdir -p "$out/logs" || { echo "gpu-check: error: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
logs=$out/logs table=$out/table.txt
dry=${GPU_CHECK_DRY_RUN:-}
deadline=$((SECONDS + ${GPU_CHECK_BUDGET_S:-420}))
scratch=$(mktemp -d /tmp/gpu-check.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/bin"
: > "$table"
die() { echo "gpu-check: error: $*" | tee -a "$table" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# ---- the binaries, and the libraries only they see ----
host_ld=${LD_LIBRARY_PATH:-}
bundle=${GPU_BUNDLE:-}
if [ -z "$bundle" ] && [ -f gpu-bundle.tar.xz ]; then bundle=$src/gpu-bundle.tar.xz; fi
if [ -n "$bundle" ]; then
  if [ -f "$bundle" ]; then
    tar -xJf "$bundle" -C "$scratch" || die "cannot unpack $bundle"
    bundle=$scratch/gpu-bundle
  fi
  bundle=$(cd "$bundle" && pwd)
  [ -x "$bundle/bin/mpiddp" ] || die "$bundle is not a bundle from scripts/gpu-bundle.sh (no bin/mpiddp)"
  bin=$bundle/bin tests=$bundle/bin fmnist_src=$bundle/data
  ompi=$bundle/ompi lib_path=$bundle/lib:$bundle/ompi/lib/x86_64-linux-gnu/openmpi/lib
else
  build=$(cd "${BUILD_DIR:-build}" && pwd) || die "no build folder ${BUILD_DIR:-build} (and no gpu-bundle.tar.xz)"
  bin=$build tests=$build/tests fmnist_src=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
  ompi="" lib_path=""
fi
[ -x "$bin/mpiddp" ] || die "$bin/mpiddp not found"
# CUDA's libraries: the toolkit's, or those of PyTorch's wheels (site-packages/nvidia/*/lib: cu13/lib holds
# cudart and cuBLAS, nccl/lib NCCL), as python3 finds them, or in the usual virtual environments.
cuda_dirs=$(
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && echo "$d"; done
  { python3 -c 'import glob, os, nvidia
for root in list(nvidia.__path__): print("\n".join(sorted(glob.glob(os.path.join(root, "*", "lib")))))' 2>/dev/null ||
    ls -d /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib /usr/local/lib/python3*/dist-packages/nvidia/*/lib \
      2>/dev/null; } | sort -u
)
for d in $cuda_dirs; do lib_path=${lib_path:+$lib_path:}$d; done
# cuDNN: mpiddp opens libcudnn.so.9 from the first folder on its path that holds it (the order above: the
# bundle's libraries stay first); the system's folder is added last, in case the loader's cache lacks it.
cudnn_dir=$(for d in $cuda_dirs /usr/lib/x86_64-linux-gnu; do
  if [ -e "$d/libcudnn.so.9" ]; then echo "$d"; break; fi; done)
case ":$lib_path:" in *":$cudnn_dir:"*) ;; *) [ -z "$cudnn_dir" ] || lib_path=${lib_path:+$lib_path:}$cudnn_dir ;; esac
mpiddp_ld=$lib_path${host_ld:+:$host_ld}

# wrap NAME PROGRAM [VAR=value...]: $scratch/bin/NAME runs PROGRAM with mpiddp's library path.
wrap() {
  local name=$1 program=$2; shift 2
  { echo '#!/usr/bin/env bash'
    printf 'exec env'; printf ' %q' "LD_LIBRARY_PATH=$mpiddp_ld" "$@" "$program"; echo ' "$@"'; } > "$scratch/bin/$name"
  chmod +x "$scratch/bin/$name"
}
wrap mpiddp "$bin/mpiddp"
for t in gpu_tests mpi_tests; do [ -x "$tests/$t" ] && wrap "$t" "$tests/$t"; done
if [ -n "$ompi" ]; then
  # The bundled Open MPI under OPAL_PREFIX, its PMIx's components under PMIX_PKGLIBDIR (PMIx ignores
  # PMIX_INSTALL_PREFIX and mca_base_component_path for them). Its site defaults (the host's /etc/openmpi,
  # which a bare machine lacks) are given here instead, as Debian sets them: no UCX, libfabric (ofi) or
  # InfiniBand components.
  pmix=$ompi/lib/x86_64-linux-gnu/pmix2
  ompi_env=(OPAL_PREFIX="$ompi" PMIX_INSTALL_PREFIX="$pmix" PMIX_PKGLIBDIR="$pmix/lib/pmix"
            OMPI_MCA_pml=^ucx OMPI_MCA_btl=^uct,openib,ofi OMPI_MCA_mtl=^ofi OMPI_MCA_osc=^ucx,pt2pt
            OMPI_MCA_btl_base_warn_component_unused=0)
  mpirun_program=$ompi/bin/orterun
else
  ompi_env=()
  mpirun_program=$(command -v mpirun) || die "no mpirun on PATH (and no bundle)"
fi
# The ranks get the host's library path back (-x): mpiddp's wrapper sets its own,
# and anything else mpirun starts (compute-sanitizer) must not see the bundle's.
{ echo '#!/usr/bin/env bash'
  printf 'exec env'; printf ' %q' "LD_LIBRARY_PATH=$mpiddp_ld" "${ompi_env[@]}" "$mpirun_program" \
    -x "LD_LIBRARY_PATH=$host_ld"; echo ' "$@"'; } > "$scratch/bin/mpirun"
chmod +x "$scratch/bin/mpirun"
MPIDDP=$scratch/bin/mpiddp MPIRUN=$scratch/bin/mpirun

# ---- what the machine has; stop at once when something required is missing ----
{ echo "gpu-check $(date -u '+%Y-%m-%d %H:%M UTC') on ${HOSTNAME:-?}${dry:+ (DRY RUN: CPU numbers, no GPU)}"
  echo "binaries: ${bundle:-$bin}"
  gpus=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)
  echo "GPU: ${gpus:-none (nvidia-smi found nothing)}" | head -2; } >> "$table"
env LD_LIBRARY_PATH="$mpiddp_ld" ldd "$bin/mpiddp" > "$logs/ldd.log" 2>&1
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  if grep -q "^[[:space:]]*$lib => not found" "$logs/ldd.log"; then
    die "required CUDA library $lib not found (searched: ${lib_path:-nothing}, the host's LD_LIBRARY_PATH and ld.so.cache)"
  fi
done
missing=$(awk '/=> not found/ {print $1; exit}' "$logs/ldd.log")
[ -z "$missing" ] || die "library $missing not found for mpiddp (see $logs/ldd.log)"
# A library older than the build's lacks some of the functions mpiddp itself calls.
old=$(env LD_LIBRARY_PATH="$mpiddp_ld" ldd -r "$bin/mpiddp" 2>&1 | grep -F "($bin/mpiddp)" |
  grep -m1 -E 'undefined symbol: (cuda|cublas|nccl)')
[ -z "$old" ] || die "a CUDA library is older than the one mpiddp was built with: ${old//$'\t'/ }"
grep -E 'lib(cudart|cublas|cublasLt|nccl)\.so' "$logs/ldd.log" | awk '{print "  " $1 " -> " $3}' >> "$table"
"$MPIDDP" inspect devices > "$logs/devices.log" 2>&1
# "cuDNN yes: 9.x (file)" or "cuDNN no - why": the CNN rows run or SKIP with the reason.
cudnn_line=$(grep -h -m1 '^cuDNN' "$logs/devices.log")
echo "  ${cudnn_line:-cuDNN: not reported (a build without CUDA)}" >> "$table"
no_cudnn=""
case $cudnn_line in
  "cuDNN yes"*) ;;
  "cuDNN no - "*) no_cudnn="no cuDNN: ${cudnn_line#cuDNN no - }" ;;
  *) no_cudnn="no cuDNN: this build has no CUDA" ;;
esac
[ -n "$dry" ] && no_cudnn=""  # the dry run trains the CNNs on the CPU
if [ -z "$dry" ] && ! grep -q "^usable GPUs: [1-9]" "$logs/devices.log"; then
  echo "gpu-check: no usable GPU: $(grep -h "usable GPUs" "$logs/devices.log" || tail -1 "$logs/devices.log")" |
    tee -a "$table" >&2
  exit 77
fi

# ---- steps: each under timeout, within the budget; one row each ----
printf '\n%-22s %-4s %5s  %s\n' STEP "" SEC "RESULT" >> "$table"
failed=0
row() {  # row NAME VERDICT DETAIL
  printf '%-22s %-4s %5s  %s\n' "$1" "$2" "$secs" "$3" >> "$table"
  [ "$2" != FAIL ] || failed=1
  return 0
}
# run_step NAME LIMIT command...: sets rc and secs; the output is in $logs/NAME.log.
# rc is "budget" when too little of the budget is left to start it.
run_step() {
  local name=$1 limit=$2; shift 2
  local left=$((deadline - SECONDS - 5)) start=$SECONDS
  secs=0 rc=0
  if [ "$left" -lt 15 ]; then rc=budget; echo "gpu-check: not started: the time budget is spent" > "$logs/$name.log"; return 0; fi
  [ "$limit" -le "$left" ] || limit=$left
  timeout -k 10 "$limit" "$@" > "$logs/$name.log" 2>&1 || rc=$?
  secs=$((SECONDS - start))
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "gpu-check: stopped after $limit s" >> "$logs/$name.log"; fi
  return 0
}
# Why a step failed, in one line: its error line, else its last line.
why() {
  local line
  line=$(grep -h -m1 -E '^(mpiddp[a-z ]*: error:|FAIL:|gpu-check:)' "$logs/$1.log" 2>/dev/null ||
    grep -v '^[[:space:]]*$' "$logs/$1.log" 2>/dev/null | tail -1)
  echo "${line:0:150}"
}
# verdict NAME DETAIL: the row for the usual outcomes; DETAIL is the PASS text.
verdict() {
  case $rc in
    0) row "$1" PASS "$2" ;;
    77) row "$1" SKIP "$(grep -h -m1 -o 'SKIPPED: .*' "$logs/$1.log" | cut -c10-160)" ;;
    budget) row "$1" SKIP "time budget (GPU_CHECK_BUDGET_S) spent" ;;
    124 | 137) row "$1" FAIL "timed out: $(why "$1")" ;;
    *) row "$1" FAIL "exit $rc: $(why "$1")" ;;
  esac
}

# ---- the gpu tests ----
if [ -x "$scratch/bin/gpu_tests" ]; then
  MPIDDP_TEST_DEVICE=cuda run_step gpu_ops 150 "$MPIRUN" -n 1 "$scratch/bin/gpu_tests"
  verdict gpu_ops "$(grep -h -m1 -E 'All tests passed|test cases' "$logs/gpu_ops.log")"
  MPIDDP_TEST_DEVICE=cuda run_step gpu_ddp_2ranks 120 "$MPIRUN" -n 2 "$scratch/bin/mpi_tests" "[ddp]"
  verdict gpu_ddp_2ranks "$(grep -h -m1 -E 'All tests passed|test cases' "$logs/gpu_ddp_2ranks.log")"
else
  secs=0; row gpu_ops SKIP "this build has no gpu_tests (built without CUDA)"; row gpu_ddp_2ranks SKIP "the same"
fi

# ---- benchmarks ----
dev=cuda nccl=nccl bf16=bf16 tf32=tf32
big=(--inputs 4096 --hidden 4096,4096,4096 --outputs 4096 --batch 4096 --steps 50)
small=(--batch 64 --steps 500)
if [ -n "$dry" ]; then
  dev=cpu nccl=mpi bf16=fp32 tf32=fp32
  big=(--inputs 256 --hidden 256,256,256 --outputs 256 --batch 256 --steps 20)
  small=(--batch 64 --steps 100)
fi
run_step matmul_bf16 60 "$MPIDDP" bench matmul --precision bf16 --size 8192 --seconds 2
peak=$(grep -o '[0-9.]* TFLOP/s' "$logs/matmul_bf16.log" | awk '{print $1; exit}')
if [ -n "$dry" ] && [ "$rc" = 2 ]; then row matmul_bf16 SKIP "dry run: $(why matmul_bf16)"
else verdict matmul_bf16 "$(grep -h -m1 '^matmul' "$logs/matmul_bf16.log")"; fi
# bench_row NAME [PEAK]: samples/s, TFLOP/s and share of the matmul peak (default: the bf16 one) of the first
# mode, and the exposed communication.
bench_row() {
  local detail
  detail=$(python3 - "$logs/$1.log" "${2-${peak:-}}" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
peak = float(sys.argv[2]) if sys.argv[2] else 0.0
modes = re.findall(r"^(with all-reduce|no communication)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", text, re.M)
if not modes:
    sys.exit("no timing rows in the output")
ms, rate, tflops = float(modes[0][1]), float(modes[0][2]), float(modes[0][3])
share = f"{100 * tflops / peak:.0f}% of matmul peak" if peak else "no matmul peak"
exposed = re.search(r"exposed communication: ([\d.]+)%", text)
print(f"{rate:.0f} samples/s, {ms:.2f} ms/step, {tflops:.1f} TFLOP/s = {share}"
      + (f", exposed comm {exposed.group(1)}%" if exposed else ""))
PY
  ) || { row "$1" FAIL "exit 0 but $detail"; return; }
  verdict "$1" "$detail"
}
run_step big_mlp_nccl 90 "$MPIRUN" -n 1 "$MPIDDP" bench mlp --device $dev --precision $bf16 "${big[@]}" \
  --backend $nccl --comm both
if [ "$rc" = 0 ]; then bench_row big_mlp_nccl; else verdict big_mlp_nccl ""; fi
run_step big_mlp_staged 90 "$MPIRUN" -n 1 "$MPIDDP" bench mlp --device $dev --precision $bf16 "${big[@]}" \
  --backend $nccl --comm on --data staged
if [ "$rc" = 0 ]; then bench_row big_mlp_staged; else verdict big_mlp_staged ""; fi
run_step small_mlp 60 "$MPIRUN" -n 1 "$MPIDDP" bench mlp --device $dev "${small[@]}" --comm both
if [ "$rc" = 0 ]; then bench_row small_mlp; else verdict small_mlp ""; fi
# A VGG-style CNN: convolutions are most of its FLOPs (counted from the geometry by bench mlp).
big_cnn=(--input-shape 3,64,64 --outputs 100 --batch 256 --steps 20 --layers "conv2d(64,3,padding=1) batchnorm2d relu
  conv2d(128,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(256,3,padding=1) batchnorm2d relu
  conv2d(256,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(512,3,padding=1) batchnorm2d relu maxpool2d(2)
  flatten linear(512) relu linear")
if [ -n "$dry" ]; then
  big_cnn=(--input-shape 3,16,16 --outputs 10 --batch 16 --steps 3 --warmup 1
           --layers "conv2d(8,3,padding=1) batchnorm2d relu maxpool2d(2) flatten linear")
fi
if [ -n "$no_cudnn" ]; then secs=0; row big_cnn_tf32 SKIP "$no_cudnn"
else
  run_step big_cnn_tf32 90 "$MPIRUN" -n 1 "$MPIDDP" bench mlp --device $dev --precision $tf32 "${big_cnn[@]}" \
    --comm none
  # No peak to compare with: the matmul peak is bf16's, these convolutions run in TF32.
  if [ "$rc" = 0 ]; then bench_row big_cnn_tf32 ""; else verdict big_cnn_tf32 ""; fi
fi

# ---- Fashion-MNIST ----
data=$scratch/fmnist
FMNIST_DIR=$fmnist_src run_step prepare_fmnist 120 "$src/scripts/prepare-fmnist.sh" "$data" "$MPIDDP"
verdict prepare_fmnist "shards in $secs s"
floor=0.87 short=()
if [ -n "$dry" ]; then floor=0.75 short=(--train.epochs 1); fi
# fmnist NAME RANKS BACKEND args...: a run, its accuracy against the floor, and the backend it used.
fmnist() {
  local name=$1 ranks=$2 backend=$3; shift 3
  [ -d "$data/train" ] || { secs=0; row "$name" SKIP "no shards (prepare_fmnist did not pass)"; return; }
  run_step "$name" 120 "$MPIRUN" -n "$ranks" "$MPIDDP" train inputs/fmnist_mlp.ini --data.train "$data/train" \
    --data.test "$data/test" --run.dir "$scratch/$name" --train.device $dev --dist.backend "$backend" \
    "${short[@]}" "$@"
  [ "$rc" = 0 ] || { verdict "$name" ""; return; }
  local detail
  detail=$(python3 - "$scratch/$name/summary.json" "$floor" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
acc, floor = s.get("test_accuracy", 0.0), float(sys.argv[2])
print(f"accuracy {acc:.4f} (floor {floor}), {s['train_samples_per_s']:.0f} samples/s, {s['wall_s']:.1f} s, "
      f"{s['epochs']} epochs")
sys.exit(0 if acc >= floor else 1)
PY
  ) || { row "$name" FAIL "${detail:-no summary.json}"; return; }
  grep -q "gradients over $backend" "$logs/$name.log" || { row "$name" FAIL "not over $backend: $detail"; return; }
  row "$name" PASS "$detail${dry:+ (dry run: CPU, fp32)}"
}
fmnist fmnist_w1_nccl_fp32 1 $nccl
fmnist fmnist_w1_nccl_tf32 1 $nccl --train.precision $tf32
fmnist fmnist_w1_nccl_bf16 1 $nccl --train.precision $bf16
one_gpu=${CUDA_VISIBLE_DEVICES:-0}
CUDA_VISIBLE_DEVICES=${one_gpu%%,*} fmnist fmnist_w2_shared_mpi 2 mpi --train.share_device true

# ZeRO stage 1 where stage 0 does not fit: two ranks share the GPU over MPI (NCCL needs a GPU per rank), bf16
# products. A ballast tensor (PyTorch, in another process) leaves ZERO_FREE_GIB (default 8) free; the MLP is
# sized from the free memory then measured: per rank, stage 0 holds parameters, gradients and AdamW's two
# moments (16 bytes per parameter), stage 1 half the moments (12 bytes), so with P = usable / 28 bytes
# (usable = free - 1 GiB per rank for its context, workspaces and activations) stage 0 needs 1.14 x the
# memory and stage 1 0.86 x. PASS: stage 0 stops on out-of-memory and stage 1 trains, with a lower
# peak_device_bytes per rank than stage 0 would hold (16 P).
zero_row() {
  local name=zero_w2_shared_bf16 keep=${ZERO_FREE_GIB:-8}
  secs=0
  if [ -n "$dry" ]; then row $name SKIP "dry run: needs a GPU (the sizing is from its free memory)"; return; fi
  [ -d "$data/train" ] || { row $name SKIP "no shards (prepare_fmnist did not pass)"; return; }
  python3 -c "import torch; assert torch.cuda.is_available()" > "$logs/$name-ballast.log" 2>&1 ||
    { row $name SKIP "no PyTorch with CUDA for the ballast: $(tail -1 "$logs/$name-ballast.log" | cut -c1-100)"; return; }
  local gpu=${one_gpu%%,*} ready=$scratch/ballast.ready
  CUDA_VISIBLE_DEVICES=$gpu python3 -c '
import sys, time, torch
free, total = torch.cuda.mem_get_info()
keep = int(float(sys.argv[1]) * 2**30)
ballast = torch.empty(max(0, free - keep), dtype=torch.uint8, device="cuda")
open(sys.argv[2], "w").write("ready")
time.sleep(900)' "$keep" "$ready" >> "$logs/$name-ballast.log" 2>&1 &
  local ballast=$!
  wait_ready() { local i; for i in $(seq 120); do [ -s "$ready" ] && return 0; kill -0 $ballast 2>/dev/null || return 1; sleep 0.5; done; return 1; }
  if ! wait_ready; then kill $ballast 2>/dev/null; wait $ballast 2>/dev/null
    row $name SKIP "the ballast did not start: $(tail -1 "$logs/$name-ballast.log" | cut -c1-100)"; return; fi
  local free_mib hidden params
  free_mib=$(nvidia-smi --id="$gpu" --query-gpu=memory.free --format=csv,noheader,nounits 2>/dev/null | head -1)
  params=$(python3 -c "print(int(max(0.0, (float('$free_mib') - 2 * 1024) * 2**20 / 28)))" 2>/dev/null)
  hidden=$(python3 -c "import math; p=$params; print(int((-794 + math.sqrt(794**2 + 4*p)) / 2))" 2>/dev/null)
  if [ -z "$hidden" ] || [ "$hidden" -lt 64 ]; then kill $ballast 2>/dev/null; wait $ballast 2>/dev/null
    row $name SKIP "cannot size the model (free '${free_mib}' MiB from nvidia-smi)"; return; fi
  local common=(inputs/fmnist_mlp.ini --data.train "$data/train" --train.device cuda --dist.backend mpi
                --train.share_device true --train.precision bf16 --optim.name adamw --train.max_steps 3
                --train.eval false --checkpoint.every_epochs 0 --model.hidden "$hidden,$hidden")
  CUDA_VISIBLE_DEVICES=$gpu run_step $name-stage0 120 "$MPIRUN" -n 2 "$MPIDDP" train "${common[@]}"     --run.dir "$scratch/$name-0" --ddp.zero_stage 0
  local rc0=$rc secs0=$secs
  CUDA_VISIBLE_DEVICES=$gpu run_step $name 180 "$MPIRUN" -n 2 "$MPIDDP" train "${common[@]}"     --run.dir "$scratch/$name-1" --ddp.zero_stage 1
  secs=$((secs + secs0))
  kill $ballast 2>/dev/null; wait $ballast 2>/dev/null
  local sized="free ${free_mib} MiB, hidden $hidden,$hidden ($params parameters)"
  [ "$rc" = 0 ] || { row $name FAIL "stage 1 did not train ($sized): $(why $name)"; return; }
  grep -qi "out of memory" "$logs/$name-stage0.log" ||
    { row $name FAIL "stage 0 did not stop on out-of-memory (exit $rc0, $sized): $(why $name-stage0)"; return; }
  local detail
  detail=$(python3 - "$scratch/$name-1/summary.json" "$params" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); p = int(sys.argv[2])
peak = s["peak_device_bytes"]
print(f"stage 0 out of memory, stage 1 trained: peak device {peak / 2**30:.2f} GiB/rank "
      f"(stage 0 would hold {16 * p / 2**30:.2f}), state {s['optimizer_state_bytes_per_rank'] / 2**30:.2f} GiB/rank, "
      f"{s['train_samples_per_s']:.0f} samples/s")
sys.exit(0 if 0 < peak < 16 * p else 1)
PY
  ) || { row $name FAIL "${detail:-no summary.json} ($sized)"; return; }
  row $name PASS "$detail; $sized"
}
zero_row

# cnn NAME PRECISION: a small CNN for a few hundred steps; its logged training loss must fall well below chance
# (ln 10 = 2.30) and end below where it started.
cnn_steps=300
[ -z "$dry" ] || cnn_steps=40
cnn() {
  local name=$1 precision=$2
  if [ -n "$no_cudnn" ]; then secs=0; row "$name" SKIP "$no_cudnn"; return; fi
  [ -d "$data/train" ] || { secs=0; row "$name" SKIP "no shards (prepare_fmnist did not pass)"; return; }
  run_step "$name" 120 "$MPIRUN" -n 1 "$MPIDDP" train inputs/fmnist_mlp.ini --data.train "$data/train" \
    --data.test "$data/test" --run.dir "$scratch/$name" --train.device $dev --dist.backend $nccl \
    --train.precision "$precision" --train.max_steps $cnn_steps --train.log_every $((cnn_steps / 10)) \
    --optim.warmup_steps $((cnn_steps / 10)) --model.layers "conv2d(16,3,padding=1) batchnorm2d relu maxpool2d(2)
    conv2d(32,3,padding=1) batchnorm2d relu maxpool2d(2) flatten linear(64) relu linear"
  [ "$rc" = 0 ] || { verdict "$name" ""; return; }
  local detail
  detail=$(python3 - "$scratch/$name" <<'PY'
import json, os, sys
run = sys.argv[1]
losses = [r["loss"] for r in map(json.loads, open(os.path.join(run, "metrics.jsonl"))) if r.get("type") == "train"]
if len(losses) < 2:
    sys.exit(f"only {len(losses)} logged losses")
s = json.load(open(os.path.join(run, "summary.json")))
print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in {s['steps']} steps, {s['train_samples_per_s']:.0f} samples/s")
sys.exit(0 if losses[-1] < losses[0] and losses[-1] < 1.0 else 1)
PY
  ) || { row "$name" FAIL "the loss did not fall: ${detail:-no metrics}"; return; }
  row "$name" PASS "$detail${dry:+ (dry run: CPU, fp32)}"
}
cnn cnn_fmnist_fp32 fp32
cnn cnn_fmnist_bf16 $bf16

# ---- the training tests (they skip without a GPU) ----
MPIDDP=$MPIDDP MPIEXEC=$MPIRUN MPIDDP_SOURCE_DIR=$src FMNIST_DIR=$fmnist_src \
  run_step gpu_training 240 bash tests/integration/gpu_test_training.sh
verdict gpu_training "$(grep -c '^ok:' "$logs/gpu_training.log") checks passed"

# ---- compute-sanitizer on a short training (the kernels have -lineinfo) ----
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer \
  /usr/local/cuda*/compute-sanitizer/compute-sanitizer /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  name=sanitizer_$tool secs=0
  if [ -z "$sanitizer" ]; then row "$name" SKIP "compute-sanitizer not found"; continue; fi
  if [ -n "$dry" ]; then row "$name" SKIP "dry run: needs a GPU ($sanitizer found)"; continue; fi
  if [ ! -d "$data/train" ]; then row "$name" SKIP "no shards (prepare_fmnist did not pass)"; continue; fi
  # Lazy loading here: only the kernels the run uses are instrumented (eager would patch all of cuBLAS's).
  # The MPI backend: NCCL's spinning kernels are not what this checks.
  run_step "$name" 120 "$MPIRUN" -n 1 env CUDA_MODULE_LOADING=LAZY "$sanitizer" --tool $tool \
    --target-processes all --error-exitcode 86 --print-limit 20 "$MPIDDP" train inputs/fmnist_mlp.ini \
    --data.train "$data/train" --data.test "$data/test" --run.dir "$scratch/$name" --train.device cuda \
    --dist.backend mpi --train.max_steps 20
  summary=$(grep -h -m1 -E '(ERROR|RACECHECK) SUMMARY' "$logs/$name.log" | sed 's/^=* *//')
  refused=$(grep -h -m1 -i -E 'device not supported|not supported on this|unable to (attach|initialize)' \
    "$logs/$name.log" | sed 's/^=* *//')
  if [ -n "$refused" ] && [ "$rc" != 0 ]; then row "$name" SKIP "compute-sanitizer refused the GPU: ${refused:0:120}"
  elif [ "$rc" = 86 ]; then row "$name" FAIL "${summary:-errors}: $(grep -h -m1 -E '^=+ (Invalid|Error|.*hazard)' \
    "$logs/$name.log" | sed 's/^=* *//' | cut -c1-120)"
  else verdict "$name" "${summary:-no summary line}"; fi
done

# ---- the table, last ----
echo "total: $SECONDS s" >> "$table"
if [ "$out" = "$(cd "${OUT:-/nonexistent}" 2>/dev/null && pwd)" ]; then
  tar -czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs" && echo "logs: $out/logs.tar.gz" >> "$table"
else
  echo "logs: $logs" >> "$table"
fi
echo
cat "$table"
exit "$failed"
