"""Folding into stock Transformers classes: exactness (property test), refusal, and loading without the package."""

from __future__ import annotations

import json

import pytest
import torch
from factories import counting_task_model, padded_batch, randomise_omegas, tiny_model
from fresh_process import run_without_package
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import MarianMTModel, PegasusForConditionalGeneration

from deep_nmt_hf.model.residual import AdminOmega
from deep_nmt_hf.publish.folding import (
    FoldCheckError,
    NotFoldableError,
    check_foldable,
    compare_models,
    fold_directory,
    fold_residual_scales,
    fold_to_stock,
    needs_custom_generate,
)

VARIANTS = [
    {"layer_norm_position": "post"},
    {"layer_norm_position": "pre"},
    {"residual_scaling": "admin", "admin_omega": "trainable"},
    {"residual_scaling": "admin", "admin_omega": "fixed"},
    {"residual_scaling": "deepnorm", "init_method": "deepnorm"},
    {"init_method": "ds_init"},
]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    variant=st.sampled_from(VARIANTS),
    encoder_layers=st.integers(1, 3),
    decoder_layers=st.integers(1, 3),
    width=st.sampled_from([(16, 2), (32, 4), (24, 3)]),
    activation=st.sampled_from(["relu", "gelu", "swish"]),
    scale_embedding=st.booleans(),
    tie=st.booleans(),
    seed=st.integers(0, 10_000),
)
def test_fold_is_exact_for_random_configs_and_omegas(
    variant, encoder_layers, decoder_layers, width, activation, scale_embedding, tie, seed
) -> None:
    d_model, heads = width
    model = tiny_model(
        seed=seed,
        encoder_layers=encoder_layers,
        decoder_layers=decoder_layers,
        d_model=d_model,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        activation_function=activation,
        scale_embedding=scale_embedding,
        tie_word_embeddings=tie,
        **variant,
    )
    randomise_omegas(model, torch.Generator().manual_seed(seed))
    stock, report = fold_to_stock(model)  # raises unless logits ≤ 1e-4 and beam-4 outputs identical
    assert report.max_abs_logit_diff <= 1e-4 and report.beam_outputs_identical
    expected = (
        PegasusForConditionalGeneration if variant.get("layer_norm_position") == "pre" else MarianMTModel
    )
    assert type(stock) is expected
    ids, mask = padded_batch([7, 4, 2], seed=seed)
    greedy = dict(num_beams=1, max_length=12, do_sample=False)
    assert torch.equal(
        model.generate(input_ids=ids, attention_mask=mask, **greedy),
        stock.generate(input_ids=ids, attention_mask=mask, **greedy),
    )


def test_folded_scales_are_gone_and_the_function_is_kept() -> None:
    model = tiny_model(seed=2, residual_scaling="admin")
    randomise_omegas(model, torch.Generator().manual_seed(0))
    folded = fold_residual_scales(model)
    assert all(
        s.residual_scale is None
        for stack in (folded.model.encoder, folded.model.decoder)
        for s in stack.sublayers()
    )
    ids, mask = padded_batch([6, 3])
    report = compare_models(model, folded, {"input_ids": ids, "attention_mask": mask})
    assert report.max_abs_logit_diff < 1e-5 and report.beam_outputs_identical
    assert any(isinstance(m, AdminOmega) for m in model.modules())  # the original is untouched


def test_not_foldable_names_the_feature() -> None:
    with pytest.raises(NotFoldableError, match=r"layer_norm_eps=1e-06 \(stock classes use 1e-05\)"):
        check_foldable(tiny_model(layer_norm_eps=1e-6).config)


def test_a_failing_check_raises(monkeypatch) -> None:
    model = tiny_model(seed=5)
    import deep_nmt_hf.publish.folding as folding

    real = folding._stock_state_dict

    def corrupted(folded):
        state = real(folded)
        state["model.encoder.layers.0.fc1.weight"] = state["model.encoder.layers.0.fc1.weight"] * 1.5
        return state

    monkeypatch.setattr(folding, "_stock_state_dict", corrupted)
    with pytest.raises(FoldCheckError, match="differs from the original"):
        fold_to_stock(model)


LOAD_STOCK = """
import json, torch
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained("folded").eval()
batch = torch.load("batch.pt")
with torch.no_grad():
    out = model.generate(**batch, num_beams=4, max_length=12)
print(json.dumps({"class": type(model).__name__, "module": type(model).__module__, "out": out.tolist()}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "stock"),
    [
        ({"residual_scaling": "admin"}, "MarianMTModel"),
        ({"layer_norm_position": "pre"}, "PegasusForConditionalGeneration"),
    ],
)
def test_folded_directory_loads_without_the_package_or_remote_code(tmp_path, variant, stock) -> None:
    model = tiny_model(seed=9, **variant)
    randomise_omegas(model, torch.Generator().manual_seed(1))
    model.save_pretrained(tmp_path / "trained")
    report = fold_directory(tmp_path / "trained", tmp_path / "folded")
    assert report.stock_class == stock
    assert not list((tmp_path / "folded").rglob("*.py"))  # no custom code ships, nor custom_generate/
    config = json.loads((tmp_path / "folded" / "config.json").read_text())
    assert "auto_map" not in config and config["model_type"] in ("marian", "pegasus")
    assert json.loads((tmp_path / "folded" / "fold_report.json").read_text())["beam_outputs_identical"]
    ids, mask = padded_batch([6, 3], seed=3)
    torch.save({"input_ids": ids, "attention_mask": mask}, tmp_path / "batch.pt")

    result = run_without_package(LOAD_STOCK, tmp_path)

    assert result["class"] == stock and result["module"].startswith("transformers.models.")
    expected = model.generate(input_ids=ids, attention_mask=mask, num_beams=4, max_length=12)
    assert result["out"] == expected.tolist()


@pytest.mark.parametrize(
    ("fields", "carried"),
    [
        ({}, False),  # our own models: Transformers' search
        ({"beam_search_rule": "transformers", "length_penalty_form": "gnmt"}, False),  # folded as len^α
        ({"beam_search_rule": "fairseq", "early_stopping": True}, True),  # converted from fairseq
        ({"beam_search_rule": "zero"}, True),
        ({"max_len_a": 0, "max_len_b": 200}, True),  # a per-sentence limit alone
    ],
)
def test_only_a_search_stock_generate_lacks_carries_custom_generate(fields: dict, carried: bool) -> None:
    from transformers import GenerationConfig

    assert needs_custom_generate(GenerationConfig(**fields)) is carried


def test_fold_directory_refuses_bad_paths_and_leaves_nothing(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="missing: no such directory .expected a saved model"):
        fold_directory(tmp_path / "missing", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty: not a saved model directory .no config.json"):
        fold_directory(tmp_path / "empty", tmp_path / "out")
    tiny_model().save_pretrained(tmp_path / "trained")
    (tmp_path / "exists").mkdir()
    with pytest.raises(FileExistsError, match="exists already"):
        fold_directory(tmp_path / "trained", tmp_path / "exists")
    tiny_model(layer_norm_eps=1e-6).save_pretrained(tmp_path / "unfoldable")
    with pytest.raises(NotFoldableError):
        fold_directory(tmp_path / "unfoldable", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_fold_divides_the_cross_attention_query_by_its_omega() -> None:
    """A fixed case for what the property test finds only after shrinking: an ADMIN model trained a few steps
    (its cross-attention is peaked, so a query scaled by the wrong ω changes the output) with every ω ≠ 1, the
    cross-attention sublayers' included, folds into Marian with logits within 1e-4."""
    model = counting_task_model("admin", admin_omega="trainable")
    generator = torch.Generator().manual_seed(4)
    randomise_omegas(model, generator, low=1.5, high=3.0)
    cross = [layer.encoder_attn for layer in model.model.decoder.layers]
    assert all(torch.all(sublayer.residual_scale.value() > 1.4) for sublayer in cross)
    stock, report = fold_to_stock(model)
    assert report.max_abs_logit_diff <= 1e-4 and report.beam_outputs_identical
