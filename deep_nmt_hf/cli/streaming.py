"""Line-by-line stdin for `deep-nmt translate`: decode each line on its own, batch lines as they arrive.

A batch is at most `batch_size` lines, or fewer: whatever has arrived when the translator is ready and stdin has
nothing more for now (an interactive user, a slow pipe) or has ended. So a pipe of a big file gets full batches
while `echo ... | deep-nmt translate` and a terminal get an answer per line, and every batch is flushed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import BinaryIO

_END = object()


class UndecodableLine:
    """A stdin line that is not valid in the chosen encoding (with ``errors="strict"``)."""

    def __init__(self, number: int, error: UnicodeDecodeError, encoding: str) -> None:
        self.number = number
        self.message = (
            f"stdin line {number}: not valid {encoding} ({error.reason} at byte {error.start}); its output line "
            "is left empty (pass --errors replace to translate it with U+FFFD for the bad bytes)"
        )


def decode_lines(
    stream: BinaryIO, encoding: str = "utf-8", errors: str = "strict"
) -> Iterator[str | UndecodableLine]:
    """Each line of `stream` without its line ending, decoded on its own; an `UndecodableLine` in its place when
    it cannot be decoded with ``errors="strict"`` (the lines around it are unaffected)."""
    for number, raw in enumerate(iter(stream.readline, b""), start=1):
        raw = raw.rstrip(b"\r\n")
        try:
            yield raw.decode(encoding, errors=errors)
        except UnicodeDecodeError as error:
            yield UndecodableLine(number, error, encoding)


def arriving_batches(lines: Iterator[str | UndecodableLine], batch_size: int) -> Iterator[list]:
    """Group `lines` into batches of at most `batch_size`, without waiting for more than has already arrived
    (a reader thread fills a queue; a batch takes the first line, blocking, then whatever else is queued)."""
    if batch_size < 1:
        raise ValueError(f"--batch-size {batch_size}: must be at least 1")
    arrived: queue.Queue = queue.Queue()

    def read() -> None:
        try:
            for line in lines:
                arrived.put(line)
        except BaseException as error:  # handed to the consumer, which raises it
            arrived.put(error)
        arrived.put(_END)

    threading.Thread(target=read, name="stdin-reader", daemon=True).start()
    done = False
    while not done:
        batch = []
        item = arrived.get()
        while True:
            if item is _END:
                done = True
                break
            if isinstance(item, BaseException):
                raise item
            batch.append(item)
            if len(batch) >= batch_size:
                break
            try:
                item = arrived.get_nowait()
            except queue.Empty:
                break
        if batch:
            yield batch
