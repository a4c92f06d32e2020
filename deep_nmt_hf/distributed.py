"""The default process group of a run launched with `torchrun` / `accelerate launch`: is there one, and ending it.

torch's shutdown contract (the `destroy_process_group` documentation): a process that used a process group
destroys it before it exits. A gloo group left to the interpreter's teardown can abort the process after its
work is done — gloo's worker threads outlive the interpreter ("terminate called without an active exception",
SIGABRT), which turns a finished `torchrun` run into a failed launch.
"""

from __future__ import annotations

import torch


def process_group_is_up() -> bool:
    """True when torch.distributed is built in and its default process group is initialised."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def end_process_group() -> None:
    """Destroy the default process group (a local call, no collective); a no-op when there is none.

    Call it once the command's work has succeeded on this rank: after a failure other ranks may still wait in a
    collective, and the launcher tears the group down with the processes anyway."""
    if process_group_is_up():
        torch.distributed.destroy_process_group()
