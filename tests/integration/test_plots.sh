#!/usr/bin/env bash
# scripts/plot and scripts/sweep-summary --plot: the files are written and hold
# the expected curves and points (read back from the SVG: every curve is a group
# with an id, every point a marker in it); a resumed run's doubled records count
# once; without matplotlib both fail with one line.
source "$(dirname "$0")/lib.sh"
require_python_modules matplotlib
SCRIPTS=$MPIDDP_SOURCE_DIR/scripts

# ---- three runs: a real one, and two written by hand ----
make_blobs_shards "$WORK/train" 600 1 2
make_blobs_shards "$WORK/test" 200 2 1
write_ini "$WORK/run.ini" data.train="$WORK/train" data.test="$WORK/test" model.hidden=16 train.batch_size=50 \
  train.epochs=3 train.log_every=4 optim.name=sgd optim.lr=0.1
run_ranks 1 train "$WORK/run.ini" --run.dir "$WORK/real" > "$WORK/real.log" 2>&1 || fail "training exited $?"
record() { printf '{"type":"train","epoch":%d,"step":%d,"global_step":%d,"loss":%s,"lr":0.1,"samples_per_s":%d}\n' "$@"; }
evalrec() { printf '{"type":"eval","epoch":%d,"global_step":%d,"test_loss":%s,"test_accuracy":%s,"samples":200}\n' "$@"; }
mkdir -p "$WORK/plain" "$WORK/resumed"
{ for s in 1 2 3 4 5 6 7 8; do record $(((s + 3) / 4)) $(((s - 1) % 4 + 1)) "$s" "$(awk -v s="$s" 'BEGIN { print 1 / s }')" 1000; done
  evalrec 1 4 0.5 0.8; evalrec 2 8 0.4 0.85; } > "$WORK/plain/metrics.jsonl"
# As a run resumed at step 4 whose file was not cut back: steps 5 and 6, and epoch 2's
# eval, appear twice; the last line was torn by a crash.
{ for s in 1 2 3 4 5 6 5 6 7 8; do record $(((s + 3) / 4)) $(((s - 1) % 4 + 1)) "$s" 0.$((9 - s)) 900; done
  evalrec 1 4 0.6 0.7; evalrec 2 8 0.45 0.8; evalrec 2 8 0.45 0.8; echo '{"type":"train","epo'; } > "$WORK/resumed/metrics.jsonl"

"$PYTHON" "$SCRIPTS/plot" "$WORK/real" "$WORK/plain" "$WORK/resumed" --out "$WORK/runs.svg" --describe \
  > "$WORK/describe.txt" 2> "$WORK/plot.err" || fail "plot exited $?: $(cat "$WORK/plot.err")"
grep -qx "training loss: resumed: 8 points, global_step 1..8" "$WORK/describe.txt" \
  && grep -qx "test accuracy: resumed: 2 points, epoch 1..2" "$WORK/describe.txt" \
  && grep -qx "test loss: real: 3 points, epoch 1..3" "$WORK/describe.txt" \
  && pass "--describe: doubled records count once" || { fail "--describe"; cat "$WORK/describe.txt" >&2; }
# The real run: 12 steps per epoch, a record every 4 steps and at each epoch's end = 9 records.
"$PYTHON" - "$WORK/runs.svg" <<'PY' && pass "SVG: 4 panels x 3 runs, one marker per point, in step order" || fail "SVG curves"
import sys, xml.etree.ElementTree as ET
svg = ET.parse(sys.argv[1]).getroot()
groups = {g.get("id"): g for g in svg.iter("{http://www.w3.org/2000/svg}g") if (g.get("id") or "").startswith("curve:")}
want = {"real": (9, 3), "plain": (8, 2), "resumed": (8, 2)}
expected = {f"curve:{panel}:{run}": n[0 if panel in ("training loss", "samples/s") else 1]
            for run, n in want.items() for panel in ("training loss", "test accuracy", "test loss", "samples/s")}
assert sorted(groups) == sorted(expected), sorted(groups)
for gid, n in expected.items():
    markers = len(list(groups[gid].iter("{http://www.w3.org/2000/svg}use")))
    assert markers == n, (gid, markers, n)
    # The line's vertices: x (SVG coordinates) must rise, so a resume draws no loop back.
    path = next(groups[gid].iter("{http://www.w3.org/2000/svg}path")).get("d").replace("M", "").replace("L", "").split()
    xs = [float(v) for v in path[0::2]]
    assert len(xs) == n and all(a < b for a, b in zip(xs, xs[1:])), (gid, xs)
PY
# Text is drawn as paths; its string stays in a comment.
for run in real plain resumed; do
  [ "$(grep -c -- "<!-- $run -->" "$WORK/runs.svg")" = 4 ] || fail "legend: '$run' not in all 4 panels"
done
pass "each run named in every panel's legend"

"$PYTHON" "$SCRIPTS/plot" "$WORK/real" "$WORK/resumed" --out "$WORK/runs.png" 2> "$WORK/png.err" || fail "plot png exited $?"
[ "$(head -c 4 "$WORK/runs.png" | od -An -c | tr -d ' ')" = '211PNG' ] && [ "$(stat -c %s "$WORK/runs.png")" -gt 20000 ] \
  && pass "PNG written" || fail "PNG"

# ---- sweep-summary --plot: the metric of each completed run against each swept key ----
sweep=$WORK/sweep
i=0
while IFS='|' read -r name overrides acc; do
  mkdir -p "$sweep/$name"
  printf '%d\t%s\t%s\t%s\n' "$i" "$name" "$sweep/$name" "$overrides" >> "$sweep/runs.tsv"
  if [ "$acc" = failed ]; then echo 1 > "$sweep/$name/exit_code"; else
    echo 0 > "$sweep/$name/exit_code"
    printf '{"status":"completed","test_accuracy":%s,"test_loss":0.5,"epochs":1}\n' "$acc" > "$sweep/$name/summary.json"
  fi
  i=$((i + 1))
done <<'EOF'
baseline||0.80
lr-big|optim.lr=0.1|0.70
lr-mid|optim.lr=0.01|0.85
lr-small|optim.lr=0.001|0.75
wide|optim.lr=0.01 model.hidden=512,256|0.88
broken|optim.lr=1|failed
EOF
"$PYTHON" "$SCRIPTS/sweep-summary" "$sweep" --plot "$WORK/sweep.svg" > "$WORK/table.md" 2> "$WORK/sweep.err" \
  || fail "sweep-summary --plot exited $?: $(cat "$WORK/sweep.err")"
grep -q "plotted test_accuracy against model.hidden (5 runs), optim.lr (5 runs)" "$WORK/sweep.err" \
  && grep -q "| 1 | wide | completed |" "$WORK/table.md" && pass "sweep plot: both swept keys, the 5 completed runs; table unchanged" \
  || { fail "sweep plot summary"; cat "$WORK/sweep.err" >&2; }
"$PYTHON" - "$WORK/sweep.svg" <<'PY' && pass "sweep SVG: one panel per key, a marker per completed run" || fail "sweep SVG"
import sys, xml.etree.ElementTree as ET
svg = ET.parse(sys.argv[1]).getroot()
groups = {g.get("id"): g for g in svg.iter("{http://www.w3.org/2000/svg}g") if (g.get("id") or "").startswith("sweep:")}
assert sorted(groups) == ["sweep:model.hidden", "sweep:optim.lr"], sorted(groups)
for g in groups.values():
    assert len(list(g.iter("{http://www.w3.org/2000/svg}use"))) == 5
PY

# ---- without matplotlib: one line, exit 2, no file ----
mkdir -p "$WORK/hide/matplotlib"
echo 'raise ImportError("hidden by the test")' > "$WORK/hide/matplotlib/__init__.py"
rc=0; PYTHONPATH=$WORK/hide "$PYTHON" "$SCRIPTS/plot" "$WORK/plain" --out "$WORK/none.png" > "$WORK/none.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && [ "$(wc -l < "$WORK/none.out")" = 1 ] && grep -q "^plot: error: needs the Python module matplotlib" "$WORK/none.out" \
  && [ ! -e "$WORK/none.png" ] && pass "plot without matplotlib: $(cat "$WORK/none.out")" || { fail "plot without matplotlib (exit $rc)"; cat "$WORK/none.out" >&2; }
rc=0; PYTHONPATH=$WORK/hide "$PYTHON" "$SCRIPTS/sweep-summary" "$sweep" --plot "$WORK/none.svg" > "$WORK/none2.out" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$(wc -l < "$WORK/none2.out")" = 1 ] && grep -q "^sweep-summary: error: --plot needs the Python module matplotlib" "$WORK/none2.out" \
  && pass "sweep-summary --plot without matplotlib: one line" || { fail "sweep-summary without matplotlib (exit $rc)"; cat "$WORK/none2.out" >&2; }
rc=0; "$PYTHON" "$SCRIPTS/plot" "$WORK/plain" --out "$WORK/x.jpg" 2> "$WORK/ext.err" || rc=$?
[ "$rc" = 2 ] && grep -q "^plot: error: --out .*x.jpg: give a .png or .svg" "$WORK/ext.err" && pass "--out must be .png or .svg" || fail "--out extension"
finish
