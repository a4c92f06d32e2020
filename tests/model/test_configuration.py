"""DeepNMTConfig validation: every bad value raises ValueError naming the field, the value and what is allowed."""

from __future__ import annotations

import re
from typing import Any

import pytest
from factories import tiny_config

from deep_nmt_hf import DeepNMTConfig
from deep_nmt_hf.model.configuration_deep_nmt import CHOICES, FIELD_RULES

BAD_VALUES: list[tuple[dict[str, Any], str]] = [
    ({"vocab_size": 0}, "vocab_size=0"),
    ({"d_model": -8}, "d_model=-8"),
    ({"d_model": 33, "encoder_attention_heads": 1, "decoder_attention_heads": 1}, "d_model=33 must be even"),
    ({"encoder_layers": 0}, "encoder_layers=0"),
    ({"decoder_layers": 2.5}, "decoder_layers=2.5"),
    ({"encoder_attention_heads": 0}, "encoder_attention_heads=0"),
    ({"encoder_attention_heads": 5}, "not divisible by encoder_attention_heads=5"),
    ({"decoder_attention_heads": 3}, "not divisible by decoder_attention_heads=3"),
    ({"encoder_ffn_dim": 0}, "encoder_ffn_dim=0"),
    ({"decoder_ffn_dim": True}, "decoder_ffn_dim=True"),
    ({"max_position_embeddings": 0}, "max_position_embeddings=0"),
    ({"dropout": 1.0}, r"dropout=1.0 .*\[0, 1\)"),
    ({"attention_dropout": -0.1}, "attention_dropout=-0.1"),
    ({"activation_dropout": "x"}, "activation_dropout='x'"),
    ({"label_smoothing": 1.5}, "label_smoothing=1.5"),
    ({"layer_norm_eps": 0}, "layer_norm_eps=0"),
    ({"activation_function": "sigmoidish"}, "activation_function='sigmoidish'"),
    (
        {"layer_norm_position": "middle"},
        "layer_norm_position='middle' is not a valid choice; allowed: 'post', 'pre'",
    ),
    ({"pad_token_id": 48}, r"pad_token_id=48 is outside the vocabulary.*\[0, 47\]"),
    ({"eos_token_id": -1}, "eos_token_id=-1"),
    ({"eos_token_id": 48}, "eos_token_id=48"),
    ({"decoder_start_token_id": None, "pad_token_id": -1}, "pad_token_id=-1"),
    ({"bos_token_id": 99}, "bos_token_id=99"),
    ({"unk_token_id": 48}, "unk_token_id=48"),
    ({"decoder_start_token_id": 1000}, "decoder_start_token_id=1000"),
    (
        {"residual_scaling": "admin", "layer_norm_position": "pre"},
        "residual_scaling='admin' needs layer_norm_position",
    ),
    ({"residual_scaling": "deepnorm", "layer_norm_position": "pre"}, "residual_scaling='deepnorm' needs"),
    ({"init_method": "deepnorm"}, "init_method='deepnorm' goes with residual_scaling='deepnorm'"),
    ({"ds_init_alpha": 0.0}, r"ds_init_alpha=0.0 .*\(0, 1\]"),
    ({"ds_init_alpha": 1.5}, "ds_init_alpha=1.5"),
    ({"admin_omega": "learned"}, "admin_omega='learned' is not a valid choice"),
    ({"admin_init": "random"}, "admin_init='random' is not a valid choice"),
    ({"admin_profiled": "yes"}, "admin_profiled='yes' must be true or false"),
    ({"layer_norm_eps": True}, "layer_norm_eps=True must be a positive number"),
    ({"dlcl_window": 0}, r"dlcl_window=0 is not allowed: use -1 \(all earlier layers\) or a width ≥ 1"),
    ({"encoder_share_layers": 1}, "encoder_share_layers=1 must be true or false"),
    ({"ddr_loss_weight": -1}, r"ddr_loss_weight=-1 must be a number ≥ 0 \(0 turns the loss off\)"),
    ({"cross_attention_drop_layers": 3}, r"cross_attention_drop_layers=3 must be an integer in \[0, 2\]"),
    ({"ald_loss_weight": 1.0, "unk_token_id": None}, "ald_loss_weight > 0 needs unk_token_id"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_VALUES, ids=[str(f) for f, _ in BAD_VALUES])
def test_bad_values_raise_value_error_naming_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tiny_config(**fields)


# values that are only valid together with another field
COMPANIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("init_method", "deepnorm"): {"residual_scaling": "deepnorm"}
}


@pytest.mark.parametrize("field", sorted(CHOICES))
def test_every_choice_field_accepts_its_values_and_rejects_unknown_ones(field: str) -> None:
    for value in CHOICES[field]:
        assert getattr(tiny_config(**{field: value}, **COMPANIONS.get((field, value), {})), field) == value
    allowed = ", ".join(repr(value) for value in CHOICES[field])
    with pytest.raises(
        ValueError, match=re.escape(f"{field}='bogus' is not a valid choice; allowed: {allowed}")
    ):
        tiny_config(**{field: "bogus"})


def test_every_field_rule_names_a_config_field_and_rejects_a_wrong_type() -> None:
    """FIELD_RULES (the single-field checks) covers real fields; a string is valid for none of them."""
    defaults = DeepNMTConfig().to_dict()
    for field in FIELD_RULES:
        assert field in defaults, field
        with pytest.raises(ValueError, match=f"{field}='x' "):
            tiny_config(**{field: "x"})


def test_round_trip_keeps_every_field(tmp_path) -> None:
    config = tiny_config(layer_norm_position="pre", label_smoothing=0.1, dropout=0.2)
    config.save_pretrained(tmp_path)
    loaded = DeepNMTConfig.from_pretrained(tmp_path)
    for key, value in config.to_dict().items():
        if key != "transformers_version":
            assert getattr(loaded, key) == value, key


def test_generation_settings_are_not_config_fields(tmp_path) -> None:
    config = tiny_config()
    config.save_pretrained(tmp_path)
    text = (tmp_path / "config.json").read_text()
    assert "num_beams" not in text and "max_length" not in text
