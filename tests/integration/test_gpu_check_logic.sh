#!/usr/bin/env bash
# The GPU check's decisions that a machine without a GPU can check, on the runner's
# own functions (python/mpiddp_tools/gpu_check.py; no GPU, no mpiddp, no root):
#  - time budget: a step stopped at a limit that the budget trimmed is a SKIP saying
#    the budget ran out during the step, also when it ignores SIGTERM and is killed
#    after the grace; a step stopped at its own limit, one that fails before the
#    trimmed limit, and one killed early (no time-out) are still FAILs; a step with
#    no time left is not started (SKIP, budget spent); the default budget leaves the
#    whole check inside one device call of under 7 minutes
# The checks print "ok: ..." or "FAIL: ..." lines; any FAIL line fails the test.
source "$(dirname "$0")/lib.sh"
[ -x "$PYTHON" ] || command -v "$PYTHON" >/dev/null || skip "needs python3"
require_commands timeout

"$PYTHON" - "$MPIDDP_SOURCE_DIR" "$WORK" > "$WORK/logic.log" 2>&1 <<'PY' || true
import os, sys, time
src, work = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "python"))
from mpiddp_tools import gpu_check as g  # noqa: E402


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)


def last_row(check_):
    with open(check_.table) as f:
        return f.read().rstrip("\n").split("\n")[-1]


# ---- the time budget ----
out = os.path.join(work, "budget")
os.makedirs(os.path.join(out, "logs"))
open(os.path.join(out, "table.txt"), "w").close()
g.MIN_STEP_S, g.KILL_GRACE_S = 1, 1  # short runs: the rules are the same at 15 s and 10 s
c = g.Check(out, 1000)


def with_left(seconds):
    """What left() gives the next step: SECONDS."""
    c.deadline = c.seconds() + g.KILL_GRACE_S + 5 + seconds


def step(name, own_limit, command, left):
    with_left(left)
    c.failed = 0
    began = time.monotonic()
    c.run_step(name, own_limit, command)
    c.verdict(name, "passed")
    return last_row(c), time.monotonic() - began


row, took = step("cut_by_budget", 60, ["sleep", "30"], 2)
check(row.split()[:2] == ["cut_by_budget", "SKIP"] and g.BUDGET_RAN_OUT in row
      and "stopped after 2 s of its 60" in row and not c.failed and took < 10,
      f"a step stopped at the limit the budget trimmed (2 of its 60 s) is a SKIP: {row}")
check(g.BUDGET_RAN_OUT == "time budget (GPU_CHECK_BUDGET_S) ran out during the step", f"the reason: {g.BUDGET_RAN_OUT}")
log = g.lines_of(c.log("cut_by_budget"))
check(bool(log) and g.BUDGET_RAN_OUT in log[-1], f"its log says so: {log[-1:]}")

row, took = step("cut_ignores_term", 60, ["bash", "-c", 'trap "" TERM; sleep 30'], 2)
check(c.rc == 137 and row.split()[:2] == ["cut_ignores_term", "SKIP"] and g.BUDGET_RAN_OUT in row and took < 10,
      f"one that ignores SIGTERM, killed after the grace (exit {c.rc}), is a SKIP too: {row}")

row, took = step("own_limit", 1, ["sleep", "30"], 100)
check(row.split()[:2] == ["own_limit", "FAIL"] and "timed out" in row and g.BUDGET_RAN_OUT not in row and c.failed,
      f"a step stopped at its own limit (1 s, budget ample) is a FAIL: {row}")

row, took = step("trimmed_but_failed", 60, ["sh", "-c", "exit 3"], 2)
check(row.split()[:2] == ["trimmed_but_failed", "FAIL"] and "exit 3" in row,
      f"a step that fails before its trimmed limit is a FAIL: {row}")

row, took = step("killed_early", 60, ["sh", "-c", "kill -9 $$"], 5)
check(c.rc == 137 and row.split()[:2] == ["killed_early", "FAIL"] and "timed out" not in row and "exit 137" in row
      and took < 4,
      f"a step killed (exit 137) before its trimmed limit, as by the OOM killer, is a FAIL and no time-out: {row}")

row, took = step("not_started", 60, ["sleep", "30"], 0)
check(c.rc == "budget" and row.split()[:2] == ["not_started", "SKIP"] and g.BUDGET_SPENT in row and took < 1,
      f"a step with no time left is not started: {row}")

row, took = step("passes_in_time", 60, ["true"], 2)
check(row.split()[:2] == ["passes_in_time", "PASS"], f"a step that ends in its trimmed time passes: {row}")

# The default budget, the most a step may overrun it (none: limits are trimmed by the grace) and what runs outside it
# (start, packing the logs, removing the scratch folder: ~10 s) make one device call of under 7 minutes.
os.environ.pop("GPU_CHECK_BUDGET_S", None)
out2 = os.path.join(work, "default")
os.makedirs(os.path.join(out2, "logs"))
d = g.GpuCheck(src, out2, work, [])
check(d.deadline - d.seconds() == g.DEFAULT_BUDGET_S and g.DEFAULT_BUDGET_S + 10 < 420,
      f"default budget {d.deadline - d.seconds()} s (+ ~10 s outside it) < 420 s")
print("logic checks done")
PY
cat "$WORK/logic.log"
grep -q "^logic checks done" "$WORK/logic.log" || fail "the Python checks did not run to their end (see above)"
n=$(grep -c "^FAIL: " "$WORK/logic.log" || true)
[ "$n" = 0 ] || fail "$n of the runner's checks failed (see above)"
finish
