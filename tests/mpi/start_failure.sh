#!/bin/sh
# One rank cannot reserve its device memory: every rank's first call fails
# with orErrorInitialization, none waits forever, and /dev/shm stays clean.
set -eu
# AddressSanitizer reserves terabytes of shadow memory, so an address-space
# limit stops the process before the runtime can fail: skip in such builds.
if nm -D ./tests/mpi/.libs/thread_level ./tests/mpi/thread_level 2>/dev/null | grep -q __asan_init; then
    echo "start failure: skipped under AddressSanitizer"
    exit 77
fi
out=$(mktemp)
cat > "$out.sh" <<'INNER'
#!/bin/sh
# Rank 1 gets too little address space for an 8 GiB device.
[ "${PMI_RANK:-0}" = 1 ] && ulimit -v 4000000
exec ./tests/mpi/thread_level --expect-init-failure
INNER
chmod +x "$out.sh"
rc=0
timeout 60 mpiexec -n 3 env OPENREG_DEVICE_MEM=8G MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE \
    "$out.sh" > "$out" 2>&1 || rc=$?
cat "$out"
failed=0
[ "$rc" -eq 0 ] || { echo "FAIL: a rank did not see orErrorInitialization (exit $rc)"; failed=1; }
grep -q "cannot reserve" "$out" || { echo "FAIL: the failing rank did not say why"; failed=1; }
[ "$(grep -c "another rank failed to start" "$out")" -eq 2 ] ||
    { echo "FAIL: the other ranks did not say why"; failed=1; }
rm -f "$out" "$out.sh"
echo "start failure: $((1 - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
