"""A PMI-1 server: what mpiexec's process manager gives MPICH's ranks, for
ranks started by torchrun instead (torch_openreg._torchrun starts it).

    python _pmi_server.py SIZE BIND_HOST PROCESS_MAPPING

prints the port it listens on, then serves SIZE ranks that connect with
PMI_PORT=host:port and PMI_ID=rank: their init, the key-value space they
exchange addresses through, barriers and finalize (the wire protocol of PMI
version 1.1, as MPICH's simple PMI client speaks it). It exits once every rank
that connected has gone and its parent (the process that started it, which
holds its standard input) has too. Standard library only: it runs beside
the ranks, before any of them has imported torch.
"""

import socket
import sys
import threading


class Job:
    def __init__(self, size, mapping):
        self.size = size
        self.mapping = mapping
        self.kvs = {}
        self.lock = threading.Condition()
        self.waiting = 0  # ranks in the current barrier
        self.generation = 0  # barriers completed
        self.live = 0  # connected ranks
        self.parent_gone = False

    def barrier(self):
        with self.lock:
            generation = self.generation
            self.waiting += 1
            if self.waiting == self.size:
                self.waiting = 0
                self.generation += 1
                self.lock.notify_all()
            while self.generation == generation:
                self.lock.wait()


def parse(line):
    fields = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    return fields


def replies(job, rank, fields):
    """The server's lines for one request (rank is None before initack)."""
    cmd = fields.get("cmd")
    if cmd == "initack":
        try:
            pmiid = int(fields.get("pmiid", ""))
        except ValueError:
            pmiid = -1
        if not 0 <= pmiid < job.size:
            raise ValueError(f"PMI_ID {fields.get('pmiid')!r} is not a rank of {job.size}")
        return pmiid, ["cmd=initack", f"cmd=set size={job.size}", f"cmd=set rank={pmiid}",
                       "cmd=set debug=0"]
    if cmd == "init":
        return rank, ["cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"]
    if cmd == "get_maxes":
        return rank, ["cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=1024"]
    if cmd == "get_appnum":
        return rank, ["cmd=appnum appnum=0"]
    if cmd == "get_my_kvsname":
        return rank, ["cmd=my_kvsname kvsname=openreg"]
    if cmd == "get_universe_size":
        return rank, [f"cmd=universe_size size={job.size}"]
    if cmd == "put":
        with job.lock:
            job.kvs[fields.get("key", "")] = fields.get("value", "")
        return rank, ["cmd=put_result rc=0"]
    if cmd == "get":
        key = fields.get("key", "")
        with job.lock:
            value = job.kvs.get(key)
        if value is None and key == "PMI_process_mapping" and job.mapping:
            value = job.mapping
        if value is None:
            return rank, [f"cmd=get_result rc=-1 msg=key_{key}_not_found"]
        return rank, [f"cmd=get_result rc=0 value={value}"]
    if cmd == "barrier_in":
        job.barrier()
        return rank, ["cmd=barrier_out"]
    if cmd == "finalize":
        return rank, ["cmd=finalize_ack"]
    if cmd == "abort":
        sys.stderr.write(f"openreg PMI server: rank {rank} aborted the job "
                         f"(exit code {fields.get('exitcode', '?')})\n")
        return rank, []
    # publish_name, lookup_name, spawn: what a torchrun job does not offer.
    return rank, [f"cmd={cmd}_result rc=-1 msg=unsupported_by_the_openreg_PMI_server"]


def serve(job, conn):
    rank = None
    try:
        with conn, conn.makefile("rwb", buffering=0) as f:
            for raw in f:
                try:
                    rank, out = replies(job, rank, parse(raw.decode("ascii", "replace")))
                except ValueError as e:
                    sys.stderr.write(f"openreg PMI server: {e}\n")
                    return
                for line in out:
                    f.write((line + "\n").encode())
                if out == ["cmd=finalize_ack"]:
                    return
    except OSError:
        pass
    finally:
        with job.lock:
            job.live -= 1
            job.lock.notify_all()


def watch_parent(job):
    sys.stdin.buffer.read()  # returns at EOF: the parent has exited
    with job.lock:
        job.parent_gone = True
        job.lock.notify_all()


def main():
    size, host, mapping = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    job = Job(size, mapping)
    listener = socket.create_server((host, 0), backlog=size)
    listener.settimeout(0.5)
    print(listener.getsockname()[1], flush=True)
    threading.Thread(target=watch_parent, args=(job,), daemon=True).start()
    accepted = 0
    while True:
        with job.lock:
            if job.parent_gone and job.live == 0:
                return
        if accepted == size:
            with job.lock:
                job.lock.wait(0.5)
            continue
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        conn.settimeout(None)
        accepted += 1
        with job.lock:
            job.live += 1
        threading.Thread(target=serve, args=(job, conn), daemon=True).start()


if __name__ == "__main__":
    main()
