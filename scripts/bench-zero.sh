#!/usr/bin/env bash
# ZeRO stage 1 against stage 0 on the CPU: an MLP of about 50 M parameters
# (256 inputs, hidden 8192,5888, 10 classes: 50,404,618 parameters) trained with
# AdamW on random data, 1 BLAS thread per rank, at world 1, 2 and 4 (more ranks
# than cores is oversubscribed: its samples/s measure the sharing, not the code).
# Prints a Markdown table: optimizer state per rank, peak host memory per rank
# (VmHWM, the largest rank's), samples/s, and the stage-1 targets.
# usage: scripts/bench-zero.sh [STEPS] [BATCH_PER_RANK] [WORLDS]
# Environment: MPIDDP (binary, default build/mpiddp), MPIEXEC (launcher), HIDDEN (widths).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
steps=${1:-12}
batch=${2:-16}
worlds=${3:-"1 2 4"}
hidden=${HIDDEN:-8192,5888}
mpiddp=${MPIDDP:-$root/build/mpiddp}
mpiexec=${MPIEXEC:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d /tmp/mpiddp-bench-zero.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Random data: 256 features, 10 classes, enough rows for every rank's steps.
rows=$((steps * batch * 4 + 64))
awk -v n="$rows" 'BEGIN { srand(7); for (j = 0; j < 256; j++) printf "f%d,", j; print "label";
  for (i = 0; i < n; i++) { for (j = 0; j < 256; j++) printf "%.3f,", rand() - 0.5; print int(rand() * 10) } }' \
  > "$work/data.csv"
"$mpiddp" shard --format csv --input "$work/data.csv" --out "$work/data" --shards 1 > /dev/null

field() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
mib() { /usr/bin/python3 -c "import sys; print(f'{float(sys.argv[1]) / 2**20:.0f}')" "$1"; }

printf "| world | stage | optimizer state/rank (MiB) | peak host/rank (MiB) | samples/s |\n|---|---|---|---|---|\n"
declare -A state peak rate
for world in $worlds; do
  for stage in 0 1; do
    run="$work/w${world}s$stage"
    "$mpiexec" -n "$world" "$mpiddp" train --data.train "$work/data" --model.hidden "$hidden" --optim.name adamw \
      --optim.lr 1e-4 --train.batch_size "$batch" --train.max_steps "$steps" --train.epochs 100 --train.threads 1 \
      --train.log_every 1000 --checkpoint.every_epochs 0 --ddp.zero_stage "$stage" --run.dir "$run" > "$run.log" 2>&1 \
      || { echo "world $world stage $stage failed:" >&2; tail -5 "$run.log" >&2; exit 1; }
    state[$world$stage]=$(field "$run/summary.json" optimizer_state_bytes_per_rank)
    peak[$world$stage]=$(field "$run/summary.json" peak_host_bytes)
    rate[$world$stage]=$(field "$run/summary.json" train_samples_per_s)
    printf "| %d | %d | %s | %s | %.1f |\n" "$world" "$stage" "$(mib "${state[$world$stage]}")" \
      "$(mib "${peak[$world$stage]}")" "${rate[$world$stage]}"
  done
done
params=$(field "$work/w$(echo "$worlds" | awk '{print $1}')s0/summary.json" parameter_bytes)
echo
echo "parameters: $((params / 4)) ($(mib "$params") MiB)"
for world in $worlds; do
  /usr/bin/python3 - "$world" "${state[${world}0]}" "${state[${world}1]}" "${peak[${world}0]}" "${peak[${world}1]}" \
    "${rate[${world}0]}" "${rate[${world}1]}" <<'PY'
import sys
w = int(sys.argv[1]); s0, s1, p0, p1 = map(float, sys.argv[2:6]); r0, r1 = map(float, sys.argv[6:8])
need = 0.8 * (1 - 1 / w) * s0
if w == 1:
    print(f"world 1: stage 1 is stage 0 (one shard); peak {p0 / 2**20:.0f} and {p1 / 2**20:.0f} MiB, "
          f"speed {r1 / r0:.2f}x (noise: the same code runs)")
    sys.exit(0)
print(f"world {w}: state/rank {s1 / s0:.3f} of stage 0 (target {1 / w:.3f} within padding: "
      f"{'met' if s1 <= s0 / w + 64 * 2 else 'MISSED'}); peak memory lower by {(p0 - p1) / 2**20:.0f} MiB "
      f"(target at least {need / 2**20:.0f} MiB: {'met' if p0 - p1 >= need else 'MISSED'}); "
      f"speed {r1 / r0:.2f}x stage 0")
PY
done
