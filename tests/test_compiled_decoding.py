"""Compiled decoding for every variant (issue #55 item 3): `compiled_decoding` (what `deep-nmt translate --compile`
calls) makes `generate` decode with a static cache through `torch.compile` with ``fullgraph=True``, and beam search
gives eager decoding's tokens and scores, for every variant and for the stock model a foldable one folds into.

Backend ``eager`` (dynamo's capture, which is what a graph break would fail; inductor's code generation takes
minutes on a shared 2-core CPU). Private surface: Transformers' `CompileConfig._compile_all_devices` (compile on a
CPU too), set by `compiled_decoding`, and dynamo's ``counters["stats"]["unique_graphs"]`` (graphs compiled)."""

from __future__ import annotations

import pytest
import torch
from factories import padded_batch, variant_model
from torch._dynamo.utils import counters

import deep_nmt_hf
from deep_nmt_hf.publish.folding import NotFoldableError, fold_to_stock
from deep_nmt_hf.training.compilation import compiled_decoding

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
    try:
        models.append(fold_to_stock(models[0])[0].eval())
    except NotFoldableError:
        pass  # merged attention, DLCL, CAD: no stock equivalent
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
