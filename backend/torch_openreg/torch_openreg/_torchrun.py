"""Processes started by torchrun become one MPI job, as under orrun.

The runtime's ranks are MPI ranks (peer copies, OCCL). mpiexec starts them
with a process manager that MPICH's ranks find through PMI; torchrun starts
its workers with only RANK, WORLD_SIZE and its rendezvous store. So here,
before the runtime's first call: rank 0 starts a PMI server
(_pmi_server.py, a process beside it), puts its address in torchrun's store,
and every rank points MPICH at it (PMI_PORT, PMI_ID = RANK). MPI_Init then
makes the torchrun workers one MPI world whose ranks are torchrun's, and
nodes are torchrun's (GROUP_RANK, LOCAL_WORLD_SIZE).

OPENREG_BOOTSTRAP_TIMEOUT (seconds, default 300) bounds the wait for the
store and for rank 0's address.
"""

import datetime
import os
import socket
import subprocess
import sys
import warnings

_MPI_LAUNCHER_VARS = ("PMI_RANK", "PMI_FD", "PMI_SIZE", "PMI_PORT", "PMIX_RANK",
                      "OMPI_COMM_WORLD_RANK")

# The PMI server of this process (rank 0), kept running until it exits.
_server = None


def _under_torchrun():
    return "TORCHELASTIC_RUN_ID" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1


def _timeout():
    raw = os.environ.get("OPENREG_BOOTSTRAP_TIMEOUT", "300")
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1
    if not seconds > 0:
        raise RuntimeError(f"torch_openreg: OPENREG_BOOTSTRAP_TIMEOUT={raw!r} is not a positive "
                           "number of seconds")
    return seconds


def _process_mapping(world, local, nodes):
    """MPICH's PMI_process_mapping: torchrun's ranks are numbered node by
    node, LOCAL_WORLD_SIZE on each (empty when the nodes differ in size)."""
    if nodes * local != world:
        return ""
    return f"(vector,(0,{nodes},{local}))"


def _start_server(world, local, nodes):
    global _server
    here = os.path.dirname(os.path.abspath(__file__))
    host = "127.0.0.1" if nodes == 1 else "0.0.0.0"
    _server = subprocess.Popen(
        [sys.executable, "-I", os.path.join(here, "_pmi_server.py"), str(world), host,
         _process_mapping(world, local, nodes)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = _server.stdout.readline().strip()
    if not line.isdigit():
        raise RuntimeError("torch_openreg: the PMI server for the torchrun job did not start "
                           f"(exit status {_server.poll()})")
    advertised = "127.0.0.1" if nodes == 1 else socket.getfqdn()
    return f"{advertised}:{int(line)}"


def bootstrap():
    """Under torchrun with several workers and no MPI launcher: make them one
    MPI job (above). Anywhere else, nothing."""
    if not _under_torchrun() or any(v in os.environ for v in _MPI_LAUNCHER_VARS):
        return
    env = os.environ
    if env.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        warnings.warn("torch_openreg: torchrun gave its workers no store of its agent "
                      "(TORCHELASTIC_USE_AGENT_STORE is not True), so each worker is a cluster "
                      "of its own and an occl group of several ranks cannot form; launch with "
                      "orrun or mpiexec, or torchrun with its default rendezvous")
        return
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    local = int(env.get("LOCAL_WORLD_SIZE", world))
    nodes = int(env.get("GROUP_WORLD_SIZE", 1))
    timeout = _timeout()
    import torch.distributed as dist

    host, port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
    try:
        store = dist.TCPStore(host, port, world, is_master=False,
                              timeout=datetime.timedelta(seconds=timeout))
    except Exception as e:  # torch raises several kinds for one cause
        raise RuntimeError(f"torch_openreg: rank {rank} cannot reach torchrun's store at "
                           f"{host}:{port} within {timeout:g} s: {e}") from None
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    key = f"torch_openreg/pmi/{env['TORCHELASTIC_RUN_ID']}/{restart}"
    if rank == 0:
        store.set(key, _start_server(world, local, nodes))
    try:
        address = store.get(key).decode()
    except Exception as e:
        raise RuntimeError(f"torch_openreg: rank {rank} had no address of rank 0's PMI server "
                           f"in torchrun's store within {timeout:g} s ({e}); did rank 0 "
                           "start?") from None
    env["PMI_PORT"] = address
    env["PMI_ID"] = str(rank)
