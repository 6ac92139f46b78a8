#!/usr/bin/env bash
# The GPU check's decisions that a machine without a GPU can check, on the runner's
# own functions (python/mpiddp_tools/gpu_check.py; no GPU, no mpiddp, no root):
#  - time budget: a step stopped at a limit that the budget trimmed is a SKIP saying
#    the budget ran out during the step, also when it ignores SIGTERM and is killed
#    after the grace; a step stopped at its own limit, one that fails before the
#    trimmed limit, and one killed early (no time-out) are still FAILs; a step with
#    no time left is not started (SKIP, budget spent); the default budget leaves the
#    whole check inside one device call of under 7 minutes
#  - compute-sanitizer: sample outputs. A refusal of the device (gVisor's "Device not
#    supported" followed by error 999 and "ERROR SUMMARY: 1 error", unprefixed,
#    "not supported on this device", an unsupported driver, a missing injection
#    library, a failed attach) is a SKIP with the line; a genuine report (an invalid
#    __global__ read with "ERROR SUMMARY: 3 errors", a race, an API error, a
#    summary counting errors) is a FAIL, also beside a refusal's wording; "Target
#    application returned an error" alone, or the program's own "unable to
#    initialize", is no refusal (the usual verdict: FAIL); a clean run decides
#    nothing (the usual verdict: PASS)
#  - the ZeRO row's model (zero_sizing): 18 and 14 bytes per parameter per rank (bf16
#    weight copies counted); for 80 GiB free, the default 48 GiB and every 4 GiB from
#    28 to 128, two ranks' stage-0 state alone needs more than the free memory and
#    stage 1 with the reserve per rank less, by the same margin; too little free
#    memory (the old 8 GiB, 27 GiB), no number, or a model over MPI's int counts is
#    refused with the reason; the stage-1 peak is compared with stage 0's tracked 16
#    bytes per parameter
#  - the GPT-2 rows: the steady rate is the last progress line's (not the whole run's
#    "done" line), PyTorch's by its own pattern; GPU_CHECK_ONLY selects parts (spaces
#    and empty names ignored) and an unknown part stops the check with exit 2, naming
#    it and the known parts; the PyTorch row without PyTorch's CUDA is a SKIP saying why
# The checks print "ok: ..." or "FAIL: ..." lines; any FAIL line fails the test.
source "$(dirname "$0")/lib.sh"
[ -x "$PYTHON" ] || command -v "$PYTHON" >/dev/null || skip "needs python3"
require_commands timeout

"$PYTHON" - "$MPIDDP_SOURCE_DIR" "$WORK" > "$WORK/logic.log" 2>&1 <<'PY' || true
import os, sys
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
    """What left() gives the next step: SECONDS. Set as the deadline and pinned on left() itself: the clock counts
    whole seconds, and a tick between setting the deadline and reading it would give one second less."""
    c.deadline = c.seconds() + g.KILL_GRACE_S + 5 + seconds
    c.left = lambda: seconds


def step(name, own_limit, command, left):
    with_left(left)
    c.failed = 0
    c.run_step(name, own_limit, command)
    c.verdict(name, "passed")
    return last_row(c)


row = step("cut_by_budget", 60, ["sleep", "30"], 2)
check(row.split()[:2] == ["cut_by_budget", "SKIP"] and g.BUDGET_RAN_OUT in row
      and "stopped after 2 s of its 60" in row and not c.failed and c.rc == 124,
      f"a step stopped at the limit the budget trimmed (2 of its 60 s) is a SKIP: {row}")
check(g.BUDGET_RAN_OUT == "time budget (GPU_CHECK_BUDGET_S) ran out during the step", f"the reason: {g.BUDGET_RAN_OUT}")
log = g.lines_of(c.log("cut_by_budget"))
check(bool(log) and g.BUDGET_RAN_OUT in log[-1], f"its log says so: {log[-1:]}")

# SIGTERM ignored (the trap's SIG_IGN stays across exec); 20 s, so that even a
# slow start on a loaded machine has the trap in place well before the limit.
row = step("cut_ignores_term", 60, ["bash", "-c", 'trap "" TERM; exec sleep 60'], 20)
check(c.rc == 137 and row.split()[:2] == ["cut_ignores_term", "SKIP"] and g.BUDGET_RAN_OUT in row,
      f"one that ignores SIGTERM, killed after the grace (exit {c.rc}), is a SKIP too: {row}")

row = step("own_limit", 1, ["sleep", "30"], 100)
check(row.split()[:2] == ["own_limit", "FAIL"] and "timed out" in row and g.BUDGET_RAN_OUT not in row and c.failed,
      f"a step stopped at its own limit (1 s, budget ample) is a FAIL: {row}")

# Commands that end at once get 20 s, not 2: a loaded machine may take a second to start one.
row = step("trimmed_but_failed", 60, ["sh", "-c", "exit 3"], 20)
check(row.split()[:2] == ["trimmed_but_failed", "FAIL"] and "exit 3" in row,
      f"a step that fails before its trimmed limit is a FAIL: {row}")

row = step("killed_early", 60, ["sh", "-c", "kill -9 $$"], 30)
check(c.rc == 137 and row.split()[:2] == ["killed_early", "FAIL"] and "timed out" not in row and "exit 137" in row,
      f"a step killed (exit 137) before its trimmed limit, as by the OOM killer, is a FAIL and no time-out: {row}")

row = step("not_started", 60, ["sleep", "30"], 0)
check(c.rc == "budget" and row.split()[:2] == ["not_started", "SKIP"] and g.BUDGET_SPENT in row,
      f"a step with no time left is not started: {row}")

row = step("passes_in_time", 60, ["true"], 20)
check(row.split()[:2] == ["passes_in_time", "PASS"], f"a step that ends in its trimmed time passes: {row}")

# The default budget, the most a step may overrun it (none: limits are trimmed by the grace) and what runs outside it
# (start, packing the logs, removing the scratch folder: ~10 s) make one device call of under 7 minutes.
os.environ.pop("GPU_CHECK_BUDGET_S", None)
out2 = os.path.join(work, "default")
os.makedirs(os.path.join(out2, "logs"))
d = g.GpuCheck(src, out2, work, [])
check(d.deadline == g.DEFAULT_BUDGET_S and g.DEFAULT_BUDGET_S + 10 < 420,
      f"default budget {d.deadline} s (+ ~10 s outside it) < 420 s")
# ---- compute-sanitizer's output ----
S = "========= "
GVISOR = [S + "COMPUTE-SANITIZER",
          S + "Error: Device not supported. Please refer to the \"Supported Devices\" section of the sanitizer "
              "documentation",
          S + "Program hit cudaErrorUnknown (error 999) due to \"unknown error\" on CUDA API call to cudaMalloc.",
          S + "    Saved host backtrace up to driver entry point at error",
          "mpiddp: error: cudaMalloc: unknown error",
          S + "Target application returned an error",
          S + "ERROR SUMMARY: 1 error"]
MEMCHECK = [S + "COMPUTE-SANITIZER",
            S + "Invalid __global__ read of size 4 bytes",
            S + "    at relu_forward(const float *, float *, unsigned long)+0x70 in elementwise.cu:42",
            S + "    by thread (255,0,0) in block (3,0,0)",
            S + "    Address 0x7f3a00000400 is out of bounds",
            S + "Invalid __global__ read of size 4 bytes",
            S + "Invalid __global__ read of size 4 bytes",
            "epoch 1/15 step 20/469 loss 0.61",
            S + "ERROR SUMMARY: 3 errors"]
RACECHECK = [S + "COMPUTE-SANITIZER",
             S + "Error: Race reported between Write access at softmax_rows(...)+0x1c0 in loss.cu:88",
             S + "    and Read access at softmax_rows(...)+0x200 in loss.cu:91 [4 hazards]",
             S + "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"]
CLEAN = [S + "COMPUTE-SANITIZER", "epoch 1/15 step 20/469 loss 0.61", S + "ERROR SUMMARY: 0 errors"]
cases = [
    # (what, lines, rc, expected verdict or None for the usual one, text the detail must hold)
    ("gVisor: Device not supported, then error 999 counted (exit 86)", GVISOR, 86, "SKIP", "Device not supported"),
    ("the same, the program's own exit 1", GVISOR, 1, "SKIP", "Device not supported"),
    ("Device not supported without the prefix", ["Device not supported", "ERROR SUMMARY: 1 error"], 1, "SKIP",
     "Device not supported"),
    ("not supported on this device", [S + "Error: this feature is not supported on this device"], 1, "SKIP",
     "not supported on this device"),
    ("an unsupported driver", [S + "Error: The driver version is not supported by this sanitizer"], 1, "SKIP",
     "driver version is not supported"),
    ("a missing injection library", [S + "Error: Unable to find injection library libsanitizer-collection.so"], 1,
     "SKIP", "injection library"),
    ("a failed attach", [S + "Error: Unable to attach to the target process"], 1, "SKIP", "Unable to attach"),
    ("a refusal, even when the program exited 0", GVISOR[:2] + CLEAN[1:], 0, "SKIP", "Device not supported"),
    ("memcheck: invalid __global__ reads, ERROR SUMMARY: 3 errors", MEMCHECK, 86, "FAIL",
     "ERROR SUMMARY: 3 errors: Invalid __global__ read of size 4 bytes"),
    ("racecheck: a race", RACECHECK, 86, "FAIL", "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings): Error: "
     "Race reported"),
    ("a finding beside a refusal's wording", GVISOR[:2] + MEMCHECK[1:], 86, "FAIL", "Invalid __global__ read"),
    ("an API error counted, no refusal (exit 86)",
     [S + "Program hit cudaErrorInvalidValue (error 1) due to \"invalid argument\" on CUDA API call to cudaMemcpy.",
      S + "ERROR SUMMARY: 1 error"], 86, "FAIL", "ERROR SUMMARY: 1 error: Program hit cudaErrorInvalidValue"),
    ("errors counted, another exit status", [S + "ERROR SUMMARY: 2 errors"], 1, "FAIL", "ERROR SUMMARY: 2 errors"),
    ("an internal error, no refusal (exit 86)", [S + "Error: Internal Sanitizer Error: out of resources",
                                                 S + "ERROR SUMMARY: 1 error"], 86, "FAIL",
     "ERROR SUMMARY: 1 error: Error: Internal Sanitizer Error"),
    ("Target application returned an error alone", [S + "COMPUTE-SANITIZER", "mpiddp: error: no such file",
                                                    S + "Target application returned an error",
                                                    S + "ERROR SUMMARY: 0 errors"], 2, None, ""),
    ("the program's own 'unable to initialize'", ["mpiddp: error: unable to initialize the reader",
                                                  S + "ERROR SUMMARY: 0 errors"], 2, None, ""),
    ("a clean run", CLEAN, 0, None, ""),
]
CASES_BY_NAME = {case[0]: case[1] for case in cases}
for what, lines, rc, verdict, text in cases:
    got = g.sanitizer_outcome(lines, rc)
    ok = got is None if verdict is None else (got is not None and got[0] == verdict and text in got[1])
    check(ok, f"sanitizer, {what} (exit {rc}): {got or 'the usual verdict'}")

# In the runner (Check.sanitizer_row, as sanitizers() calls it): a step's log read back and its row.
out3 = os.path.join(work, "sanitizer")
os.makedirs(os.path.join(out3, "logs"))
open(os.path.join(out3, "table.txt"), "w").close()
c = g.Check(out3, 1000)
for what, lines, rc, verdict, text in [
        ("gVisor's refusal", GVISOR, 86, "SKIP", "compute-sanitizer refused the GPU: Error: Device not supported"),
        ("memcheck's report", MEMCHECK, 86, "FAIL", "ERROR SUMMARY: 3 errors: Invalid __global__ read"),
        ("a clean run", CLEAN, 0, "PASS", "ERROR SUMMARY: 0 errors"),
        ("the program failing on its own", CASES_BY_NAME["Target application returned an error alone"], 2, "FAIL",
         "exit 2: mpiddp: error: no such file")]:
    c.failed = 0
    c.run_step("sanitizer_memcheck", 60, ["sh", "-c", 'printf "%s\\n" "$@"; exit ' + str(rc), "sh", *lines])
    c.sanitizer_row("sanitizer_memcheck")
    row = last_row(c)
    check(row.split()[:2] == ["sanitizer_memcheck", verdict] and text in row and c.failed == (verdict == "FAIL"),
          f"the runner's row for {what}: {row}")
# ---- the ZeRO row's model ----
GIB = 2**30
check(g.STAGE0_BYTES == 18 and g.STAGE1_BYTES == 14 and g.ZERO_RANKS == 2,
      f"bytes per parameter per rank: stage 0 {g.STAGE0_BYTES} (4 weights + 4 gradients + 8 AdamW + 2 bf16 copy), "
      f"stage 1 {g.STAGE1_BYTES} (AdamW halved over {g.ZERO_RANKS} ranks)")
check(g.mlp_parameters(256) == 784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10,
      "the MLP 784-H-H-10's parameters (weights and biases)")


def sized_right(free_gib, reserve_gib=g.ZERO_RESERVE_GIB):
    z, why = g.zero_sizing(free_gib * 1024, reserve_gib)
    if not z:
        return False, why
    free, reserve = free_gib * GIB, reserve_gib * GIB
    ok = (z.stage0_need == 2 * 18 * z.params > free                      # stage 0 cannot fit, even with no overhead
          and z.stage1_need == 2 * (14 * z.params + reserve) < free       # stage 1 fits with the reserve per rank
          and abs((z.stage0_need - free) - (free - z.stage1_need)) <= 64 * (2 * z.hidden + 797)  # equal margins
          and g.mlp_parameters(z.hidden) == z.params <= (free - reserve) / 32 < g.mlp_parameters(z.hidden + 1))
    return ok, z.text() + f", margin {z.margin / GIB:.2f} GiB"


ok, text = sized_right(80)
z, _ = g.zero_sizing(80 * 1024)
check(ok and 2.5e9 < z.params < 2.6e9 and abs(z.stage0_need / GIB - 86.6) < 0.1
      and abs(z.stage1_need / GIB - 73.4) < 0.1, f"80 GiB free: {text}")
ok, text = sized_right(g.ZERO_FREE_GIB)
z, _ = g.zero_sizing(g.ZERO_FREE_GIB * 1024)
check(ok and g.ZERO_FREE_GIB == 48 and z.margin > 2.5 * GIB and z.hidden ** 2 < 2**31 and z.params // 2 < 2**31,
      f"the default {g.ZERO_FREE_GIB} GiB free: {text}")
bad = [(f, t) for f in range(28, 129, 4) for ok, t in [sized_right(f)] if not ok]
check(not bad, f"28 to 128 GiB free, every 4 GiB: both conditions hold{f' but not at {bad[:1]}' if bad else ''}")
ok, text = sized_right(48, 2)
check(ok, f"another reserve (ZERO_RANK_RESERVE_GIB=2): {text}")
for free_mib, what in [(8 * 1024, "the old default 8 GiB"), (27 * 1024, "27 GiB = 9 reserves"),
                       ("[N/A]", "nvidia-smi's [N/A]"), ("", "no answer")]:
    z, why = g.zero_sizing(free_mib)
    check(z is None and why, f"{what} is refused: {why}")
z, why = g.zero_sizing(48 * 1024, "x")
check(z is None and "not numbers" in why, f"a reserve that is no number is refused: {why}")
z, why = g.zero_sizing(200 * 1024)
check(z is None and "MPI's int counts" in why, f"a model whose shard passes MPI's counts is refused: {why}")

# Stage 1's peak (mpiddp's own allocations: no bf16 copies, no context) against stage 0's 16 bytes per parameter.
import json  # noqa: E402
P = 1_000_000_000
for peak, want in [(12 * P + 50_000_000, True), (16 * P, False), (0, False)]:
    path = os.path.join(work, f"summary-{peak}.json")
    with open(path, "w") as f:
        json.dump({"peak_device_bytes": peak, "optimizer_state_bytes_per_rank": 4 * P, "train_samples_per_s": 100.0}, f)
    ok, text = g.zero_detail(path, P)
    check(ok == want and "stage 0's state alone would be 14.90" in text,
          f"stage 1's peak {peak / P:.2f} B/parameter is {'a PASS' if want else 'no PASS'}: {text}")

# ---- the GPT-2 rows' steady rate, and GPU_CHECK_ONLY ----
log = os.path.join(work, "rates.log")
with open(log, "w") as f:
    f.write("epoch 1/2 step 10/30 loss 9.1 lr 0.0002 38056 tokens/s ETA 0:04\n"
            "checkpoint x (step 20, 2.8 MB, 0.007 s)\n"
            "epoch 1/2 step 30/30 loss 8.2 lr 0.0006 61465.5 tokens/s ETA 0:00\n"
            "done: 30 steps in 0:12, 50 samples/s, 51007 tokens/s\n"
            "torch gpt tokens/s 207046 ms/step 39.57 steps 10\n")
check(g.last_logged_rate(log, "tokens/s") == 61465.5, "the steady rate is the last progress line's, not done's")
check(g.last_logged_rate(log, "tokens/s", r"torch gpt tokens/s ([\d.]+)") == 207046.0, "PyTorch's rate by its pattern")
check(g.last_logged_rate(os.path.join(work, "none.log"), "tokens/s") == 0.0, "no log: no rate")
parts_out = os.path.join(work, "parts")
os.makedirs(os.path.join(parts_out, "logs"))
p = g.GpuCheck(src, parts_out, work, [])
for value, want in [("", None), ("gpt2, sanitizers", {"gpt2", "sanitizers"}), (" tests ,", {"tests"})]:
    os.environ["GPU_CHECK_ONLY"] = value
    check(p.parts_asked() == want, f"GPU_CHECK_ONLY={value!r} runs {want or 'every part'}")
os.environ["GPU_CHECK_ONLY"] = "gpt2,gpt3"
try:
    p.parts_asked()
    check(False, "an unknown part is refused")
except SystemExit as e:
    with open(p.table) as f:
        said = f.read()
    check(e.code == 2 and "unknown part(s) gpt3" in said and "known: tests, bench" in said,
          f"an unknown part stops the check (exit {e.code}) naming it and the known ones")
del os.environ["GPU_CHECK_ONLY"]
check([name for name, _ in p.parts()] == ["tests", "bench", "fmnist", "zero", "cnn", "gpt2", "kjv", "training",
                                           "sanitizers"], "the parts in their order")
# The PyTorch row without PyTorch's CUDA (a python3 on PATH that cannot import torch) is a SKIP saying why.
stub = os.path.join(work, "stub-bin")
os.makedirs(stub)
with open(os.path.join(stub, "python3"), "w") as f:
    f.write("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n")
os.chmod(os.path.join(stub, "python3"), 0o755)
saved_path, os.environ["PATH"] = os.environ["PATH"], stub + os.pathsep + os.environ["PATH"]
p.failed = 0
p.torch_gpt2_row()
os.environ["PATH"] = saved_path
row = last_row(p)
check(row.split()[:2] == ["gpt2_124m_torch", "SKIP"] and "no PyTorch with CUDA" in row and "No module named" in row
      and not p.failed, f"no PyTorch with CUDA: the PyTorch row is a SKIP with the reason: {row}")
print("logic checks done")
PY
cat "$WORK/logic.log"
grep -q "^logic checks done" "$WORK/logic.log" || fail "the Python checks did not run to their end (see above)"
n=$(grep -c "^FAIL: " "$WORK/logic.log" || true)
[ "$n" = 0 ] || fail "$n of the runner's checks failed (see above)"
finish
