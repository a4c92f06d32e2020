"""Export to CTranslate2: fold into a stock class when needed, then convert with CTranslate2's Transformers loaders.

Post-LN models fold into MarianMTModel, pre-LN models into PegasusForConditionalGeneration (see folding.py). Both
are converted with CTranslate2's BART loader (the base of its Marian and Pegasus loaders), with two differences
from CTranslate2's stock Marian / Pegasus conversion, both needed for identical outputs:

* The decoder starts from the `<pad>` embedding, as in Transformers. CTranslate2's Marian loader instead starts
  from a zero vector and drops `<pad>` from the vocabulary; that equals Transformers only while the pad row is
  zero, and with tied embeddings training moves it (the output projection's gradient reaches every row).
* `<pad>` is kept in the vocabulary and given a -1e9 output bias, so CTranslate2 never emits it, as
  Transformers does not (the generation config bans it with `bad_words_ids`).

CTranslate2 4.8's Pegasus loader also reads `config.normalize_before`, which transformers 5's PegasusConfig no
longer has; the pre-LN form is stated explicitly here. Tests: tests/publish/test_ctranslate2.py (beam-4 token outputs
equal to Transformers' for every foldable variant).

`export_ctranslate2` exports a saved model directory; `export_model` exports a model in memory, on any device and
in any dtype: it folds where the model lives (`folding.fold_to_stock`, checked in float32 on copies, the model
left unchanged), writes the float32 stock model with the tokenizer into a temporary directory and converts that.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from ..data.atomic import atomic_directory
from .folding import check_model_dir, fold_directory, fold_to_stock

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16")
STOCK_TYPES = {"marian": False, "pegasus": True}  # stock model_type -> pre-LN
PAD_LOGIT_BIAS = -1e9
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def _convert(stock_dir: Path, out_dir: Path, quantization: str | None) -> None:
    """Convert a folded stock model (marian or pegasus) in `stock_dir` to a CTranslate2 model in `out_dir`."""
    import torch
    from ctranslate2.converters import Converter
    from ctranslate2.converters.transformers import BartLoader
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    class StockLoader(BartLoader):
        def get_model_spec(self, model):
            model.config.normalize_before = STOCK_TYPES[model.config.model_type]
            model.config.normalize_embedding = False  # no LayerNorm on the embeddings
            spec = super().get_model_spec(model)
            bias = torch.zeros(model.config.vocab_size, device="cpu")  # CTranslate2 reads it as numpy
            bias[model.config.pad_token_id] = PAD_LOGIT_BIAS
            spec.decoder.projection.bias = bias
            return spec

        def set_config(self, config, model, tokenizer):
            config.eos_token = tokenizer.eos_token
            config.unk_token = tokenizer.unk_token
            config.decoder_start_token = tokenizer.convert_ids_to_tokens(model.config.decoder_start_token_id)

    class StockConverter(Converter):
        def _load(self):
            with torch.no_grad():
                model = AutoModelForSeq2SeqLM.from_pretrained(stock_dir, dtype=torch.float32).eval()
                tokenizer = AutoTokenizer.from_pretrained(stock_dir)
                if len(tokenizer) != model.config.vocab_size:
                    raise ValueError(
                        f"{stock_dir}: the tokenizer has {len(tokenizer)} tokens but the model's vocab_size is "
                        f"{model.config.vocab_size}"
                    )
                return StockLoader()(model, tokenizer)

    StockConverter().convert(str(out_dir), quantization=quantization)


def copy_tokenizer_files(stock_dir: Path, out_dir: Path) -> list[str]:
    """Copy the tokenizer files CTranslate2 users load (`tokenizer.json` for `tokenizers.Tokenizer.from_file`,
    plus `tokenizer_config.json` / `special_tokens_map.json` for `PreTrainedTokenizerFast`) into `out_dir`."""
    copied = []
    for name in TOKENIZER_FILES:
        if (stock_dir / name).is_file():
            shutil.copyfile(stock_dir / name, out_dir / name)
            copied.append(name)
    return copied


def _check_arguments(quantization: str | None) -> None:
    try:
        import ctranslate2  # noqa: F401
    except ImportError as error:
        raise RuntimeError("CTranslate2 is not installed: pip install 'deep_nmt_hf[ctranslate2]'") from error
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization={quantization!r} is not one of: {', '.join(QUANTIZATIONS)}")


def _check_new(out_dir: Path) -> None:
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} exists already; choose a new output directory")


def _write(stock_dir: Path, out_dir: Path, quantization: str | None) -> None:
    """Convert the stock model in `stock_dir` into `out_dir` with its tokenizer files (never half-written)."""
    with atomic_directory(out_dir) as staging:  # the umask's modes, renamed into place when complete
        os.rmdir(staging)  # CTranslate2's converter creates its output directory itself
        _convert(stock_dir, staging, quantization)
        copy_tokenizer_files(stock_dir, staging)


def export_model(model, tokenizer, out_dir: str | Path, quantization: str | None = None) -> Path:
    """Write a CTranslate2 model directory for `model` in memory: a deep_nmt_hf model (folded on its own device
    first, `model` left unchanged) or a stock MarianMTModel / PegasusForConditionalGeneration, on any device and in
    any dtype (converted from float32; `quantization` as in `export_ctranslate2`). `tokenizer` is the model's
    tokenizer (CTranslate2 needs its vocabulary)."""
    out_dir = Path(out_dir)
    _check_arguments(quantization)
    _check_new(out_dir)
    if tokenizer is None:
        raise ValueError("export_model needs the model's tokenizer (CTranslate2 needs its vocabulary)")
    model_type = getattr(model.config, "model_type", "")
    stock = model
    if model_type.startswith("deep_nmt"):
        stock, _ = fold_to_stock(model)  # on the model's device, float32
        model_type = stock.config.model_type
    if model_type not in STOCK_TYPES:
        raise ValueError(
            f"model_type={model_type!r} cannot be exported; CTranslate2 export takes a deep_nmt_hf model or a "
            f"folded stock model ({', '.join(STOCK_TYPES)})"
        )
    work = Path(tempfile.mkdtemp(prefix="deep_nmt_export_"))
    try:
        stock_dir = work / "stock"
        stock.save_pretrained(stock_dir)  # from any device; `_convert` loads it on the CPU in float32
        tokenizer.save_pretrained(stock_dir)
        _write(stock_dir, out_dir, quantization)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out_dir


def export_ctranslate2(model_dir: str | Path, out_dir: str | Path, quantization: str | None = None) -> Path:
    """Write a CTranslate2 model directory for `model_dir` (a deep_nmt_hf or an already folded stock model)."""
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    _check_arguments(quantization)
    check_model_dir(model_dir)
    _check_new(out_dir)
    model_type = json.loads((model_dir / "config.json").read_text()).get("model_type", "")
    work = Path(tempfile.mkdtemp(prefix="deep_nmt_export_"))
    try:
        stock_dir = model_dir
        if model_type.startswith("deep_nmt"):
            stock_dir = work / "folded"
            fold_directory(model_dir, stock_dir)
            model_type = json.loads((stock_dir / "config.json").read_text())["model_type"]
        if model_type not in STOCK_TYPES:
            raise ValueError(
                f"{model_dir}: model_type={model_type!r} cannot be exported; CTranslate2 export takes a "
                f"deep_nmt_hf model or a folded stock model ({', '.join(STOCK_TYPES)})"
            )
        if (
            not (stock_dir / "tokenizer.json").is_file()
            and not (stock_dir / "tokenizer_config.json").is_file()
        ):
            raise FileNotFoundError(
                f"{model_dir} has no tokenizer; CTranslate2 export needs one (tokenizer.save_pretrained into it)"
            )
        _write(stock_dir, out_dir, quantization)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out_dir
