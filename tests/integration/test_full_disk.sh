#!/usr/bin/env bash
# A full disk while checkpointing (a small tmpfs, then filled up): the error names
# the file, the previous checkpoint and the `latest` pointer survive, no temporary
# file is left, and the run goes on once there is space again. Needs root (mount).
source "$(dirname "$0")/lib.sh"
require_root "mounts a small tmpfs to fill it up"
mkdir -p "$WORK/fs"
mount -t tmpfs -o size=8m tmpfs "$WORK/fs" 2>"$WORK/mount.err" ||
  skip "cannot mount a tmpfs here: $(cat "$WORK/mount.err")"
at_exit 'umount "$WORK/fs"'

make_blobs_shards "$WORK/train" 4000 1 2
run=(train --data.train "$WORK/train" --train.batch_size 16 --model.hidden 512,512 --run.dir "$WORK/fs/run")
dir=$WORK/fs/run/checkpoints   # checkpoints of about 3.2 MB

run_ranks 2 "${run[@]}" --train.epochs 1 >/dev/null 2>&1 || fail "first epoch on the tmpfs"
before=$(cat "$dir/latest" 2>/dev/null || echo none)
free_kb=$(df -k --output=avail "$WORK/fs" | tail -1)
dd if=/dev/zero of="$WORK/fs/filler" bs=1k count=$((free_kb - 1000)) status=none || true

rc=0
run_ranks 2 "${run[@]}" --train.epochs 2 --resume auto > "$WORK/full.log" 2>&1 || rc=$?
if [ "$rc" != 0 ] && [ "$(grep -c '^mpiddp: error' "$WORK/full.log")" = 1 ] && \
   grep -q "^mpiddp: error: rank 0: .*ckpt-step-.*\.h5.*(disk full?)" "$WORK/full.log"; then
  pass "full disk: $(grep '^mpiddp: error' "$WORK/full.log")"
else fail "full disk: rc $rc"; tail -3 "$WORK/full.log"; fi
[ "$(cat "$dir/latest" 2>/dev/null)" = "$before" ] && "$MPIDDP" inspect checkpoint "$dir/$before" >/dev/null \
  && pass "previous checkpoint $before intact, latest unchanged" || fail "previous checkpoint damaged"
compgen -G "$dir/*.tmp" >/dev/null && fail "temporary file left behind" || pass "no temporary file left"

# ddp.zero_stage = 1: rank 0 fails while the other rank serves its optimizer shard; one line, no hang.
rc=0
run_ranks 2 "${run[@]}" --train.epochs 2 --resume auto --ddp.zero_stage 1 > "$WORK/full1.log" 2>&1 || rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$(grep -c '^mpiddp: error' "$WORK/full1.log")" = 1 ] && \
   grep -q "^mpiddp: error: rank 0: .*ckpt-step-.*\.h5.*(disk full?)" "$WORK/full1.log"; then
  pass "full disk at zero_stage 1: $(grep '^mpiddp: error' "$WORK/full1.log")"
else fail "full disk at zero_stage 1: rc $rc"; tail -3 "$WORK/full1.log"; fi
[ "$(cat "$dir/latest" 2>/dev/null)" = "$before" ] && ! compgen -G "$dir/*.tmp" >/dev/null \
  && pass "zero_stage 1: previous checkpoint kept, no temporary file" || fail "zero_stage 1: checkpoints touched"

rm "$WORK/fs/filler"
run_ranks 2 "${run[@]}" --train.epochs 2 --resume auto >/dev/null 2>&1 \
  && pass "with space again, the run resumes and finishes" || fail "resume after full disk"
finish
