"""bench/lib/study_weights.py: a finished study model saved as one float16 file reloads as the same model, for every
variant and stock Marian, and refuses another tokenizer or another file format. Tiny models; seconds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from factories import padded_batch, randomise_omegas, tiny_config, variant_model
from safetensors.torch import save_file
from transformers import MarianMTModel

import deep_nmt_hf
from bench.lib.study_weights import (
    StudyWeightsError,
    load_weights,
    save_weights,
    tokenizer_digest,
)
from deep_nmt_hf.data.tokenization import train_tokenizer
from deep_nmt_hf.publish.folding import stock_config

DIGEST = "0" * 64


def stock_marian() -> MarianMTModel:
    torch.manual_seed(0)
    return MarianMTModel(stock_config(tiny_config())).eval()


def trained_like(variant: str):
    model = variant_model(variant, seed=3)
    if variant == "admin":  # ω away from 1, as after profiling
        randomise_omegas(model, torch.Generator().manual_seed(0))
    model.generation_config.num_beams = 4
    return model


@pytest.mark.parametrize("variant", [*deep_nmt_hf.VARIANTS, "marian"])
def test_round_trip_is_the_float16_model(variant: str, tmp_path: Path) -> None:
    model = stock_marian() if variant == "marian" else trained_like(variant)
    model.generation_config.num_beams = 4
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    path = save_weights(model, tmp_path / "seed1.averaged.safetensors", DIGEST)

    # the caller's model is untouched
    assert all(tensor.dtype == before[name].dtype for name, tensor in model.state_dict().items())
    loaded = load_weights(path, tokenizer_sha256=DIGEST)
    assert type(loaded) is type(model)
    assert loaded.config.to_dict() == model.config.to_dict()
    assert loaded.generation_config.num_beams == 4
    # every tensor is exactly the float16 rounding of the saved one (a tensor left at its initial value, or
    # loaded under the wrong name, differs), and the tied output projection is the shared embedding again
    state = loaded.state_dict()
    assert state.keys() == before.keys()
    for name, tensor in before.items():
        expected = tensor.half().float() if tensor.is_floating_point() else tensor
        assert tensor.dtype == state[name].dtype, name
        assert torch.equal(state[name], expected), name
    assert loaded.get_output_embeddings().weight is loaded.get_input_embeddings().weight
    # float16 weights move the logits by little against their spread
    ids, mask = padded_batch([7, 5, 3])
    decoder_ids = torch.roll(ids, 1, dims=1)
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits
        got = loaded(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits
    assert (got - want).abs().max() < 2e-2 * want.std()


def test_the_file_is_half_the_float32_weights(tmp_path: Path) -> None:
    model = trained_like("dlcl")
    path = save_weights(model, tmp_path / "w.safetensors", DIGEST)
    unique = {t.data_ptr(): t.numel() for t in model.state_dict().values() if t.is_floating_point()}
    assert path.stat().st_size < 2 * sum(unique.values()) + 64_000  # 2 bytes a weight, plus header and config


def test_another_tokenizer_is_refused(tmp_path: Path) -> None:
    texts = [f"w{i} w{(i * 7) % 13} w{(i * 3) % 11}" for i in range(60)]
    first = train_tokenizer(texts, vocab_size=60)
    second = train_tokenizer(texts[:30], vocab_size=40)
    assert tokenizer_digest(first) == tokenizer_digest(train_tokenizer(texts, vocab_size=60))
    before = tokenizer_digest(first)
    first(texts[:4], max_length=3, truncation=True, padding="max_length")  # sets the backend's truncation
    assert tokenizer_digest(first) == before
    assert tokenizer_digest(first) != tokenizer_digest(second)
    path = save_weights(trained_like("base"), tmp_path / "w.safetensors", tokenizer_digest(first))
    load_weights(path, tokenizer_sha256=tokenizer_digest(first))
    with pytest.raises(StudyWeightsError, match="trained with tokenizer"):
        load_weights(path, tokenizer_sha256=tokenizer_digest(second))


def test_other_files_are_refused_by_name(tmp_path: Path) -> None:
    plain = tmp_path / "plain.safetensors"
    save_file({"w": torch.zeros(2)}, str(plain))
    with pytest.raises(StudyWeightsError, match="plain.safetensors: format None"):
        load_weights(plain)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"not a safetensors file")
    with pytest.raises(StudyWeightsError, match="garbage.safetensors: not a safetensors file"):
        load_weights(garbage)
    with pytest.raises(FileNotFoundError, match="missing.safetensors"):
        load_weights(tmp_path / "missing.safetensors")


def test_the_study_keeps_and_reloads_a_runs_averaged_weights(tmp_path: Path, monkeypatch) -> None:
    """depth_multi30k: `keep_weights` writes a finished run's averaged model beside its record; `load_averaged`
    reads the run's own directory where the machine still has it, and the committed file where it does not
    (a new machine), refusing it when this machine's tokenizer differs."""
    import argparse

    from bench.lib.depth import core, study

    texts = [f"w{i} w{(i * 7) % 13} w{(i * 3) % 11}" for i in range(60)]
    tokenizer = train_tokenizer(texts, vocab_size=60)
    monkeypatch.setattr(core, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    monkeypatch.setattr(study, "multi30k_tokenizer", lambda vocab_size: tokenizer)
    args = argparse.Namespace(epochs=30, quick=False, vocab_size=60)
    model = trained_like("admin")

    assert not study.keep_weights("admin-18-6", 1, args)  # nothing saved on this machine
    model.save_pretrained(core.run_dir("admin-18-6", 1, args) / "averaged")
    core._write_json(core.record_path("admin-18-6", 1, args), {"name": "admin-18-6"})  # an older record
    assert study.keep_weights("admin-18-6", 1, args)
    record = core._read_json(core.record_path("admin-18-6", 1, args))
    assert record == {"name": "admin-18-6", "tokenizer_sha256": tokenizer_digest(tokenizer)}
    path = core.weights_path("admin-18-6", 1, args)
    assert path == tmp_path / "records" / "e30" / "admin-18-6" / "seed1.averaged.safetensors"

    from_run = study.load_averaged("admin-18-6", 1, args)
    assert all(torch.equal(a, b) for a, b in zip(from_run.parameters(), model.parameters(), strict=True))
    (core.run_dir("admin-18-6", 1, args) / "averaged" / "config.json").unlink()  # a new machine
    from_file = study.load_averaged("admin-18-6", 1, args)
    assert all(
        torch.equal(a, b.half().float())
        for a, b in zip(from_file.parameters(), model.parameters(), strict=True)
    )
    monkeypatch.setattr(study, "multi30k_tokenizer", lambda vocab_size: train_tokenizer(texts[:30], 40))
    with pytest.raises(StudyWeightsError, match="trained with tokenizer"):
        study.load_averaged("admin-18-6", 1, args)
