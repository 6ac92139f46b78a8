# Shared helpers for the integration tests (sourced). ctest sets MPIDDP, MPIEXEC
# and MPIDDP_SOURCE_DIR; run by hand, they default to the build tree.
#
# Every test ends in exactly one of three ways: `finish` (exit 0 or 1 with a FAIL
# line per failed check), `skip REASON` (exit 77, "SKIPPED: REASON", only for
# something missing on this machine), or an unexpected death, which the ERR and
# EXIT traps below turn into a FAIL line naming the script line, and exit 1.
set -Eeuo pipefail
MPIDDP=${MPIDDP:-$(pwd)/build/mpiddp}
# Exported: the Python tools ask this binary how model.layers resolves (python/mpiddp_tools/binary.py).
export MPIDDP
MPIEXEC=${MPIEXEC:-mpirun}
MPIDDP_SOURCE_DIR=${MPIDDP_SOURCE_DIR:-$(pwd)}
TEST_NAME=$(basename "$0")
# Open MPI as root, with more ranks than cores (the only place the tests set it).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# PMIx's own credentials (psec native) without first asking munged: where munge's
# socket is left behind by a munged that no longer runs (test_slurm starts one;
# it may be stopped later), PMIx retries that socket for 2.25 s at every mpirun
# before falling back to native anyway. Same credentials, same MPI, no wait.
export PMIX_MCA_psec=native
# When a job fails (MPI_Abort, a rank killed), mpirun sends the ranks SIGCONT,
# waits 1 s, SIGTERM, waits 1 s, then SIGKILL, sleeping out each second even when
# every rank has long exited: up to 2 s at each of the many jobs the tests expect
# to fail. No test looks at what a rank does in those seconds (mpiddp's agreed stop
# on SIGTERM needs every rank, and one is gone), so end them at once. The sanitizer
# build keeps Open MPI's 1 s (sanitizers.cmake): a rank's leak check at exit may use it.
export OMPI_MCA_odls_base_sigkill_timeout=${OMPI_MCA_odls_base_sigkill_timeout:-0}
WORK=$(mktemp -d /tmp/mpiddp-test.XXXXXX)
# Open MPI's session directories (its sockets and shared memory) under this test's
# own $WORK, not the /tmp/ompi.<host>.<uid> every job shares: a job ending there
# removes it while another test's mpirun (ctest -j2) is creating its own inside it,
# which then fails with "orte_session_dir failed" (seen once in a pinned run).
export OMPI_MCA_orte_tmpdir_base=$WORK
# The same race within one test, whose jobs run side by side (test_augment starts
# 14 at once): run_ranks and expect_error give each mpirun a base of its own.
own_session_base() { mktemp -d "$WORK/ompi.XXXXXX"; }
FAILURES=0
VERDICT=""       # set by finish and skip; an exit without one is a failure
CLEANUPS=()      # commands run at exit, newest first (at_exit)

fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }
at_exit() { CLEANUPS+=("$1"); }

# ---- how a test ends ----

finish() {
  if [ "$FAILURES" -ne 0 ]; then VERDICT=failed; echo "$FAILURES check(s) failed" >&2; exit 1; fi
  VERDICT=passed; echo "all checks passed"; exit 0
}
skip() { VERDICT=skipped; echo "SKIPPED: $*"; exit 77; }

# A command that set -e would end the script on: say which line, in the main shell
# only (a failing $(...) or subshell is reported once, by the line that ran it).
on_error() {
  local rc=$1 line=$2 file=$3
  [ "$BASHPID" = "$$" ] || return 0
  local text; text=$(sed -n "${line}{s/^[[:space:]]*//;p}" "$file" 2>/dev/null || true)
  local where="line $line"
  [ "$file" -ef "$0" ] || where="$(basename "$file") line $line"
  echo "FAIL: $TEST_NAME: $where: ${text:-$4} (exit $rc)" >&2
}
on_exit() {
  local rc=$? i
  trap - ERR
  set +e
  stop_background_jobs
  for ((i = ${#CLEANUPS[@]} - 1; i >= 0; i--)); do eval "${CLEANUPS[i]}"; done
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
  if [ -z "$VERDICT" ]; then
    # Also an unset variable (set -u) or a kill: bash said why just above, if it could.
    echo "FAIL: $TEST_NAME: ended early (exit $rc) before checking everything" >&2
    exit 1   # never 77: a crash must not read as a skip
  fi
}
trap 'on_error $? $LINENO "${BASH_SOURCE[0]}" "$BASH_COMMAND"' ERR
trap on_exit EXIT
trap 'echo "FAIL: $TEST_NAME: interrupted" >&2; exit 1' INT TERM

# ---- what a test needs: skip (exit 77) when it is missing ----

# Debian's Python (with numpy/h5py/torch); elsewhere (a GPU machine) whatever python3 there is.
PYTHON=${PYTHON:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3 || echo python3)}
require_python_modules() {
  local module
  for module; do
    "$PYTHON" -c "import $module" 2>/dev/null ||
      skip "needs the Python module $module in $PYTHON (Debian: apt-get install python3-$module)"
  done
}
require_commands() {
  local command
  for command; do
    command -v "$command" >/dev/null || [ -x "/usr/sbin/$command" ] || [ -x "/sbin/$command" ] ||
      skip "needs the command $command (scripts/install-deps.sh installs it)"
  done
}
require_root() { [ "$(id -u)" = 0 ] || skip "needs root: $*"; }

# ---- running mpiddp ----

# mpirun -n N mpiddp ARGS..., bounded in time so that a hang fails the test. The
# bound is generous: on a 2-core machine busy with other work, runs that take a
# few seconds here have taken 30 to 40 times longer (mpiddp itself ends a hung
# collective after dist.timeout_s, 300 s by default).
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
# A refused input ends in a second or two; the bound is a hang guard with room for a
# sanitizer build pinned to one core beside other tests (its leak checks take seconds per process).
EXPECT_TIMEOUT=${EXPECT_TIMEOUT:-300}
run_ranks() {
  local n=$1 rc=0; shift
  OMPI_MCA_orte_tmpdir_base=$(own_session_base) timeout "$RUN_TIMEOUT" "$MPIEXEC" -n "$n" "$MPIDDP" "$@" || rc=$?
  [ "$rc" != 124 ] || echo "note: mpiddp was killed after $RUN_TIMEOUT s (hung?)" >&2
  return "$rc"
}

# expect_error NAME RANKS "expected text" mpiddp-args...
# The job must exit non-zero within the time limit (no hang), and print exactly
# one "mpiddp: error:" line, which contains the expected text. EXPECT_RC is its exit code.
# Not counted: the line a waiting rank adds when the erring rank's process is still
# not ended 5 s on (a slow launcher), pointing at that rank's own line: by design.
FOLLOW_ON_ERROR="ended after an error of their own (their line above)"
expect_error() {
  local name=$1 ranks=$2 expected=$3; shift 3
  local out=$WORK/$name.out rc=0
  OMPI_MCA_orte_tmpdir_base=$(own_session_base) timeout "$EXPECT_TIMEOUT" "$MPIEXEC" -n "$ranks" "$MPIDDP" "$@" \
    >"$out" 2>&1 || rc=$?
  EXPECT_RC=$rc
  local lines
  lines=$(grep "^mpiddp: error:" "$out" | grep -cvF -- "$FOLLOW_ON_ERROR" || true)
  if [ "$rc" -eq 0 ]; then fail "$name: exit code 0"; return; fi
  if [ "$rc" -eq 124 ]; then fail "$name: hung (killed after $EXPECT_TIMEOUT s)"; return; fi
  # A sanitizer build: undefined behaviour on an error path would hide behind the expected failure.
  if grep -q "runtime error:" "$out"; then fail "$name: undefined behaviour (UBSan)"; cat "$out" >&2; return; fi
  if [ "$lines" -ne 1 ]; then fail "$name: $lines error lines"; cat "$out" >&2; return; fi
  if ! grep "^mpiddp: error:" "$out" | grep -vF -- "$FOLLOW_ON_ERROR" | grep -qF -- "$expected"; then
    fail "$name: error line lacks '$expected'"; grep "^mpiddp: error:" "$out" >&2; return
  fi
  pass "$name (exit $rc): $(grep '^mpiddp: error:' "$out")"
}

# expect_input_error NAME RANKS EXPECTED ARGS...: expect_error, and the exit code
# is 2 (bad input), not a crash or an internal error.
expect_input_error() {
  expect_error "$@"
  [ "${EXPECT_RC:-0}" = 2 ] || fail "$1: exit ${EXPECT_RC:-?}, expected 2 (bad input)"
  ! grep -q "bad_alloc" "$WORK/$1.out" || fail "$1: std::bad_alloc"
}

# ---- background jobs (mpirun ... &) ----

# uptime_cs: sets UPTIME_CS to the time since boot in hundredths of a second (no
# subshell, so tight polls can afford it). Deadlines use it, not bash's SECONDS:
# a change of the date (a fresh VM's clock being set) does not move it.
uptime_cs() {
  local rest
  read -r UPTIME_CS rest < /proc/uptime  # seconds with two decimals
  UPTIME_CS=$((10#${UPTIME_CS/./}))
}

# wait_until SECONDS COMMAND...: polls COMMAND until it succeeds; non-zero if it never did in time.
wait_until() {
  local wait_deadline; uptime_cs
  wait_deadline=$((UPTIME_CS + 100 * $1)); shift
  until "$@"; do
    uptime_cs
    [ "$UPTIME_CS" -lt "$wait_deadline" ] || return 1
    sleep 0.05
  done
}
log_has() { grep -q -- "$2" "$1" 2>/dev/null; }
job_alive() { kill -0 "$1" 2>/dev/null; }
job_ended() { ! job_alive "$1"; }
# wait_for_line JOB LOG PATTERN SECONDS: until LOG has a line with PATTERN; non-zero
# (and a FAIL line with the log's tail) if JOB ended first or the time ran out.
wait_for_line() {
  local job=$1 log=$2 pattern=$3 limit=$4
  # (sees this call's locals: bash scoping is dynamic)
  line_or_end() { log_has "$log" "$pattern" || ! job_alive "$job"; }
  wait_until "$limit" line_or_end && log_has "$log" "$pattern" && return 0
  if job_alive "$job"; then fail "no '$pattern' in $(basename "$log") within $limit s"
  else fail "the job ended before '$pattern' appeared in $(basename "$log")"; fi
  tail -5 "$log" >&2 2>/dev/null || true
  return 1
}

# PID of the process with MPI world rank RANK among mpirun JOB's children (empty if none yet).
rank_pid() {
  local p
  for p in $(pgrep -P "$1" || true); do
    grep -qxz "OMPI_COMM_WORLD_RANK=$2" "/proc/$p/environ" 2>/dev/null && { echo "$p"; return 0; }
  done
  return 0
}

# PIDs of the mpiddp processes whose command line has --run.dir RUN_DIR: the ranks
# of a job that are no children of this shell (a Slurm job's).
ranks_of_run() {
  local p
  for p in $(pgrep -x mpiddp || true); do
    { tr '\0' ' ' < "/proc/$p/cmdline"; } 2>/dev/null | grep -qF -- "--run.dir $1 " && echo "$p"
  done
  return 0
}
# signal_pending PID SIGNUM: whether signal SIGNUM waits, not yet delivered, at
# process PID (as at a stopped process).
signal_pending() {
  local mask
  mask=$(awk '/^ShdPnd:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$mask" ] && (( (16#$mask >> ($2 - 1)) & 1 ))
}

# Whether any child of JOB is still running (not a zombie).
ranks_alive() {
  local state
  for state in $(ps -o stat= --ppid "$1" || true); do [[ $state == Z* ]] || return 0; done
  return 1
}
kill_job() { pkill -9 -P "$1" 2>/dev/null || true; kill -9 "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
stop_background_jobs() { local job; for job in $(jobs -p); do kill_job "$job"; done; }

# end_job JOB SECONDS: waits up to SECONDS for the background mpirun JOB to end and
# sets JOB_RC. Returns non-zero (JOB_RC 124, job killed) if a rank still ran then.
# Open MPI 4.1.4 sometimes leaves mpirun running after every rank has exited (it
# never reaps a killed rank): not mpiddp's to fix, so that counts as ended, with
# JOB_RC 137, and is counted in MPIRUN_HANGS for the test to report.
MPIRUN_HANGS=0
end_job() {
  local job=$1 limit=$2
  JOB_RC=0
  if wait_until "$limit" job_ended "$job"; then wait "$job" || JOB_RC=$?; return 0; fi
  if ranks_alive "$job"; then
    echo "still running after $limit s: $(ps -o pid,stat,comm --ppid "$job" | tr '\n' ' ')" >&2
    kill_job "$job"; JOB_RC=124; return 1
  fi
  MPIRUN_HANGS=$((MPIRUN_HANGS + 1))
  kill_job "$job"; JOB_RC=137
}

# ---- data, input files, outputs ----

# garbage_bytes N SEED > FILE: N bytes of noise, the same for the same seed.
garbage_bytes() { "$PYTHON" -c "import random, sys; random.seed($2); sys.stdout.buffer.write(random.getrandbits(8 * $1).to_bytes($1, 'little'))"; }

# A learnable 3-class problem in 8 features: class = which of three directions
# the point is closest to, with noise. N rows of CSV (features..., label).
make_blobs_csv() {
  local path=$1 rows=$2 seed=$3
  awk -v n="$rows" -v seed="$seed" 'BEGIN {
    srand(seed); print "f0,f1,f2,f3,f4,f5,f6,f7,label"
    for (i = 0; i < n; i++) {
      c = int(rand() * 3); line = ""
      for (j = 0; j < 8; j++) {
        centre = (j % 3 == c) ? 1.5 : 0; v = centre + (rand() + rand() + rand() - 1.5)
        line = line sprintf("%.5f,", v)
      }
      print line c
    } }' > "$path"
}
# make_blobs_shards DIR ROWS SEED SHARDS: the same problem as HDF5 shards in DIR (CSV in DIR.csv).
make_blobs_shards() {
  make_blobs_csv "$1.csv" "$2" "$3"
  "$MPIDDP" shard --format csv --input "$1.csv" --out "$1" --shards "$4" >/dev/null
}

# make_image_shards DIR ROWS SEED SHARDS: 8x8 one-channel images as CSV rows (64
# features, label) and HDF5 shards in DIR (CSV in DIR.csv). Class c brightens
# columns 3c..3c+1 of the noise. CSV carries no image shape: train them with
# --model.input_shape 1,8,8.
make_image_shards() {
  awk -v n="$2" -v seed="$3" 'BEGIN {
    srand(seed); line = ""
    for (p = 0; p < 64; p++) line = line "p" p ","
    print line "label"
    for (i = 0; i < n; i++) {
      c = int(rand() * 3); line = ""
      for (p = 0; p < 64; p++) {
        col = p % 8; v = rand() + ((col == 3 * c || col == 3 * c + 1) ? 0.2 : 0)
        line = line sprintf("%.4f,", v)
      }
      print line c
    } }' > "$1.csv"
  "$MPIDDP" shard --format csv --input "$1.csv" --out "$1" --shards "$4" >/dev/null
}

# make_word_text DIR: DIR/train.txt (16,000 bytes) and DIR/test.txt (3,000 bytes) of
# words drawn with a fixed seed from a short list: text that a tiny GPT learns in seconds.
make_word_text() {
  "$PYTHON" - "$1" <<'PY'
import random, sys
rng = random.Random(7)
words = "in the beginning was the word and the word was with light over the deep waters".split()
text = " ".join(rng.choice(words) for _ in range(4000)) + "\n"
open(sys.argv[1] + "/train.txt", "w").write(text[:16000])
open(sys.argv[1] + "/test.txt", "w").write(text[16000:19000])
PY
}

# write_ini FILE section.key=value...: an input file, one [section] per key prefix,
# sections in order of first use.
write_ini() {
  local file=$1 setting key section; shift
  local -a order=()
  local -A body=()
  for setting; do
    key=${setting%%=*}; section=${key%%.*}
    [ -n "${body[$section]+set}" ] || order+=("$section")
    body[$section]+="${key#*.} = ${setting#*=}"$'\n'
  done
  for section in "${order[@]}"; do printf '[%s]\n%s' "$section" "${body[$section]}"; done > "$file"
}

# json_field FILE KEY: prints the value; non-zero (and nothing) if the file or key is missing.
json_field() { "$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2" 2>/dev/null; }
# at_least VALUE MIN / below VALUE MAX: numeric comparisons (false for a non-number).
is_number() { [[ $1 =~ ^-?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]]; }
at_least() { is_number "$1" && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }
below() { is_number "$1" && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }

# snapshot DIR: every file under DIR with its type, size, mtime and contents'
# hash: equal snapshots mean nothing was created, removed or touched.
snapshot() {
  (cd "$1" && find . -printf '%p %y %s %T@\n' | sort && find . -type f -print0 | sort -z | xargs -0r sha256sum)
}
# unchanged NAME DIR SNAPSHOT_FILE: a check that DIR is as SNAPSHOT_FILE recorded it.
unchanged() {
  if snapshot "$2" | cmp -s - "$3"; then pass "$1: nothing in $(basename "$2") changed"
  else fail "$1: $(basename "$2") changed"; diff <(snapshot "$2") "$3" | head -5 >&2 || true; fi
}

# The newest complete checkpoint of a run directory.
latest_checkpoint() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest" 2>/dev/null || echo none)"; }
# The global step of the checkpoint that a checkpoints directory's `latest` names; -1 if none.
latest_step() {
  local name
  name=$(cat "$1/latest" 2>/dev/null) || { echo -1; return 0; }
  [[ $name =~ ^ckpt-step-0*([0-9]+)\.h5$ ]] && echo "${BASH_REMATCH[1]}" || echo -1
}
# Number of ckpt-step-*.h5 files in a checkpoints directory (0 if none or no directory).
count_checkpoints() { local f n=0; for f in "$1"/ckpt-step-*.h5; do [ -e "$f" ] && n=$((n + 1)); done; echo "$n"; }

# Exit 0 when two checkpoints hold bit-identical parameters (and optimizer state).
same_parameters() {
  [ -f "$1" ] && [ -f "$2" ] || { echo "missing checkpoint: $1 or $2" >&2; return 1; }
  if ! "$PYTHON" -c "import h5py, numpy" 2>/dev/null; then
    # No h5py: compare every array's checksum as mpiddp itself reports it.
    diff <("$MPIDDP" inspect checkpoint "$1" | grep ' \[') <("$MPIDDP" inspect checkpoint "$2" | grep ' \[') >/dev/null
    return
  fi
  "$PYTHON" - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
def arrays(f):
    out = {}
    f.visititems(lambda name, obj: out.__setitem__(name, obj[...]) if isinstance(obj, h5py.Dataset) else None)
    return out
x, y = arrays(a), arrays(b)
assert x and sorted(x) == sorted(y), (sorted(x), sorted(y))
bad = [n for n in x if not np.array_equal(x[n], y[n])]
assert not bad, bad
PY
}
