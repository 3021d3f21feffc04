#!/bin/sh
# run-mpi.sh SPEC - run one multi-rank test described by a .mpi file.
#
# A spec holds shell assignments:
#   ranks=4                          (mpiexec -n)
#   program=tests/mpi/ring           (relative to the build directory)
#   args="..."                       (optional)
#   env="OPENREG_DEVICES=2 ..."      (optional, passed to every rank)
#   export NAME="a value with spaces" (also reaches every rank)
#   timeout=120                      (optional, seconds; the job is killed after)
# Criterion cannot run under mpiexec (it forks), so multi-rank tests are
# plain programs that exit non-zero on failure; this wrapper launches them.
set -eu
spec=$1
ranks=1 program= args= env= timeout=120
. "$spec"
[ -n "$program" ] || { echo "run-mpi.sh: $spec names no program" >&2; exit 99; }
echo "run-mpi.sh: mpiexec -n $ranks $env $program $args"
# shellcheck disable=SC2086
exec timeout --kill-after=10 "$timeout" mpiexec -n "$ranks" env $env "./$program" $args
