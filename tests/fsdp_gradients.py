"""Worker for tests/training/test_sharding.py, run with ``torchrun --nproc_per_node 2``: for every variant, the gradient
that FSDP2 leaves in each rank's shard, with the batch split over the ranks, gathered into the full gradient,
against one unsharded copy of the model on the whole batch. Rank 0 prints one JSON object: variant -> the
largest relative difference over the parameters (k_proj biases left out: their gradient is zero in exact
arithmetic, so only rounding noise is compared there)."""

from __future__ import annotations

import copy
import json

import torch

from deep_nmt_hf import VARIANTS
from deep_nmt_hf.training import resolve_variant
from deep_nmt_hf.training.distributed import end_process_group, exit_if_a_rank
from deep_nmt_hf.training.sharding import shard_model


def main() -> None:
    torch.distributed.init_process_group("gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    worst: dict[str, float] = {}
    for name in sorted(VARIANTS):
        config_class, model_class = resolve_variant(name)
        fields = dict(
            vocab_size=48, pad_token_id=47, eos_token_id=0, decoder_start_token_id=47, d_model=32,
            encoder_layers=3, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, dropout=0.0,
            attention_dropout=0.0, activation_dropout=0.0,
        )  # fmt: skip
        torch.manual_seed(0)
        reference = model_class(config_class(**fields)).train()
        sharded = shard_model(copy.deepcopy(reference))
        generator = torch.Generator().manual_seed(1)
        ids = torch.randint(2, 46, (2 * world, 7), generator=generator)
        labels = torch.randint(2, 46, (2 * world, 6), generator=generator)  # equal token counts per rank
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
        torch.manual_seed(3)
        reference(**batch).loss.backward()
        torch.manual_seed(3)
        sharded(**{k: v[2 * rank : 2 * rank + 2] for k, v in batch.items()}).loss.backward()
        worst[name] = 0.0
        for (param_name, full), shard in zip(reference.named_parameters(), sharded.parameters(), strict=True):
            if full.grad is None or param_name.endswith("k_proj.bias"):
                continue
            gathered = shard.grad.full_tensor()  # collective: every rank
            scale = full.grad.abs().max().clamp_min(1e-8)
            worst[name] = max(worst[name], ((gathered - full.grad).abs().max() / scale).item())
    if rank == 0:
        print(json.dumps(worst))
    end_process_group()
    exit_if_a_rank(0)  # gloo's threads must not outlive the interpreter (deep_nmt_hf/training/distributed.py)


if __name__ == "__main__":
    main()
