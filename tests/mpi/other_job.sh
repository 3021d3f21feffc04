#!/bin/sh
# An IPC handle of one job is refused by another job.
set -eu
handle=$(mktemp)
timeout 60 mpiexec -n 1 ./tests/mpi/ipc_errors --write "$handle"
timeout 60 mpiexec -n 1 ./tests/mpi/ipc_errors --open "$handle"
rm -f "$handle"
echo "other job: 1 passed, 0 failed"
