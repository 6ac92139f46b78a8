#!/usr/bin/env bash
# Batch files of scripts/sweep: expansion (lines, grids, comments) and every kind
# of bad line, without Slurm (--dry-run); sweep-summary on unfinished sweeps.
source "$(dirname "$0")/lib.sh"
sweep=$MPIDDP_SOURCE_DIR/scripts/sweep
summary=$MPIDDP_SOURCE_DIR/scripts/sweep-summary
base=$MPIDDP_SOURCE_DIR/inputs/fmnist_mlp.ini

cat > "$WORK/ok.txt" <<'TXT'
# comment line

plain  optim.lr=0.1        # trailing comment
grid g optim.lr=0.1|0.01 model.hidden=64|128,64
TXT
out=$("$sweep" "$base" "$WORK/ok.txt" --out "$WORK/s" --dry-run) || true
expected=$'0\tplain\toptim.lr=0.1\n1\tg_lr-0.1_hidden-64\toptim.lr=0.1 model.hidden=64\n2\tg_lr-0.1_hidden-128-64\toptim.lr=0.1 model.hidden=128,64\n3\tg_lr-0.01_hidden-64\toptim.lr=0.01 model.hidden=64\n4\tg_lr-0.01_hidden-128-64\toptim.lr=0.01 model.hidden=128,64\n5 run(s)'
[ "$out" = "$expected" ] && pass "expansion: 1 line + a 2x2 grid" || { fail "expansion"; echo "$out"; }
[ ! -e "$WORK/s" ] && pass "--dry-run writes nothing" || fail "--dry-run wrote $WORK/s"

bad() {  # name, batch file text, expected message
  printf '%s\n' "$2" > "$WORK/$1.txt"
  local out rc=0
  out=$("$sweep" "$base" "$WORK/$1.txt" --out "$WORK/x" --dry-run 2>&1) || rc=$?
  if [ "$rc" != 0 ] && echo "$out" | grep -qF -- "$3"; then pass "$1: $out"; else fail "$1 (rc $rc): $out"; fi
}
bad duplicate $'a optim.lr=0.1\na optim.lr=0.2' "duplicate.txt:2: run name 'a' repeats"
bad no-equals "a optim.lr" "no-equals.txt:1: 'optim.lr' is not section.key=value"
bad bad-key "a lr=0.1" "bad-key.txt:1: 'lr' is not a section.key name"
bad run-dir "a run.dir=/tmp/x" "run.dir is set by the sweep"
bad bad-name "a/b optim.lr=0.1" "run name 'a/b' may only use"
bad short-grid "grid only" "grid needs a name prefix and at least one key=v1|v2"
bad empty "# nothing here" "empty.txt: no runs"
rc=0; out=$("$sweep" /no/base.ini "$WORK/ok.txt" --out "$WORK/x" --dry-run 2>&1) || rc=$?
[ "$rc" != 0 ] && echo "$out" | grep -q "/no/base.ini: no such input file" && pass "missing base file" || fail "missing base: $out"

# sweep-summary: pending and running runs, and a missing sweep directory.
mkdir -p "$WORK/sum/started"
printf '0\tstarted\t%s/sum/started\toptim.lr=0.1\n1\tlater\t%s/sum/later\toptim.lr=0.2\n' "$WORK" "$WORK" > "$WORK/sum/runs.tsv"
table=$("$summary" "$WORK/sum" 2>/dev/null) || true
echo "$table" | grep -q "| - | started | running |" && echo "$table" | grep -q "| - | later | pending |" \
  && pass "summary marks running and pending runs" || { fail "summary states"; echo "$table"; }
rc=0; out=$("$summary" "$WORK/none" 2>&1) || rc=$?
[ "$rc" != 0 ] && echo "$out" | grep -q "runs.tsv" && pass "summary of a missing sweep: $out" || fail "missing sweep: $out"
finish
