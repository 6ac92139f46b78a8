#!/usr/bin/env bash
# Checkpoint write time and size (params + AdamW state, written atomically with
# fsync) next to `dd conv=fsync` of the same number of bytes on the same disk.
# usage: scripts/bench-checkpoint.sh [DATA_DIR] [WORK_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
data=${1:-$root/data/fmnist}
work=${2:-$root/runs/bench-checkpoint}
mpiddp=${MPIDDP:-$root/build/mpiddp}
[ -d "$data/train" ] || "$here/prepare-fmnist.sh" "$data" "$mpiddp" >/dev/null
mkdir -p "$work"
printf "| model | parameters | checkpoint MB | mpiddp write s | dd conv=fsync s | ratio |\n|---|---|---|---|---|---|\n"
for hidden in 256,128 2048,2048,1024; do
  rm -rf "$work/run"
  "$mpiddp" train --data.train "$data/train" --model.hidden "$hidden" --optim.name adamw --train.max_steps 2 \
    --train.eval false --checkpoint.every_steps 1 --checkpoint.keep 1 --run.dir "$work/run" > "$work/log"
  line=$(grep "^checkpoint .*step 2," "$work/log")
  secs=$(echo "$line" | sed 's/.*, \([0-9.]*\) s)$/\1/')
  file=$(echo "$line" | awk '{print $2}')
  bytes=$(stat -c %s "$file")
  params=$(grep -o "([0-9]* parameters)" "$work/log" | tr -dc 0-9)
  start=$(date +%s.%N)
  dd if=/dev/zero of="$work/dd.bin" bs=1M count=$(( (bytes + 1048575) / 1048576 )) conv=fsync status=none
  dd_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  rm -f "$work/dd.bin"
  printf "| 784-%s-10 | %s | %.1f | %.3f | %.3f | %.2f |\n" "${hidden//,/-}" "$params" \
    "$(awk -v b="$bytes" 'BEGIN { print b / 1e6 }')" "$secs" "$dd_s" "$(awk -v a="$secs" -v b="$dd_s" 'BEGIN { print a / b }')"
done
rm -rf "$work"
