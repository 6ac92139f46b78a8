#!/usr/bin/env bash
# `mpiddp inspect sampler` must print exactly PyTorch's DistributedSampler order.
source "$(dirname "$0")/lib.sh"
require_python_modules torch
cases="1000 1 0 0 0 0 1
1000 2 1 0 3 0 1
1001 3 2 42 7 0 1
1001 3 2 42 7 1 1
17 4 3 5 1 0 1
17 4 0 5 1 1 1
3 5 4 9 2 0 1
100 3 1 1 0 0 0
60000 2 1 1 4 0 1"
# PyTorch's order for every case, one line each, from one Python process (importing
# torch takes longer than the rest of a case).
"$PYTHON" - > "$WORK/theirs" 2>"$WORK/theirs.err" <<PY || { fail "PyTorch's DistributedSampler: exit $?"; cat "$WORK/theirs.err" >&2; }
from torch.utils.data.distributed import DistributedSampler
cases = """$cases"""
for line in cases.splitlines():
    n, w, r, seed, epoch, drop, shuffle = map(int, line.split())
    class D:
        def __len__(self): return n
    s = DistributedSampler(D(), num_replicas=w, rank=r, shuffle=bool(shuffle), seed=seed, drop_last=bool(drop))
    s.set_epoch(epoch)
    print(" ".join(map(str, s)))
PY
i=0
while read -r n w r seed epoch drop shuffle; do
  i=$((i + 1))
  args=(inspect sampler --size "$n" --world "$w" --rank "$r" --seed "$seed" --epoch "$epoch")
  [ "$drop" = 1 ] && args+=(--drop-last)
  [ "$shuffle" = 0 ] && args+=(--no-shuffle)
  ours=$("$MPIDDP" "${args[@]}" 2>&1) || true
  theirs=$(sed -n "${i}p" "$WORK/theirs")
  if [ "$ours" = "$theirs" ]; then pass "N=$n W=$w R=$r seed=$seed epoch=$epoch drop_last=$drop shuffle=$shuffle"
  else fail "N=$n W=$w R=$r seed=$seed epoch=$epoch drop_last=$drop shuffle=$shuffle differs"; fi
done <<< "$cases"
finish
