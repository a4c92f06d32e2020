"""Compiled decoding for every variant (issue #55 item 3): `compiled_decoding` (what `deep-nmt translate --compile`
calls) makes `generate` decode with a static cache through `torch.compile` with ``fullgraph=True``, and beam search
gives eager decoding's tokens and scores, for every variant and for the stock model ADMIN and DeepNorm fold
into (`FOLDED`; the other foldable variants fold into the same classes).

Backend ``eager`` (dynamo's capture, which is what a graph break would fail; inductor's code generation takes
minutes on a shared 2-core CPU). Private surface: Transformers' `CompileConfig._compile_all_devices` (compile on a
CPU too), set by `compiled_decoding`, and dynamo's ``counters["stats"]["unique_graphs"]`` (graphs compiled)."""

from __future__ import annotations

import io
import sys

import pytest
import torch
from factories import padded_batch, variant_model
from torch._dynamo.utils import counters

import deep_nmt_hf
from deep_nmt_hf.publish.folding import fold_to_stock
from deep_nmt_hf.training.compilation import compiled_decoding

# folded into MarianMTModel (their ω / α folded into the weights): the stock class's decoding
FOLDED = ("admin", "deepnorm")
NO_EOS = dict(eos_token_id=None, forced_eos_token_id=None)


def decode(model, inputs: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    out = model.generate(
        **inputs, num_beams=2, max_new_tokens=4, output_scores=True, return_dict_in_generate=True
    )
    return out.sequences, list(out.scores)


@pytest.mark.parametrize("variant", list(deep_nmt_hf.VARIANTS))
def test_compiled_static_cache_decoding_equals_eager(variant: str) -> None:
    ids, mask = padded_batch([6, 4], seed=7)
    inputs = dict(input_ids=ids, attention_mask=mask, **NO_EOS)
    models = [variant_model(variant, seed=4)]
    if variant in FOLDED:
        models.append(fold_to_stock(models[0])[0].eval())
    for model in models:
        eager_tokens, eager_scores = decode(model, inputs)
        torch._dynamo.reset()
        counters.clear()
        compiled_decoding(model, backend="eager")
        assert model.generation_config.cache_implementation == "static"
        tokens, scores = decode(model, inputs)
        assert counters["stats"]["unique_graphs"] >= 1, type(model).__name__  # the steps ran compiled
        assert torch.equal(tokens, eager_tokens), type(model).__name__
        for a, b in zip(scores, eager_scores, strict=True):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_translate_compile_flag_decodes_compiled_with_the_same_output(tmp_path, monkeypatch, capsys) -> None:
    """`deep-nmt translate --compile` goes through `compiled_decoding` (here with the ``eager`` backend) and prints
    what eager decoding prints."""
    from deep_nmt_hf.cli import main
    from deep_nmt_hf.data.synthetic import generate_pairs
    from deep_nmt_hf.data.tokenization import train_tokenizer
    from deep_nmt_hf.training import build_config, compilation

    pairs = generate_pairs(200, seed=1)
    tokenizer = train_tokenizer(
        [text for pair in pairs for text in pair], vocab_size=120, model_max_length=32
    )
    config = build_config(tokenizer, deep_nmt_hf.AdminConfig, max_source_length=32, max_target_length=32)
    for field in ("d_model", "encoder_ffn_dim", "decoder_ffn_dim"):
        setattr(config, field, 32 if field == "d_model" else 64)
    config.encoder_layers = config.decoder_layers = 2
    config.encoder_attention_heads = config.decoder_attention_heads = 4
    torch.manual_seed(0)
    deep_nmt_hf.AdminForConditionalGeneration(config).save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    compiled = []
    real = compilation.compiled_decoding

    def eager_backend(model, **kwargs):
        compiled.append(type(model).__name__)
        return real(model, backend="eager")

    monkeypatch.setattr(compilation, "compiled_decoding", eager_backend)
    text = "\n".join(source for source, _ in pairs[:3]) + "\n"
    outputs = []
    for extra in ([], ["--compile"]):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
        capsys.readouterr()
        argv = ["translate", str(tmp_path / "m"), "--num-beams", "2", "--max-new-tokens", "6", *extra]
        assert main(argv) == 0
        outputs.append(capsys.readouterr().out)
    assert compiled == ["AdminForConditionalGeneration"]
    assert counters["stats"]["unique_graphs"] >= 1
    assert outputs[1] == outputs[0] and len(outputs[0].splitlines()) == 3
