"""Each variant's facts in one spec (model/registry.py, issue #57): its config class is the spec's defaults, its
classes are named and exported from it, and what it folds into is an allow-list there — so a toy variant needs a
spec alone, and a form without a stock equivalent is refused by the registry, not by the numerical fold check."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import pytest
import torch
from factories import TINY_SHAPE, VOCAB, padded_batch, tiny_config
from transformers import AutoConfig, AutoModelForSeq2SeqLM

import deep_nmt_hf
from deep_nmt_hf.model import registry
from deep_nmt_hf.model.configuration_deep_nmt import DeepNMTConfig, VariantConfig, variant_config
from deep_nmt_hf.model.modeling_deep_nmt import variant_models
from deep_nmt_hf.publish.folding import NotFoldableError, check_foldable, fold_to_stock

TINY = dict(TINY_SHAPE, vocab_size=VOCAB, max_position_embeddings=64)


def _toy_spec(folds_into: tuple[str, ...]) -> registry.VariantSpec:
    # DeepNorm's residual and initialisation at a tiny shape: a form the stock classes can express
    return registry.VariantSpec(
        "deep_nmt_toy",
        "Toy",
        {"tiny": {key: value for key, value in TINY.items() if key != "encoder_layers"}},
        defaults={"residual_scaling": "deepnorm", "init_method": "deepnorm", "encoder_layers": 3},
        summary="A toy variant built from its spec alone.",
        folds_into=folds_into,
    )


def test_a_toy_variant_is_built_registered_saved_and_loaded_from_its_spec_alone(tmp_path: Path) -> None:
    spec = _toy_spec(folds_into=())
    config_class = variant_config(spec, module=__name__)
    model_class, lm_class = variant_models(spec, config_class, module=__name__)
    assert (config_class.__name__, model_class.__name__, lm_class.__name__) == (
        "ToyConfig",
        "ToyModel",
        "ToyForConditionalGeneration",
    )
    AutoConfig.register(spec.model_type, config_class, exist_ok=True)
    AutoModelForSeq2SeqLM.register(config_class, lm_class, exist_ok=True)

    config = config_class.from_preset("tiny")
    assert (config.model_type, config.residual_scaling, config.encoder_layers) == (
        "deep_nmt_toy",
        "deepnorm",
        3,
    )
    torch.manual_seed(0)
    model = lm_class(config).eval()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is lm_class and loaded.config.encoder_layers == 3
    ids, mask = padded_batch([5, 3])
    with torch.no_grad():
        torch.testing.assert_close(
            loaded(input_ids=ids, decoder_input_ids=ids).logits,
            model(input_ids=ids, decoder_input_ids=ids).logits,
        )

    # the spec folds into no stock class: refused before any numerical check, naming why
    with pytest.raises(NotFoldableError, match="model_type='deep_nmt_toy' folds into no stock class"):
        fold_to_stock(model)
    # the same model, its spec allowing Marian, folds (and passes the numerical check)
    registry_spec = _toy_spec(folds_into=(registry.MARIAN,))
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(registry.VARIANT_SPECS, "toy", registry_spec)
        stock, report = fold_to_stock(model, batch={"input_ids": ids, "attention_mask": mask})
    assert type(stock).__name__ == registry.MARIAN and report.beam_outputs_identical


def test_a_spec_default_that_is_no_config_field_is_refused() -> None:
    spec = _toy_spec(()).__class__("deep_nmt_toy", "Toy", {}, defaults={"rezero_alpha": 0.0})
    with pytest.raises(
        ValueError, match=r"ToyConfig: defaults \['rezero_alpha'\] are not DeepNMTConfig fields"
    ):
        variant_config(spec)


def test_a_new_form_is_refused_by_the_allow_list_not_found_by_the_fold_check(monkeypatch) -> None:
    """A residual form added to the choices (say ReZero) but not to FOLDABLE: `check_foldable` refuses it from the
    config alone (no model is built, nothing is compared)."""
    monkeypatch.setitem(
        registry.CHOICES, "residual_scaling", (*registry.CHOICES["residual_scaling"], "rezero")
    )
    config = tiny_config(residual_scaling="rezero")  # the config accepts the registered value
    with pytest.raises(
        NotFoldableError, match=r"residual_scaling='rezero' \(no stock equivalent; foldable: none, admin"
    ):
        check_foldable(config)
    # a new choice *field* without a FOLDABLE entry folds none of its values
    monkeypatch.setitem(registry.CHOICES, "ffn_kind", ("relu",))
    config.ffn_kind = "relu"
    config.residual_scaling = "none"
    with pytest.raises(NotFoldableError, match=r"ffn_kind='relu' \(no stock equivalent; foldable: \)"):
        check_foldable(config)


@pytest.mark.parametrize("name", list(registry.VARIANT_SPECS))
def test_a_variant_config_is_its_spec_defaults_and_folds_as_its_spec_says(name: str) -> None:
    spec = registry.VARIANT_SPECS[name]
    config_class = deep_nmt_hf.VARIANTS[name]
    assert config_class is DeepNMTConfig or issubclass(config_class, VariantConfig)
    defaults = {field.name: field.default for field in dataclasses.fields(config_class)}
    assert {key: defaults[key] for key in spec.defaults} == spec.defaults
    config = config_class(**TINY)
    assert {key: getattr(config, key) for key in spec.defaults if spec.defaults[key] is not None} == {
        key: value for key, value in spec.defaults.items() if value is not None and key not in TINY
    } | {key: TINY[key] for key in spec.defaults if key in TINY}
    assert set(spec.folds_into) <= {*registry.FOLD_TARGETS.values(), registry.FSMT}  # FSMT: fairseq positions
    target = registry.FOLD_TARGETS[config.layer_norm_position]
    try:
        check_foldable(config)
        folds = True
    except NotFoldableError:
        folds = False
    # the paper's defaults fold exactly where the spec allows their stock class and every choice is foldable
    expected = (
        target in spec.folds_into
        and all(getattr(config, field) in registry.FOLDABLE[field] for field in registry.CHOICES)
        and not (config.encoder_reinject_input and config.encoder_layer_repeats > 1)
    )
    assert folds == expected


def test_every_choice_field_says_which_of_its_values_fold() -> None:
    assert set(registry.FOLDABLE) == set(registry.CHOICES)
    for field, values in registry.FOLDABLE.items():
        assert set(values) <= set(registry.CHOICES[field]), field


def test_public_classes_name_every_variant_class_and_its_module() -> None:
    """What `deep_nmt_hf/__init__` exports: each spec's three classes, found in the named module of `model/`."""
    names = registry.public_classes()
    assert len(names) == 3 * len(registry.VARIANT_SPECS)
    for name, module in names.items():
        cls = getattr(importlib.import_module(f"deep_nmt_hf.model.{module}"), name)
        assert cls.__module__ == f"deep_nmt_hf.model.{module}" and cls.__name__ == name
        assert getattr(deep_nmt_hf, name) is cls and name in deep_nmt_hf.__all__
