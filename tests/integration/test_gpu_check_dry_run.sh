#!/usr/bin/env bash
# scripts/gpu-check.sh end to end without a GPU (GPU_CHECK_DRY_RUN=1), from a
# bundle made by scripts/gpu-bundle.sh, with the system's MPI, HDF5 and BLAS
# hidden, as on a bare GPU machine: in a mount namespace of its own, every file
# of their Debian packages (Open MPI and PMIx, /etc/openmpi's defaults, HDF5,
# OpenBLAS) is covered by an empty one, so only the bundle can provide them.
#  - the bundle holds none of the C library's files (libc6), libresolv included
#  - with the system's libraries hidden, the build's own mpiddp no longer starts
#    (the hiding works), the bundle's does
#  - the dry run exits 0, every row PASS or SKIP with a reason, matmul_bf16 SKIP
#    (dry run), the Fashion-MNIST and bench rows PASS, the table printed last
#  - with CUDA's libraries hidden too, it stops at once with one line naming
#    libcudart.so.13, and so it does with an NCCL that lacks functions the build
#    calls (a CUDA build only)
source "$(dirname "$0")/lib.sh"
require_root "mount namespaces"
require_commands unshare mount dpkg
unshare -m --propagation private true 2>/dev/null || skip "unshare -m does not work here (no mount namespaces)"
[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  skip "needs Fashion-MNIST (apt-get install dataset-fashion-mnist)"
build=$(dirname "$MPIDDP")
src=$MPIDDP_SOURCE_DIR

# The bundle, unpacked (no archive: quick).
"$src/scripts/gpu-bundle.sh" --dir "$WORK/bundle" "$build" > "$WORK/bundle.log" 2>&1 ||
  { fail "gpu-bundle.sh: exit $?"; cat "$WORK/bundle.log" >&2; finish; }
libc=$(dpkg -L libc6 | sed -n 's|.*/\([^/]*\.so[.0-9]*\)$|\1|p' | sort -u)
carried=$(find "$WORK/bundle" -name '*.so*' -printf '%f\n' | sort -u)
in_both=$(comm -12 <(echo "$libc") <(echo "$carried") | tr '\n' ' ')
[ -z "$in_both" ] && pass "the bundle holds no file of libc6 ($(echo "$carried" | wc -l) libraries)" ||
  fail "the bundle holds libc6's $in_both"
[ -e "$WORK/bundle/lib/libhdf5_serial.so.103" ] && [ -e "$WORK/bundle/lib/libmpi.so.40" ] &&
  pass "the bundle carries HDF5 and Open MPI" || fail "HDF5 or Open MPI missing from the bundle"

# Every file of the packages that provide MPI, HDF5 and BLAS here.
owner() { dpkg -S "$(readlink -f "$1")" 2>/dev/null | head -1 | cut -d: -f1; }
packages=$(for f in /usr/lib/x86_64-linux-gnu/{libmpi.so.40,libpmix.so.2,libhdf5_serial.so.103,libhdf5_serial_hl.so.100} \
                    /usr/lib/x86_64-linux-gnu/{libopenblas.so.0,libblas.so.3,liblapack.so.3} /usr/bin/orterun \
                    /etc/openmpi/openmpi-mca-params.conf; do [ -e "$f" ] && owner "$f"; done | sort -u)
echo "hiding the files of: $(echo $packages)"
[ -n "$packages" ] || fail "found no package to hide"
touch "$WORK/empty"
cat > "$WORK/hidden.sh" <<'EOF'
# Runs "$@" with every regular file of $PACKAGES covered by an empty one (in this mount namespace only).
for package in $PACKAGES; do
  dpkg -L "$package" | while read -r f; do
    if [ -f "$f" ] && [ ! -L "$f" ]; then mount --bind "$EMPTY" "$f" || exit 1; fi
  done || exit 1
done
"$@"
EOF
hidden() { PACKAGES="$packages" EMPTY="$WORK/empty" timeout 3000 unshare -m --propagation private bash "$WORK/hidden.sh" "$@"; }

hidden bash -c '[ ! -s "$(readlink -f /usr/lib/x86_64-linux-gnu/libmpi.so.40)" ] && [ ! -s /etc/openmpi/openmpi-mca-params.conf ]' &&
  pass "libmpi and /etc/openmpi are hidden in the namespace" || fail "the system's files are not hidden"
if hidden "$MPIDDP" inspect devices > "$WORK/own.log" 2>&1; then fail "the build's mpiddp still starts: nothing hidden"
else pass "the build's own mpiddp cannot start there ($(grep -m1 -o 'lib[a-z_0-9.]*: .*' "$WORK/own.log" | cut -c1-90))"; fi

# The dry run, from the bundle only (BUILD_DIR points nowhere).
rc=0
hidden env GPU_CHECK_DRY_RUN=1 GPU_BUNDLE="$WORK/bundle" BUILD_DIR=/nonexistent OUT= \
  "$src/scripts/gpu-check.sh" "$WORK/out" > "$WORK/dry.log" 2>&1 || rc=$?
table=$WORK/out/table.txt
[ "$rc" = 0 ] && pass "dry run exit 0" || { fail "dry run exit $rc"; tail -30 "$WORK/dry.log" >&2; }
[ -f "$table" ] && [ "$(tail -1 "$WORK/dry.log")" = "$(tail -1 "$table")" ] &&
  pass "the table is printed last" || fail "the table is not the end of the output"
rows=$(grep -cE '^[a-z_0-9]+ +(PASS|FAIL|SKIP) ' "$table" || true)
[ "$rows" -ge 14 ] && pass "$rows rows" || fail "only $rows rows in the table"
! grep -qE '^[a-z_0-9]+ +FAIL ' "$table" && pass "no row failed" || { fail "failed rows"; grep -E ' FAIL ' "$table" >&2; }
bare_skips=$(grep -E '^[a-z_0-9]+ +SKIP +[0-9]+ *$' "$table" || true)
[ -z "$bare_skips" ] && pass "every SKIP says why" || fail "a SKIP without a reason: $bare_skips"
grep -qE '^matmul_bf16 +SKIP .*dry run' "$table" && pass "matmul_bf16 skipped in the dry run, with the reason" ||
  fail "matmul_bf16 row: $(grep '^matmul_bf16' "$table")"
for name in prepare_fmnist fmnist_w1_nccl_fp32 fmnist_w1_nccl_tf32 fmnist_w1_nccl_bf16 fmnist_w2_shared_mpi \
            big_mlp_nccl big_mlp_staged small_mlp; do
  grep -qE "^$name +PASS " "$table" && pass "$(grep -E "^$name " "$table" | tr -s ' ' | cut -c1-110)" ||
    fail "$name: $(grep -E "^$name " "$table" || echo 'no row')"
done
[ -f "$WORK/out/logs/fmnist_w1_nccl_fp32.log" ] && pass "the logs are in the output folder" || fail "no logs"
# Nothing reached for the hidden system files (a PMIx or Open MPI component path, say).
system=$(grep -h -m1 -E '/usr/lib/x86_64-linux-gnu/(openmpi|pmix2)/|/etc/openmpi' "$WORK/out/logs/"*.log | head -1 || true)
[ -z "$system" ] && pass "no log mentions the system's Open MPI or PMIx" || fail "the system's files were looked for: $system"

# CUDA's libraries hidden as well: one line, exit 2, at once.
cudart=$(ldd "$MPIDDP" | awk '/libcudart.so/ {found = $3} END {print found}')
if [ -n "$cudart" ]; then
  rc=0
  hidden bash -c 'mount -t tmpfs none "$1" && shift && "$@"' _ "$(dirname "$cudart")" \
    env GPU_CHECK_DRY_RUN=1 GPU_BUNDLE="$WORK/bundle" OUT= "$src/scripts/gpu-check.sh" "$WORK/out2" \
    > "$WORK/nocuda.log" 2>&1 || rc=$?
  [ "$rc" = 2 ] && [ "$(grep -c . "$WORK/nocuda.log")" = 1 ] && grep -q "libcudart.so.13 not found" "$WORK/nocuda.log" &&
    pass "missing CUDA library: $(cut -c1-90 "$WORK/nocuda.log")" || { fail "missing CUDA library: exit $rc"; cat "$WORK/nocuda.log" >&2; }
  # An NCCL older than the build's: a libnccl.so.2 that lacks the functions mpiddp calls, first on its path.
  if command -v cc >/dev/null && ldd "$MPIDDP" | grep -q 'libnccl.so.2'; then
    echo 'int ncclGetUniqueId(void* id) { (void)id; return 0; }' > "$WORK/old_nccl.c"
    cc -shared -fPIC -Wl,-soname,libnccl.so.2 -o "$WORK/bundle/lib/libnccl.so.2" "$WORK/old_nccl.c"
    rc=0
    GPU_CHECK_DRY_RUN=1 GPU_BUNDLE="$WORK/bundle" OUT= "$src/scripts/gpu-check.sh" "$WORK/out3" > "$WORK/oldnccl.log" 2>&1 ||
      rc=$?
    rm -f "$WORK/bundle/lib/libnccl.so.2"
    [ "$rc" = 2 ] && [ "$(grep -c . "$WORK/oldnccl.log")" = 1 ] && grep -q "older than the one" "$WORK/oldnccl.log" &&
      pass "old NCCL: $(cut -c1-100 "$WORK/oldnccl.log")" || { fail "old NCCL: exit $rc"; cat "$WORK/oldnccl.log" >&2; }
  fi
fi
finish
