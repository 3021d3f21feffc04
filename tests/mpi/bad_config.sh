#!/bin/sh
# One rank with a bad setting: every rank's first call fails, none hangs.
set -eu
out=$(mktemp)
cat > "$out.sh" <<'INNER'
#!/bin/sh
[ "${PMI_RANK:-0}" = 1 ] && export OPENREG_DEVICES=abc
exec ./tests/mpi/thread_level --expect-init-failure
INNER
chmod +x "$out.sh"
rc=0
timeout 60 mpiexec -n 3 env MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE "$out.sh" > "$out" 2>&1 || rc=$?
cat "$out"
failed=0
[ "$rc" -eq 0 ] || { echo "FAIL: a rank did not see orErrorInitialization (exit $rc)"; failed=1; }
grep -q "OPENREG_DEVICES='abc'" "$out" || { echo "FAIL: no message naming the variable"; failed=1; }
[ "$(grep -c "another rank's configuration is invalid" "$out")" -eq 2 ] ||
    { echo "FAIL: the healthy ranks did not say why"; failed=1; }
rm -f "$out" "$out.sh"
echo "bad config: $((1 - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
