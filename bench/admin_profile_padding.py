"""ADMIN profiling with and without padded positions (issue #26): how ω moves with the padding of the batch.

The same 32 sentence pairs (synthetic lengths 4-30) are profiled in three batches: padded to their own longest
member (a random first-N batch: much padding), sorted into a token-budget batch (little padding) and padded 2x
wider. "all" takes the variances over every position as the authors' code (np.var of the flattened tensor),
"non_pad" over the real tokens. Reported: the last encoder and decoder ω of an ADMIN 18-6 at d 64 (xavier init).

    python -m bench.admin_profile_padding
"""

from __future__ import annotations

import torch

from bench.lib.common import markdown_table, write_results
from deep_nmt_hf import AdminConfig, AdminForConditionalGeneration
from deep_nmt_hf.training.admin_profiling import admin_profile

VOCAB, PAD, EOS = 400, 399, 0


def batch_of(lengths: list[int], width: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Sources and targets of the given lengths, right-padded to `width`."""
    generator = torch.Generator().manual_seed(seed)
    rows = [torch.randint(2, VOCAB - 2, (n - 1,), generator=generator).tolist() + [EOS] for n in lengths]
    ids = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
    labels = torch.tensor([r + [-100] * (width - len(r)) for r in rows])
    return {"input_ids": ids, "attention_mask": ids.ne(PAD).long(), "labels": labels}


def main() -> None:
    lengths = torch.randint(4, 31, (32,), generator=torch.Generator().manual_seed(1)).tolist()
    config = AdminConfig.from_preset(
        "18L-18L", decoder_layers=6, d_model=64, encoder_ffn_dim=256, decoder_ffn_dim=256,
        encoder_attention_heads=4, decoder_attention_heads=4, vocab_size=VOCAB, pad_token_id=PAD,
        eos_token_id=EOS, decoder_start_token_id=PAD, max_position_embeddings=128,
    )  # fmt: skip
    torch.manual_seed(0)
    model = AdminForConditionalGeneration(config)
    batches = {
        "sorted (token-budget order)": batch_of(sorted(lengths), max(lengths)),
        "unsorted, padded to longest": batch_of(lengths, max(lengths)),
        "unsorted, padded 2x longest": batch_of(lengths, 2 * max(lengths)),
    }
    rows, payload = [], {}
    for name, batch in batches.items():
        padding = 1 - batch["attention_mask"].float().mean().item()
        result = {}
        for positions in ("all", "non_pad"):
            omegas = admin_profile(model, batch, seed=0, positions=positions)
            result[positions] = {side: round(values[-1], 4) for side, values in omegas.items()}
        payload[name] = {"padding_fraction": round(padding, 3), **result}
        rows.append(
            [name, f"{padding:.2f}", result["all"]["encoder"], result["non_pad"]["encoder"],
             result["all"]["decoder"], result["non_pad"]["decoder"]]
        )  # fmt: skip
    table = markdown_table(
        ["batch", "padding", "enc ω_last all", "enc ω_last non_pad", "dec ω_last all", "dec ω_last non_pad"],
        rows,
    )
    write_results("admin_profile_padding", payload, table)
    print(table)


if __name__ == "__main__":
    main()
