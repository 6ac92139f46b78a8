#!/usr/bin/env bash
# Training throughput of the Fashion-MNIST MLP (784-256-128-10) and CNN
# (inputs/fmnist_cnn.ini without augmentation), 1 BLAS thread per rank, at world
# 1 and 2, next to PyTorch DDP (gloo) on the same model, batch and samples, and
# the MLP next to the speed limit of its GEMMs alone; then a roofline table: each
# model's FLOPs per sample, GFLOP/s per core at world 2 as a share of one core's
# FMA peak (`mpiddp bench peak`), where the step time goes by layer kind (a trace
# of 20 steps, scripts/trace-shares), exposed communication, and ZeRO stage 1
# against stage 0 on the CNN.
# usage: scripts/bench.sh [DATA_DIR] [BATCH_PER_RANK] [EPOCHS]
#   DATA_DIR defaults to data/fmnist (created with prepare-fmnist.sh if absent).
# Environment: MPIDDP (binary), MPIEXEC (launcher), BENCH_TORCH=0 to skip PyTorch, BENCH_MLP=0 to skip the MLP
#   table, BENCH_CNN_STEPS (optimizer steps per CNN run, default 150; 0 skips the CNN table), BENCH_MODEL_STEPS
#   (steps per ResNet and GPT run, default 100; 0 skips them), BENCH_ARGS (more mpiddp settings for every
#   mpiddp run, e.g. "--train.cpu_kernels openblas"), BENCH_MALLOC=0 (glibc's default allocator settings; see below),
#   BENCH_ISA=AVX2 (another CPU, emulated: both programs' kernels held to AVX2, see below).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
data=${1:-$root/data/fmnist}
batch=${2:-64}
epochs=${3:-3}
mpiddp=${MPIDDP:-$root/build/mpiddp}
export MPIDDP=$mpiddp  # bench_torch_ddp.py resolves --layers with this binary
mpiexec=${MPIEXEC:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# PyTorch's CPU allocator hands large buffers back to the kernel every step (glibc's
# mmap/munmap above its threshold), and where page faults are dear (virtual machines)
# that costs PyTorch up to 4.5x here. Both programs get glibc settings that keep
# freed memory, PyTorch's best case (mpiddp keeps its buffers and runs the same either
# way). BENCH_MALLOC=0 leaves glibc's defaults.
if [ "${BENCH_MALLOC:-1}" != 0 ]; then
  export MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=4294967296 MALLOC_TOP_PAD_=268435456
fi
# BENCH_ISA=AVX2: a CPU without AVX-512, emulated. oneDNN (in both programs),
# mpiddp's own convolution kernels and PyTorch's ATen loops are held to AVX2, and
# the shares are of the AVX2 peak. mpiddp's element-wise loops (built per ISA by
# the compiler, picked by the loader) still run their AVX-512 versions.
if [ -n "${BENCH_ISA:-}" ]; then
  [ "$BENCH_ISA" = AVX2 ] || { echo "bench.sh: BENCH_ISA must be AVX2 (or unset), not $BENCH_ISA" >&2; exit 2; }
  export ONEDNN_MAX_CPU_ISA=AVX2 MPIDDP_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
fi
[ -d "$data/train" ] || "$here/prepare-fmnist.sh" "$data" "$mpiddp" >/dev/null
read -ra bench_args <<< "${BENCH_ARGS:-}"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(grep -o 'avx512f\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')" \
  "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; mpiddp settings: ${BENCH_ARGS:-(defaults)};" \
  "glibc malloc: $( [ -n "${MALLOC_MMAP_THRESHOLD_:-}" ] && echo "keeps freed memory" || echo defaults)${BENCH_ISA:+; kernels held to $BENCH_ISA}"
work=$(mktemp -d /tmp/mpiddp-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The library a run's banner names for the CPU's matrix products (train.cpu_kernels),
# and the layers it gives kernels of their own (mpiddp's, oneDNN's Winograd).
library_of() {
  grep -o 'CPU kernels: .*' "$1" | head -1
  # A model without such layers (the GPT) has none of these lines: not an error.
  grep -e "^CPU kernels of mpiddp's own" -e "^oneDNN's Winograd" -e "^mpiddp's own Winograd" "$1" || true
}
# One core's FP32 FMA peak, measured first, while nothing else runs.
"$mpiddp" bench peak --seconds 1 > "$work/peak" 2>&1
if [ -n "${BENCH_ISA:-}" ]; then
  peak=$(sed -n 's/^AVX2+FMA .*; \([0-9.]*\) GFLOP\/s (median).*/\1/p' "$work/peak")
  echo "peak: $peak GFLOP/s per core (AVX2+FMA, FP32 FMA: BENCH_ISA)"
else
  peak=$(sed -n 's/^peak: \([0-9.]*\) GFLOP\/s per core.*/\1/p' "$work/peak")
  grep '^peak:' "$work/peak"
fi
# Roofline rows, one per model at world 2 (printed at the end): roof_row NAME RUN_DIR PYTORCH_RATE UNITS_PER_SAMPLE.
roof=()
trace=(--train.trace_steps 20 --train.trace_after 50)  # steady state: past oneDNN's warm-up
traced_at() { [ "$1" != 2 ] || echo "${trace[@]}"; }  # WORLD: the trace settings, for world 2's runs only
roof_row() {
  local s=$2/summary.json
  roof+=("$(/usr/bin/python3 - "$1" "$s" "$3" "$4" "$peak" "$here/trace-shares" "$2" <<'PY'
import json, subprocess, sys
name, path, theirs, per, peak, shares_tool, run = sys.argv[1:]
s = json.load(open(path))
per = float(per)
shares = subprocess.run([shares_tool, run, "--json"], capture_output=True, text=True)
traced = json.loads(shares.stdout) if shares.returncode == 0 else {}
kinds = traced.get("shares", {})
top = ", ".join(f"{k} {100 * v:.0f}%" for k, v in list(kinds.items())[:5]) or "no trace"
gflops = s["train_gflops_per_s_per_rank"]
# The traced steps alone (the steady state, past the first steps' set-up and first touches of memory).
steady = "n/a"
if traced.get("step_ms", 0) > 0:
    rank_samples = s["global_batch"] / s["world_size"]
    steady = f"{100 * s['train_flops_per_sample'] * rank_samples / (traced['step_ms'] / 1e3) / 1e9 / float(peak):.1f}%"
theirs = "n/a" if theirs in ("", "n/a") else f"{float(theirs):.0f}"
print(f"| {name} | {s['train_flops_per_sample'] / per / 1e6:.2f} | {s['train_samples_per_s'] * per:.0f} | {theirs} | "
      f"{gflops:.1f} | {100 * gflops / float(peak):.1f}% | {steady} | {100 * s['allreduce_share']:.1f}% | {top} |")
PY
)")
}
field() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
pct() { /usr/bin/python3 -c "import sys; print(f'{100*float(sys.argv[1]):.1f}%')" "$1"; }

if [ "${BENCH_MLP:-1}" != 0 ]; then
# GEMM-only limit: one single-threaded GEMM loop per core, all cores at once.
cores=$(nproc)
limit=0
for i in $(seq "$cores"); do "$mpiddp" bench gemm --batch "$batch" --seconds 2 > "$work/gemm$i" & done
wait
for i in $(seq "$cores"); do
  rate=$(sed -n 's/.*: \([0-9.]*\) samples\/s, .*/\1/p' "$work/gemm$i" | tail -1)
  limit=$(/usr/bin/python3 -c "print(int($limit + $rate))")
done

declare -A ours torch_rate
printf "| world | batch/rank | mpiddp samples/s | data wait | compute | all-reduce | PyTorch DDP gloo | speed-up |\n"
printf "|---|---|---|---|---|---|---|---|\n"
for world in 1 2; do
  "$mpiexec" -n $world "$mpiddp" train "$root/inputs/fmnist_mlp.ini" --data.train "$data/train" --train.eval false \
    --train.epochs "$epochs" --train.batch_size "$batch" --train.threads 1 --checkpoint.every_epochs 0 \
    --run.dir "$work/run$world" "${bench_args[@]}" $(traced_at $world) > "$work/log$world" 2>&1
  s=$work/run$world/summary.json
  ours[$world]=$(field "$s" train_samples_per_s)
  torch_rate[$world]="n/a"
  if [ "${BENCH_TORCH:-1}" != 0 ] && /usr/bin/python3 -c "import torch" 2>/dev/null; then
    torch_rate[$world]=$(/usr/bin/python3 "$here/bench_torch_ddp.py" --data "$data/train" --world $world \
      --batch "$batch" --epochs 1 2>/dev/null | awk '{print $NF}')
  fi
  speedup=$( [ "${torch_rate[$world]}" = "n/a" ] && echo "n/a" || \
    /usr/bin/python3 -c "print(f'{${ours[$world]}/${torch_rate[$world]}:.2f}x')")
  printf "| %d | %d | %.0f | %s | %s | %s | %s | %s |\n" $world "$batch" "${ours[$world]}" \
    "$(pct "$(field "$s" data_wait_share)")" "$(pct "$(field "$s" compute_share)")" \
    "$(pct "$(field "$s" allreduce_share)")" "${torch_rate[$world]}" "$speedup"
done
echo
echo "GEMM-only limit on $cores core(s): $limit samples/s; mpiddp at world 2 reaches" \
  "$(/usr/bin/python3 -c "print(f'{100*${ours[2]}/$limit:.0f}%')") of it;" \
  "world 2 / world 1 = $(/usr/bin/python3 -c "print(f'{${ours[2]}/${ours[1]}:.2f}')")"
roof_row "MLP 784-256-128-10" "$work/run2" "${torch_rate[2]}" 1
fi

# The CNN: the same number of steps for both, each run timed from its start
# (mpiddp's summary; PyTorch's loop after its processes met).
cnn_steps=${BENCH_CNN_STEPS:-150}
if [ "$cnn_steps" != 0 ]; then
layers=$(sed -n 's/^layers *= *//p' "$root/inputs/fmnist_cnn.ini")
echo
echo "CNN ($layers), $cnn_steps steps:"
printf "| world | batch/rank | mpiddp samples/s | all-reduce | PyTorch DDP gloo | speed-up |\n"
printf "|---|---|---|---|---|---|\n"
for world in 1 2; do
  "$mpiexec" -n $world "$mpiddp" train "$root/inputs/fmnist_cnn.ini" --data.train "$data/train" --train.eval false \
    --data.augment "" --train.max_steps "$cnn_steps" --train.batch_size "$batch" --train.threads 1 \
    --checkpoint.every_epochs 0 --run.dir "$work/cnn$world" "${bench_args[@]}" $(traced_at $world) \
    > "$work/cnnlog$world" 2>&1
  s=$work/cnn$world/summary.json
  rate=$(field "$s" train_samples_per_s)
  theirs="n/a"
  if [ "${BENCH_TORCH:-1}" != 0 ] && /usr/bin/python3 -c "import torch" 2>/dev/null; then
    theirs=$(/usr/bin/python3 "$here/bench_torch_ddp.py" --data "$data/train" --world $world --batch "$batch" \
      --epochs 1 --max-steps "$cnn_steps" --layers "$layers" 2>/dev/null | awk '{print $NF}')
  fi
  speedup=$( [ "$theirs" = "n/a" ] && echo "n/a" || /usr/bin/python3 -c "print(f'{$rate/$theirs:.2f}x')")
  printf "| %d | %d | %.0f | %s | %s | %s |\n" $world "$batch" "$rate" "$(pct "$(field "$s" allreduce_share)")" \
    "$theirs" "$speedup"
done
library_of "$work/cnnlog2"
roof_row "CNN (fmnist_cnn.ini)" "$work/cnn2" "$theirs" 1
# ZeRO stage 1 against stage 0 (the run above), same steps, world 2.
"$mpiexec" -n 2 "$mpiddp" train "$root/inputs/fmnist_cnn.ini" --data.train "$data/train" --train.eval false \
  --data.augment "" --train.max_steps "$cnn_steps" --train.batch_size "$batch" --train.threads 1 \
  --checkpoint.every_epochs 0 --run.dir "$work/cnnzero" --ddp.zero_stage 1 "${bench_args[@]}" "${trace[@]}" \
  > "$work/cnnzerolog" 2>&1
roof_row "CNN, ZeRO stage 1" "$work/cnnzero" "" 1
echo "ZeRO stage 1 / stage 0 samples/s (CNN, world 2): $(/usr/bin/python3 -c "print(f'{$(field "$work/cnnzero/summary.json" train_samples_per_s)/$(field "$work/cnn2/summary.json" train_samples_per_s):.3f}')")"
fi

# The ResNet (inputs/fmnist_resnet.ini, no augmentation) and the byte GPT (inputs/kjv_gpt.ini on data/kjv, if
# prepared: scripts/prepare-kjv.sh), the same way. BENCH_MODEL_STEPS (default 100; 0 skips both).
model_steps=${BENCH_MODEL_STEPS:-100}
print_roofline() {
  echo
  echo "Roofline at world 2 (per core = per rank, 1 thread each; peak $peak GFLOP/s per core from mpiddp bench peak;" \
    "FLOPs of the matrix products: forward, weight and input gradients; 'of FMA peak' over the whole run, its first" \
    "steps included; 'traced steps' over the 20 traced steps after 50, the steady state):"
  printf "| model | MFLOP per sample (token) | mpiddp samples (tokens)/s | PyTorch DDP gloo | GFLOP/s per core |"
  printf " of FMA peak | of FMA peak, traced steps | exposed communication | step time by kind (trace) |\n"
  printf "|---|---|---|---|---|---|---|---|---|\n"
  [ ${#roof[@]} = 0 ] || printf "%s\n" "${roof[@]}"
}
if [ "$model_steps" = 0 ]; then print_roofline; exit 0; fi
bench_model() {  # NAME INI DATA UNIT CONTEXT CLASSES EXTRA...: one table, world 1 and 2
  local name=$1 ini=$2 train=$3 unit=$4 context=$5 classes=$6; shift 6
  local list smoothing
  list=$(/usr/bin/python3 -c "import configparser,sys; p=configparser.ConfigParser(inline_comment_prefixes=('#',)); p.read(sys.argv[1]); print(p['model']['layers'].replace(chr(10), ' '))" "$ini")
  smoothing=$(/usr/bin/python3 -c "import configparser,sys; p=configparser.ConfigParser(inline_comment_prefixes=('#',)); p.read(sys.argv[1]); print(p.get('train', 'label_smoothing', fallback='0'))" "$ini")
  echo
  echo "$name ($(basename "$ini")), $model_steps steps, $unit/s:"
  printf "| world | batch/rank | mpiddp %s/s | all-reduce | PyTorch DDP gloo | speed-up |\n" "$unit"
  printf "|---|---|---|---|---|---|\n"
  for world in 1 2; do
    "$mpiexec" -n $world "$mpiddp" train "$ini" --data.train "$train" --train.eval false --train.max_steps "$model_steps" \
      --train.threads 1 --checkpoint.every_epochs 0 --run.dir "$work/$name$world" "$@" "${bench_args[@]}" \
      $(traced_at $world) > "$work/${name}log$world" 2>&1
    local s=$work/$name$world/summary.json per=1 rate theirs="n/a" batch_per_rank
    [ "$context" = 0 ] || per=$context
    rate=$(/usr/bin/python3 -c "print($(field "$s" train_samples_per_s) * $per)")
    batch_per_rank=$(( $(field "$s" global_batch) / world ))
    if [ "${BENCH_TORCH:-1}" != 0 ] && /usr/bin/python3 -c "import torch" 2>/dev/null; then
      theirs=$(/usr/bin/python3 "$here/bench_torch_ddp.py" --data "$train" --world $world --batch "$batch_per_rank" \
        --epochs 1 --max-steps "$model_steps" --layers "$list" --context "$context" --classes "$classes" \
        --label-smoothing "$smoothing" 2>/dev/null \
        | awk -v per="$per" '{print $NF * per}')
    fi
    local speedup; speedup=$( [ -z "$theirs" ] || [ "$theirs" = "n/a" ] && echo "n/a" || /usr/bin/python3 -c "print(f'{$rate/$theirs:.2f}x')")
    printf "| %d | %d | %.0f | %s | %s | %s |\n" $world "$batch_per_rank" "$rate" "$(pct "$(field "$s" allreduce_share)")" \
      "${theirs:-n/a}" "$speedup"
  done
  library_of "$work/${name}log2"
  roof_row "$name ($(basename "$ini"))" "$work/${name}2" "$theirs" "$( [ "$context" = 0 ] && echo 1 || echo "$context")"
}
bench_model resnet "$root/inputs/fmnist_resnet.ini" "$data/train" samples 0 10 --data.augment ""
kjv=${BENCH_KJV_DIR:-$root/data/kjv}
if [ -d "$kjv/train" ]; then bench_model gpt "$root/inputs/kjv_gpt.ini" "$kjv/train" tokens 128 256
else echo; echo "GPT: no $kjv/train (scripts/prepare-kjv.sh $kjv): skipped"; fi
print_roofline
