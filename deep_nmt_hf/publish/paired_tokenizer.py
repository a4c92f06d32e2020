"""Two vocabularies, one tokenizer face: a converted model whose source and target vocabularies differ (zero's
WMT14 En-De models: subword units collected independently on each side, dsinit-merged-attention sec. 5) keeps a
`source_tokenizer/` and a `target_tokenizer/` in its folder; `PairedTokenizer` encodes with the first and decodes
with the second, so that `deep-nmt translate` (training/translation.py: call, `len`, `pad`, `batch_decode`)
translates with it as with one tokenizer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SOURCE_DIR, TARGET_DIR = "source_tokenizer", "target_tokenizer"


class PairedTokenizer:
    """Encode (and pad) with `source`, decode with `target`."""

    def __init__(self, source: Any, target: Any) -> None:
        self.source, self.target = source, target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.source(*args, **kwargs)

    def __len__(self) -> int:
        return len(self.source)

    def pad(self, *args: Any, **kwargs: Any) -> Any:
        return self.source.pad(*args, **kwargs)

    def decode(self, *args: Any, **kwargs: Any) -> str:
        return self.target.decode(*args, **kwargs)

    def batch_decode(self, *args: Any, **kwargs: Any) -> list[str]:
        return self.target.batch_decode(*args, **kwargs)


def has_paired_tokenizers(model_dir: str | Path) -> bool:
    """Whether a local model folder holds `source_tokenizer/` and `target_tokenizer/` (and no tokenizer of its own)."""
    folder = Path(model_dir).expanduser()
    return (
        (folder / SOURCE_DIR).is_dir()
        and (folder / TARGET_DIR).is_dir()
        and not (folder / "tokenizer.json").exists()
    )


def load_paired_tokenizer(model_dir: str | Path) -> PairedTokenizer:
    from transformers import AutoTokenizer

    folder = Path(model_dir).expanduser()
    return PairedTokenizer(
        AutoTokenizer.from_pretrained(folder / SOURCE_DIR), AutoTokenizer.from_pretrained(folder / TARGET_DIR)
    )


__all__ = ["PairedTokenizer", "has_paired_tokenizers", "load_paired_tokenizer"]
