"""The training input pipeline's settings (issue #48, "a pipeline that keeps the GPU busy").

Three choices, each measured by ``bench/gpu_training.py --split``:

- **Padding to a multiple of 8 on CUDA** (`PAD_MULTIPLE`, `pad_multiple`): the training collator pads source and target lengths up to a
  multiple of 8 (tensor-core friendly shapes; at most 7 more positions per side) and `TokenBudgetBatchSampler`
  counts its budget on those padded lengths, so a batch's padded size still stays ≤ ``max_tokens`` and batch
  shapes fall into length buckets of 8: fewer distinct shapes for cuBLAS / cuDNN to select kernels for (and for
  `torch.compile` to see). Padded label positions are -100 and padded source positions are masked, so the loss
  and the gradients are those of the unpadded batch (``tests/benchmarks/test_gpu_bench.py`` checks both). The price is
  compute on padding: on Multi30k-length sentences (~14 tokens) about 3.5 more positions per sentence and side,
  and a source side that no longer skips its attention mask when a batch's sources have equal lengths
  (Transformers' `padding_mask.all()` check). So it is on where shapes matter (CUDA: kernel selection,
  `torch.compile`, CUDA graphs) and off on CPU, where it buys nothing; the bench's ``trainer`` rows measure both.
- **Length buckets on CUDA** (issue #55, `bucket_lengths`): on top of the multiple of 8, each side's length is
  padded up to a small fixed set of buckets (`data.batching.length_buckets`: 8, 16, 24, 32, 48, 72, 112, ...), so a
  whole epoch has about a dozen length shapes instead of one per multiple of 8 — what a per-shape cost (cuDNN's
  SDPA plans, `torch.compile`'s guards) pays for. On CPU a shape change costs nothing measurable and padding costs
  arithmetic, so exact lengths stay (bench/results/length_buckets_cpu.md measures the three plans side by side).
- **Collation off the main process** (`loader_workers`): on CUDA the batches are padded by
  `dataloader_num_workers` worker processes (persistent across epochs, pinned memory), so the main process only
  launches kernels; on CPU the workers would take cores from the arithmetic, so 0 (collation in the main
  process, as before).
- **No device sync per step**: `DeepNMTTrainer` keeps the tokens seen and the loss components as device tensors
  and reads them only at logging steps (trainer.py).
"""

from __future__ import annotations

from typing import Any

import torch

PAD_MULTIPLE = 8
CUDA_WORKERS = 2


def loader_workers(requested: int | None = None) -> int:
    """Collating processes for training: `requested` when given, else `CUDA_WORKERS` on CUDA and 0 without."""
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 0:
            raise ValueError(f"dataloader_workers={requested!r} must be an integer >= 0 (or None: automatic)")
        return requested
    return CUDA_WORKERS if torch.cuda.is_available() else 0


def loader_arguments(requested: int | None = None) -> dict[str, Any]:
    """The `TrainingArguments` loader fields: workers, persistent workers and pinned memory (CUDA only)."""
    workers = loader_workers(requested)
    return {
        "dataloader_num_workers": workers,
        "dataloader_persistent_workers": workers > 0,
        "dataloader_pin_memory": torch.cuda.is_available(),
        "dataloader_prefetch_factor": 4 if workers > 0 else None,
    }


def pad_multiple() -> int | None:
    """The training collator's padding multiple: `PAD_MULTIPLE` on CUDA, None (the longest example) without."""
    return PAD_MULTIPLE if torch.cuda.is_available() else None


def bucket_lengths(max_length: int) -> tuple[int, ...] | None:
    """The training collator's length buckets: `length_buckets(max_length)` on CUDA, None (no buckets) without."""
    from ..data.batching import length_buckets

    return length_buckets(max_length) if torch.cuda.is_available() else None


def training_collator(
    tokenizer: Any,
    model: Any,
    pad_to_multiple_of: int | str | None = "auto",
    buckets: tuple[int, ...] | str | None = "auto",
) -> Any:
    """`DataCollatorForSeq2Seq` as run_translation.py builds it (decoder inputs from the model, -100 label
    padding), padding lengths to a multiple of `pad_to_multiple_of` ("auto": `pad_multiple()`; None: to the
    longest example only), then up to length `buckets` ("auto": `bucket_lengths` up to the model's
    `max_position_embeddings`; None: none; `data.batching.BucketPadding`)."""
    from transformers import DataCollatorForSeq2Seq

    from ..data.batching import BucketPadding

    if pad_to_multiple_of == "auto":
        pad_to_multiple_of = pad_multiple()
    collator = DataCollatorForSeq2Seq(
        tokenizer, model=model, label_pad_token_id=-100, pad_to_multiple_of=pad_to_multiple_of
    )
    if buckets == "auto":
        config = getattr(model, "config", None)
        buckets = bucket_lengths(int(getattr(config, "max_position_embeddings", 1024) or 1024))
    if not buckets:
        return collator
    return BucketPadding(collator, buckets, tokenizer.pad_token_id)
