"""What the multi-rank test scripts share: this rank and the world's size
(from orrun's or mpiexec's environment), and failing with the rank named."""

import os
import sys

RANK = int(os.environ.get("RANK", os.environ.get("PMI_RANK", "0")))
SIZE = int(os.environ.get("WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))


def fail(msg):
    print(f"rank {RANK}: FAIL: {msg}", flush=True)
    sys.exit(1)
