#!/usr/bin/env bash
# The main job, as the README runs it: Debian's Fashion-MNIST sharded by
# scripts/prepare-fmnist.sh, inputs/fmnist_mlp.ini on 2 ranks, >= 0.885 test
# accuracy within 15 epochs.
source "$(dirname "$0")/lib.sh"
"$MPIDDP_SOURCE_DIR/scripts/prepare-fmnist.sh" "$WORK/fmnist" "$MPIDDP" || { fail "prepare-fmnist.sh"; finish; }
for split in train test; do
  ls "$WORK/fmnist/$split"/*.h5 >/dev/null 2>&1 && pass "$split shards written" || fail "$split shards"
done
run_ranks 2 train "$MPIDDP_SOURCE_DIR/inputs/fmnist_mlp.ini" --data.train "$WORK/fmnist/train" \
  --data.test "$WORK/fmnist/test" --run.dir "$WORK/run" > "$WORK/log" 2>&1 || { fail "training exited $?"; tail "$WORK/log"; }
acc=$(json_field "$WORK/run/summary.json" test_accuracy)
epochs=$(json_field "$WORK/run/summary.json" epochs)
wall=$(json_field "$WORK/run/summary.json" wall_s)
rate=$(json_field "$WORK/run/summary.json" train_samples_per_s)
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.885 and int('$epochs') <= 15 else 1)" \
  && pass "test accuracy $acc after $epochs epochs, $wall s, $rate samples/s" || fail "accuracy $acc after $epochs epochs"
finish
