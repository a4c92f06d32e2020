"""Export to CTranslate2: fold into a stock class when needed, then run CTranslate2's own Transformers converter.

CTranslate2's Marian loader drops the last vocabulary entry when it is `<pad>` and starts the decoder from a zero
embedding; our tokenizer puts `<pad>` last and the pad embedding row stays zero (it is nn.Embedding's padding_idx),
so a folded post-LN model converts with the same outputs (tested: beam outputs equal HF's on a probe set).
Pre-LN models fold into Pegasus, which CTranslate2 does not convert: they raise with a clear message.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .folding import fold_directory

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16")


def export_ctranslate2(model_dir: str | Path, out_dir: str | Path, quantization: str | None = None) -> Path:
    """Write a CTranslate2 model directory for `model_dir` (a deep_nmt_hf or an already folded stock model)."""
    try:
        from ctranslate2.converters import TransformersConverter
    except ImportError as error:
        raise RuntimeError("CTranslate2 is not installed: pip install 'deep_nmt_hf[ctranslate2]'") from error
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization={quantization!r} is not one of: {', '.join(QUANTIZATIONS)}")
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir} is not a saved model directory (no config.json)")
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} exists already; choose a new output directory")
    model_type = json.loads((model_dir / "config.json").read_text()).get("model_type", "")
    work = Path(tempfile.mkdtemp(prefix="deep_nmt_export_"))
    try:
        stock_dir = model_dir
        if model_type.startswith("deep_nmt"):
            stock_dir = work / "folded"
            fold_directory(model_dir, stock_dir)
            model_type = json.loads((stock_dir / "config.json").read_text())["model_type"]
        if model_type != "marian":
            raise ValueError(
                f"CTranslate2 export needs a post-LN model (folded into MarianMTModel); this one folds into "
                f"{model_type!r}, which CTranslate2's converter does not support"
            )
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = out_dir.parent / f".{out_dir.name}.{os.getpid()}.partial"
        try:
            TransformersConverter(str(stock_dir)).convert(str(staging), quantization=quantization)
            os.replace(staging, out_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out_dir
