"""Worker for tests/training/test_distributed.py: one rank of a 2-process gloo group that ends while a gloo worker thread
still has to free a finished collective (the hazard `deep_nmt_hf.training.distributed.exit_if_a_rank` avoids).

``python gloo_exit_race.py RANK STORE_FILE MODE``. Rank 1 starts an async all-gather and drops its tensors and
handle, so the gloo worker thread holds their last reference; rank 0 joins 0.3 s later (and ends with nothing
left to free). Rank 1's first-registered (so last-run) `atexit` handler holds the GIL in pure Python until 1.5 s
after the all-gather began (switch interval 1000 s: the waiting worker cannot make it drop the GIL), so the worker
can only take the GIL once the interpreter has begun finalising. MODE ``plain`` then lets the interpreter
finalise, and the process aborts; MODE ``exit`` ends through `exit_if_a_rank`, with an `atexit` handler and
buffered output that must not be lost.
"""

from __future__ import annotations

import atexit
import sys
import time

_HOLD_UNTIL: list[float] = []  # rank 1: when its atexit handler may let the GIL go


def _hold_the_gil() -> None:
    sys.setswitchinterval(1000.0)
    while _HOLD_UNTIL and time.perf_counter() < _HOLD_UNTIL[0]:
        pass


# registered before the libraries register theirs, so that it runs after them (atexit is last in, first out):
# a library handler that lets the GIL go after this one would let the worker free its work safely
atexit.register(_hold_the_gil)

import torch  # noqa: E402

from deep_nmt_hf.training.distributed import exit_if_a_rank  # noqa: E402


def main(rank: int, store_file: str, mode: str) -> None:
    torch.distributed.init_process_group(
        "gloo", store=torch.distributed.FileStore(store_file, 2), rank=rank, world_size=2
    )
    torch.distributed.barrier()
    out, mine = torch.empty(2 * 1000), torch.full((1000,), float(rank))
    if rank == 0:  # joins late, waits, and lets its own worker free the work before it ends (no race here)
        time.sleep(0.3)
        torch.distributed.all_gather_single(out, mine)
        time.sleep(0.2)
    else:
        _HOLD_UNTIL.append(time.perf_counter() + 1.5)
        work = torch.distributed.all_gather_single(out, mine, async_op=True)
        del out, mine, work
    if mode == "exit":
        atexit.register(print, f"rank {rank}: atexit handler ran")
        print(f"rank {rank}: buffered output", end="")  # no newline: still in stdout's buffer
        exit_if_a_rank(7)
        raise AssertionError("exit_if_a_rank returned in a rank")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
