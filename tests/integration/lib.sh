# Shared helpers for the integration tests (sourced). ctest sets MPIDDP, MPIEXEC
# and MPIDDP_SOURCE_DIR; run by hand, they default to the build tree.
set -euo pipefail
MPIDDP=${MPIDDP:-$(pwd)/build/mpiddp}
MPIEXEC=${MPIEXEC:-mpirun}
MPIDDP_SOURCE_DIR=${MPIDDP_SOURCE_DIR:-$(pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
WORK=$(mktemp -d /tmp/mpiddp-test.XXXXXX)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
FAILURES=0

fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }

# mpirun -n N mpiddp ARGS..., bounded in time so that a hang fails the test.
run_ranks() { local n=$1; shift; timeout 120 "$MPIEXEC" -n "$n" "$MPIDDP" "$@"; }

# expect_error NAME RANKS "expected text" mpiddp-args...
# The job must exit non-zero within the time limit (no hang), and print exactly
# one "mpiddp: error:" line, which contains the expected text.
expect_error() {
  local name=$1 ranks=$2 expected=$3; shift 3
  local out=$WORK/$name.out rc=0
  timeout 60 "$MPIEXEC" -n "$ranks" "$MPIDDP" "$@" >"$out" 2>&1 || rc=$?
  local lines
  lines=$(grep -c "^mpiddp: error:" "$out" || true)
  if [ "$rc" -eq 0 ]; then fail "$name: exit code 0"; return; fi
  if [ "$rc" -eq 124 ]; then fail "$name: hung (killed after 60 s)"; return; fi
  # A sanitizer build: undefined behaviour on an error path would hide behind the expected failure.
  if grep -q "runtime error:" "$out"; then fail "$name: undefined behaviour (UBSan)"; cat "$out" >&2; return; fi
  if [ "$lines" -ne 1 ]; then fail "$name: $lines error lines"; cat "$out" >&2; return; fi
  if ! grep "^mpiddp: error:" "$out" | grep -qF -- "$expected"; then
    fail "$name: error line lacks '$expected'"; grep "^mpiddp: error:" "$out" >&2; return
  fi
  pass "$name (exit $rc): $(grep '^mpiddp: error:' "$out")"
}

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

# Debian's Python (with numpy/h5py/torch here); elsewhere (a GPU machine) whatever python3 there is.
PYTHON=${PYTHON:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3 )}
json_field() { "$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# The newest complete checkpoint of a run directory.
latest_checkpoint() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest")"; }

# Exit 0 when two checkpoints hold bit-identical parameters (and optimizer state).
same_parameters() {
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

finish() {
  if [ "$FAILURES" -ne 0 ]; then echo "$FAILURES check(s) failed" >&2; exit 1; fi
  echo "all checks passed"
}
