"""Special token ids round-trip (issue #57): what a config accepts, it saves and loads; what it would not load, it
refuses to save; `generate()` without input starts from the bos token, as Marian's does; and Transformers' own
`test_eager_matches_sdpa_generate` recipe (eos set to None on the config, save, load with each attention, greedy
generation to the length limit) passes for every variant."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from factories import EOS, PAD, padded_batch, tiny_config, tiny_model, variant_model
from transformers import AutoModelForSeq2SeqLM

import deep_nmt_hf
from deep_nmt_hf import DeepNMTConfig


@pytest.mark.parametrize("name", ["bos_token_id", "eos_token_id", "unk_token_id"])
def test_a_token_id_the_config_accepts_saves_and_loads(name: str, tmp_path: Path) -> None:
    built = tiny_config(**{name: None})  # accepted when built ...
    assigned = tiny_config()
    setattr(assigned, name, None)  # ... and when set afterwards, as Transformers' generation tests do
    for index, config in enumerate((built, assigned)):
        config.save_pretrained(tmp_path / str(index))
        assert getattr(DeepNMTConfig.from_pretrained(tmp_path / str(index)), name) is None


def test_a_config_that_would_not_load_is_not_saved(tmp_path: Path) -> None:
    config = tiny_config()
    config.eos_token_id = 99  # attributes are not checked when set; `save_pretrained` checks before it writes
    with pytest.raises(ValueError, match=r"eos_token_id=99 is outside the vocabulary"):
        config.save_pretrained(tmp_path)
    assert not (tmp_path / "config.json").exists()


def test_generate_without_input_translates_the_empty_sentence() -> None:
    """MarianMTModel starts from `bos_token_id` when given no input (opus-mt configs set it to eos's 0); so do
    we: the encoder reads `[[bos]]`, which is the empty sentence (eos alone) in our token layout."""
    model = tiny_model()
    assert model.config.bos_token_id == EOS
    empty = model.generate(max_new_tokens=5)
    assert torch.equal(empty, model.generate(input_ids=torch.tensor([[EOS]]), max_new_tokens=5))
    assert empty[0, 0].item() == PAD  # the decoder starts from pad, as Marian's


@pytest.mark.parametrize("variant", list(deep_nmt_hf.VARIANTS))
def test_eager_matches_sdpa_generate(variant: str, tmp_path: Path) -> None:
    """Transformers' `GenerationTesterMixin._test_attention_implementation("sdpa")` on a tiny model: the config's
    eos set to None (no early stop), positions for the prompt plus 30 new tokens, saved, loaded with eager and with
    sdpa attention, greedy generation with scores; here in float32 on the CPU (Transformers': float16, atol 1e-3)."""
    max_new_tokens = 30
    ids, mask = padded_batch([6, 4])
    model = variant_model(variant)
    model.config.eos_token_id = None
    model.generation_config.eos_token_id = None
    model.save_pretrained(tmp_path)
    results = []
    for attention in ("eager", "sdpa"):
        loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path, attn_implementation=attention).eval()
        assert loaded.config.eos_token_id is None
        kwargs = dict(max_new_tokens=max_new_tokens, do_sample=False, use_cache=True)
        results.append(
            loaded.generate(
                input_ids=ids, attention_mask=mask, return_dict_in_generate=True, output_scores=True, **kwargs
            )
        )
    eager, sdpa = results
    assert eager.sequences.shape[1] == max_new_tokens + 1  # no eos: generation ran to its limit
    assert torch.equal(eager.sequences, sdpa.sequences)
    torch.testing.assert_close(torch.stack(eager.scores), torch.stack(sdpa.scores), atol=1e-4, rtol=1e-4)
