"""The default process group of a run launched with `torchrun` / `accelerate launch`: is there one, ending it,
and ending a process that was a rank of one.

Why a rank leaves without the interpreter's teardown (found from a core dump of a rank of the FSDP test that
aborted after its work was done, "terminate called without an active exception", SIGABRT): a gloo worker thread
holds the last reference to a finished collective (`AsyncAllgatherCoalescedWork`) whose tensors still own their
Python objects, so freeing it needs the GIL. When the main thread has begun finalising the interpreter by then,
CPython ends the waiting thread with `pthread_exit` inside the work's C++ destructor, and the process aborts: a
finished `torchrun` run becomes a failed launch. `destroy_process_group` does not prevent it — gloo's threads
live as long as the process group object, and FSDP's mesh keeps that alive. A rank therefore flushes, runs the
`atexit` handlers and leaves with `os._exit` (as `multiprocessing`'s children do), while the interpreter is
still whole.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys

import torch

_ended_a_group = False


def process_group_is_up() -> bool:
    """True when torch.distributed is built in and its default process group is initialised."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def end_process_group() -> None:
    """Destroy the default process group (torch's shutdown contract; a local call, no collective); a no-op when
    there is none. Call it once the command's work has succeeded on this rank: after a failure other ranks may
    still wait in a collective, and the launcher tears the group down with the processes anyway."""
    global _ended_a_group
    if process_group_is_up():
        torch.distributed.destroy_process_group()
        _ended_a_group = True


def exit_if_a_rank(code: int) -> None:
    """In a rank of a launched run (a process group is up, or was ended by `end_process_group`): flush the
    output, run the `atexit` handlers and end the process with exit status `code` by `os._exit`, skipping the
    interpreter teardown during which gloo's worker threads can abort it (see the module docstring). Elsewhere
    return, and the caller exits as usual."""
    if not (_ended_a_group or process_group_is_up()):
        return
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
