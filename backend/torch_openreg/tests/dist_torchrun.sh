#!/bin/sh
# Scripts started by torchrun on one node, without mpiexec:
#   torchrun --standalone --nproc-per-node N script.py
# torch_openreg makes the workers one MPI job (torch_openreg/_torchrun.py):
# dist_env.py's checks on 2 ranks (env://, gloo beside occl, the group's
# timeout), every collective of dist_collectives.py on 3 ranks; then the
# bootstrap's errors, each a clear message: a bad OPENREG_BOOTSTRAP_TIMEOUT,
# a store that cannot be reached, rank 0's address never published, and a
# torchrun without its agent's store (a warning, the worker then alone).
# Runs from the build directory ('make check'); exits non-zero on failure.
set -eu
here=$(dirname "$0")
python=./backend/torch_openreg/tests/torch-python
if [ ! -x "$python" ]; then
    echo "dist_torchrun.sh: $python is missing ('make check' makes it)" >&2
    exit 99
fi
out=$(mktemp "${TMPDIR:-/tmp}/dist_torchrun.XXXXXX")
store=$(mktemp -u "${TMPDIR:-/tmp}/dist_torchrun_store.XXXXXX")
trap 'rm -f "$out" "$store"' EXIT
failed=0
. "$here/dist_env_expect.sh"
bad() {
    echo "dist torchrun: FAIL: $1"
    failed=1
}

torchrun() {
    OPENREG_DEVICES=1 timeout --kill-after=10 240 "$python" -m torch.distributed.run \
        --standalone "$@"
}

rc=0
torchrun --nproc-per-node 2 "$here/dist_env.py" >"$out" 2>&1 || rc=$?
cat "$out"
dist_env_expect "$rc" "$out" || bad "dist_env.py on 2 torchrun workers"

rc=0
torchrun --nproc-per-node 3 "$here/dist_collectives.py" "$store" >"$out" 2>&1 || rc=$?
cat "$out"
if [ "$rc" -ne 0 ] ||
    [ "$(count_in "$out" 'rank [012]: dist collectives: [0-9]* checks passed')" -ne 3 ]; then
    bad "dist_collectives.py on 3 torchrun workers (exit status $rc)"
fi

# A worker as torchrun starts it, alone: its environment, then the import.
worker() {
    env TORCHELASTIC_RUN_ID=check TORCHELASTIC_USE_AGENT_STORE=True RANK=1 WORLD_SIZE=2 \
        LOCAL_WORLD_SIZE=2 GROUP_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 "$@"
}
expect_error() { # what, text, command...
    what=$1 text=$2
    shift 2
    rc=0
    "$@" >"$out" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ] || ! grep -q -- "$text" "$out"; then
        cat "$out"
        bad "$what: exit status $rc, no '$text'"
    else
        echo "dist torchrun: $what: $(grep -m1 -o -- "$text.*" "$out")"
    fi
}
closed_port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
expect_error "bad timeout" "OPENREG_BOOTSTRAP_TIMEOUT='soon' is not a positive number" \
    worker MASTER_PORT="$closed_port" OPENREG_BOOTSTRAP_TIMEOUT=soon \
    "$python" -c 'import torch_openreg'
expect_error "no store" "rank 1 cannot reach torchrun's store at 127.0.0.1:$closed_port within 2 s" \
    worker MASTER_PORT="$closed_port" OPENREG_BOOTSTRAP_TIMEOUT=2 \
    timeout 180 "$python" -c 'import torch_openreg'
# A store whose rank 0 never puts its address (made before torch_openreg
# loads, so not by import torch's autoload).
expect_error "no rank 0" "rank 1 had no address of rank 0's PMI server in torchrun's store within 2 s" \
    worker OPENREG_BOOTSTRAP_TIMEOUT=2 TORCH_DEVICE_BACKEND_AUTOLOAD=0 timeout 180 "$python" -c '
import os, torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
os.environ["MASTER_PORT"] = str(store.port)
import torch_openreg'
rc=0
worker TORCHELASTIC_USE_AGENT_STORE= MASTER_PORT="$closed_port" timeout 180 "$python" -c '
import torch, torch_openreg
x = torch.ones(3, device="openreg")
print("alone:", x.sum().item())' >"$out" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] || ! grep -q "each worker is a cluster of its own" "$out" ||
    ! grep -q "alone: 3.0" "$out"; then
    cat "$out"
    bad "no agent store: exit status $rc, no warning or no work"
else
    echo "dist torchrun: no agent store: warned, the worker runs alone"
fi

[ "$failed" -eq 0 ] || exit 1
echo "dist torchrun: torchrun --nproc-per-node 2 and 3 as one MPI job, bootstrap errors: ok"
