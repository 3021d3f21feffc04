#!/bin/sh
# Settings every rank must share, set differently on rank 1: every rank
# stops at start-up, rank 0 and rank 1 name the variable and both values,
# the others say which ranks differ; settings that mean the same pass.
set -eu
out=$(mktemp)
failed=0 passed=0

# run NAME RANK0 RANK1 EXPECT PROGRAM...: NAME=RANK0 on rank 0, NAME=RANK1 on
# rank 1 and 2 ("-" leaves it unset); EXPECT is a line every run prints.
run() {
    name=$1 v0=$2 v1=$3 expect=$4
    shift 4
    cat > "$out.sh" <<INNER
#!/bin/sh
v=\$([ "\${PMI_RANK:-0}" = 0 ] && echo '$v0' || echo '$v1')
[ "\$v" = - ] || export $name="\$v"
exec "\$@"
INNER
    chmod +x "$out.sh"
    rc=0
    timeout 60 mpiexec -n 3 env MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE "$out.sh" "$@" \
        > "$out" 2>&1 || rc=$?
    ok=1
    [ "$rc" -ne 124 ] || { echo "FAIL: $name: the job hung"; ok=0; }
    [ -z "$expect" ] || grep -qF -- "$expect" "$out" || { echo "FAIL: $name: no line '$expect'"; ok=0; }
    if [ "$ok" = 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); cat "$out"; fi
}

differs() {
    run "$1" "$2" "$3" "openreg: $1 differs: rank 0 has $4, rank 1 has $5; every rank of a job must have the same" \
        ./tests/mpi/thread_level --expect-init-failure
    [ "$(grep -c "openreg: $1 differs: rank 0 has" "$out")" -eq 2 ] ||
        { echo "FAIL: $1: not both ranks named it"; failed=$((failed + 1)); }
    grep -qF "openreg: rank 2: $1 differs between ranks 0 and 1 (see their message); not starting" "$out" ||
        { echo "FAIL: $1: rank 2 did not say why"; failed=$((failed + 1)); }
}

differs OPENREG_RANKS_PER_NODE 2 1 2 1
differs OPENREG_RANKS_PER_NODE - 1 unset 1
differs OPENREG_TIME wall virtual wall virtual
differs OPENREG_TOPO "nodes:1 devices:6" "nodes:3 devices:2" "nodes:1 devices:6" "nodes:3 devices:2"
export OPENREG_TOPO="nodes:3 devices:2"
differs OPENREG_PLACEMENT packed spread packed spread
unset OPENREG_TOPO
# The collectives' setting, registered by liboccl: caught in the first
# runtime call of NCCL's example (rank 0's unique id needs no start-up).
run OCCL_ALGO ring tree "openreg: OCCL_ALGO differs: rank 0 has ring, rank 1 has tree" \
    ./tests/mpi/nccl_example2
run OCCL_CHECK_CALLS 0 1 "openreg: OCCL_CHECK_CALLS differs: rank 0 has 0, rank 1 has 1" \
    ./tests/mpi/nccl_example2
run OCCL_PROTO LL Simple "openreg: OCCL_PROTO differs: rank 0 has LL, rank 1 has Simple" \
    ./tests/mpi/nccl_example2
# The same setting spelled two ways, or unset and its default: the job runs.
run OPENREG_RANKS_PER_NODE - 0 "" ./tests/mpi/thread_level --expect-success
[ "$rc" -eq 0 ] || { echo "FAIL: unset and 0 ranks per node differ"; cat "$out"; failed=$((failed + 1)); }
run OPENREG_TIME virtual VIRTUAL "" ./tests/mpi/thread_level --expect-success
[ "$rc" -eq 0 ] || { echo "FAIL: virtual and VIRTUAL differ"; cat "$out"; failed=$((failed + 1)); }
run OCCL_CHECK_CALLS - 1 "" env OPENREG_DEVICES=3 ./tests/mpi/nccl_example2
[ "$rc" -eq 0 ] || { echo "FAIL: unset and 1 OCCL_CHECK_CALLS differ"; cat "$out"; failed=$((failed + 1)); }
rm -f "$out" "$out.sh"
echo "config agree: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
