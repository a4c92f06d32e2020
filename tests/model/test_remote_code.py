"""A saved model loads with trust_remote_code in a fresh process where deep_nmt_hf is not installed."""

from __future__ import annotations

import json

import pytest
import torch
from factories import PAD, padded_batch, tiny_model
from fresh_process import run_without_package

from deep_nmt_hf.training.generation_settings import translation_generation_config

LOAD_AND_RUN = """
import json, torch
from transformers import AutoConfig, AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained("model", trust_remote_code=True).eval()
batch = torch.load("batch.pt")
with torch.no_grad():
    logits = model(**batch["inputs"], decoder_input_ids=batch["decoder_input_ids"]).logits
    generated = model.generate(**batch["inputs"], num_beams=3, max_new_tokens=8)
print(json.dumps({"class": type(model).__name__, "module": type(model).__module__,
                  "logits": logits.tolist(), "generated": generated.tolist()}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_saved_model_loads_with_trust_remote_code_without_the_package(tmp_path, norm: str) -> None:
    model = tiny_model(seed=7, layer_norm_position=norm)
    model.save_pretrained(tmp_path / "model")
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["auto_map"]["AutoModelForSeq2SeqLM"] == "modeling_deep_nmt.DeepNMTForConditionalGeneration"
    assert config["auto_map"]["AutoConfig"] == "configuration_deep_nmt.DeepNMTConfig"
    shipped = {p.name for p in (tmp_path / "model").glob("*.py")}
    assert {"modeling_deep_nmt.py", "configuration_deep_nmt.py"} <= shipped
    assert not shipped & {"training.py", "cli.py", "data.py", "tokenization.py"}
    ids, mask = padded_batch([5, 3])
    dec = torch.full((2, 2), PAD)
    torch.save(
        {"inputs": {"input_ids": ids, "attention_mask": mask}, "decoder_input_ids": dec},
        tmp_path / "batch.pt",
    )

    result = run_without_package(LOAD_AND_RUN, tmp_path)

    assert result["class"] == "DeepNMTForConditionalGeneration"
    assert result["module"].startswith("transformers_modules.")
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
        generated = model.generate(input_ids=ids, attention_mask=mask, num_beams=3, max_new_tokens=8)
    torch.testing.assert_close(torch.tensor(result["logits"]), expected, atol=1e-5, rtol=1e-5)
    assert result["generated"] == generated.tolist()


def test_save_load_round_trip_is_exact(tmp_path) -> None:
    from transformers import AutoModelForSeq2SeqLM

    model = tiny_model(seed=8, layer_norm_position="pre", tie_word_embeddings=False)
    assert model.generation_config.num_beams in (None, 1)  # fresh: greedy, as Transformers models are
    model.generation_config = translation_generation_config(model.config, num_beams=4, length_penalty=0.6)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "generation_config.json").exists()
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model)
    original, reloaded = model.state_dict(), loaded.state_dict()
    assert original.keys() == reloaded.keys()
    for key in original:
        assert torch.equal(original[key], reloaded[key]), key
    positions = loaded.model.encoder.embed_positions.weight
    assert torch.equal(positions, model.model.encoder.embed_positions.weight)  # recomputed, not saved
    assert loaded.generation_config.num_beams == 4 and loaded.generation_config.length_penalty == 0.6
    assert loaded.generation_config.forced_eos_token_id == model.config.eos_token_id
    assert loaded.generation_config.decoder_start_token_id == model.config.pad_token_id


TWO_FOLDERS = """
import json
from transformers import AutoModelForSeq2SeqLM
saved = []
for name in ("first", "second"):
    model = AutoModelForSeq2SeqLM.from_pretrained(name, trust_remote_code=True)
    model.save_pretrained(name + "-again")
    saved.append(json.load(open(name + "-again/config.json"))["custom_pipelines"]["translation"]["impl"])
print(json.dumps({"impl": saved}))
"""


@pytest.mark.slow
def test_two_remote_code_checkpoints_re_save_in_one_process(tmp_path) -> None:
    """Each folder's remote code is its own copy of the pipeline class; only the first copy was registered, so
    re-saving the second checkpoint failed (no `_registered_impl`). Both re-save and keep the pipeline entry."""
    for seed, name in ((1, "first"), (2, "second")):
        tiny_model(seed=seed).save_pretrained(tmp_path / name)

    result = run_without_package(TWO_FOLDERS, tmp_path)

    assert result["impl"] == ["translation_pipeline.TranslationPipeline"] * 2
