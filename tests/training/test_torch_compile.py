"""`train` with `torch_compile=True` (`deep-nmt train --torch-compile`): the model's layers are compiled in place
(regional compilation, training/compilation.py) and it trains to the same losses as eager.

The test uses the ``aot_eager`` backend: TorchDynamo captures the model's forward, AOTAutograd traces forward and
backward into graphs (the same capture inductor starts from), without inductor's C++ code generation, which
takes minutes on a shared 2-core CPU. Pairs are truncated to 4 tokens so that every batch has the same shape
(one compilation, no recompiles). The inductor speed on CPU is measured in bench/compile_speed.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from deep_nmt_hf import training
from deep_nmt_hf.data import write_parallel_dir
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, demo_splits
from deep_nmt_hf.training.compilation import compiled_regions, layer_regions

CONFIG = dict(
    d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
    encoder_ffn_dim=64, decoder_ffn_dim=64, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
)  # fmt: skip


class _Recording(training.DeepNMTTrainer):
    last = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _Recording.last = self


def _train(data: Path, out: Path, **compile_options) -> tuple[dict, training.DeepNMTTrainer]:
    options = training.TrainingOptions(
        output_dir=str(out), data_source=data, src_lang=SRC_LANG, tgt_lang=TGT_LANG, vocab_size=120,
        max_source_length=4, max_target_length=4, batch_size=8, max_steps=3, logging_steps=1, warmup_steps=1,
        learning_rate=1e-3, train_sampling="sequential", num_beams=1, disable_tqdm=True, **compile_options,
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(training.run, "DeepNMTTrainer", _Recording)
        record = training.train(options, dict(CONFIG))
    return record, _Recording.last


def _losses(record: dict) -> list[float]:
    return [entry["loss"] for entry in record["log_history"] if "loss" in entry]


def test_a_compiled_model_trains_like_eager(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_parallel_dir(
        demo_splits(train=48, valid=1, test=1, seed=3)["train"], data, "train", SRC_LANG, TGT_LANG
    )
    eager, _ = _train(data, tmp_path / "eager")
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled, trainer = _train(
        data, tmp_path / "compiled", torch_compile=True, torch_compile_backend="aot_eager"
    )
    # the layers, not the whole model: one compiled region per layer, the Trainer's model left unwrapped
    assert not isinstance(trainer.model_wrapped, torch._dynamo.eval_frame.OptimizedModule)
    assert compiled_regions(trainer.model) == layer_regions(trainer.model) != []
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 2  # an encoder and a decoder layer graph
    assert compiled["hyperparameters"]["torch_compile"] is True
    losses = _losses(compiled)
    assert len(losses) == 3 and all(map(torch.isfinite, torch.tensor(losses)))
    assert losses == pytest.approx(_losses(eager), rel=1e-5)  # the same computation, traced
    a, b = (
        load_file(tmp_path / "eager" / "model.safetensors"),
        load_file(tmp_path / "compiled" / "model.safetensors"),
    )
    assert a.keys() == b.keys()  # saved without the compiled wrapper's `_orig_mod.` prefix
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=1e-4, atol=1e-6, msg=name)


def test_a_compile_backend_needs_torch_compile(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="torch_compile_backend='aot_eager' needs torch_compile=True"):
        training.TrainingOptions(
            output_dir=str(tmp_path),
            data_source=tmp_path,
            src_lang="a",
            tgt_lang="b",
            torch_compile_backend="aot_eager",
        )
