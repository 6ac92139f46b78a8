#!/usr/bin/env bash
# The main job, as the README runs it: Debian's Fashion-MNIST sharded by
# scripts/prepare-fmnist.sh, inputs/fmnist_mlp.ini on 2 ranks, >= 0.885 test
# accuracy within 15 epochs.
source "$(dirname "$0")/lib.sh"
fmnist=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -r "$fmnist/train-images-idx3-ubyte.gz" ] || skip "needs Fashion-MNIST in $fmnist (apt-get install dataset-fashion-mnist)"
"$MPIDDP_SOURCE_DIR/scripts/prepare-fmnist.sh" "$WORK/fmnist" "$MPIDDP" || { fail "prepare-fmnist.sh"; finish; }
for split in train test; do
  compgen -G "$WORK/fmnist/$split/*.h5" >/dev/null && pass "$split shards written" || fail "$split shards"
done
run_ranks 2 train "$MPIDDP_SOURCE_DIR/inputs/fmnist_mlp.ini" --data.train "$WORK/fmnist/train" \
  --data.test "$WORK/fmnist/test" --run.dir "$WORK/run" > "$WORK/log" 2>&1 || { fail "training exited $?"; tail "$WORK/log"; }
summary=$WORK/run/summary.json
acc=$(json_field "$summary" test_accuracy) || acc=missing
epochs=$(json_field "$summary" epochs) || epochs=missing
at_least "$acc" 0.885 && [[ $epochs =~ ^[0-9]+$ ]] && [ "$epochs" -le 15 ] \
  && pass "test accuracy $acc after $epochs epochs, $(json_field "$summary" wall_s) s, $(json_field "$summary" train_samples_per_s) samples/s" \
  || fail "accuracy $acc after $epochs epochs"
finish
