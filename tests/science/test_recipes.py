"""Named recipes: complete and valid data, precedence (explicit wins), and one tiny run that records them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from factories import TINY_SHAPE, tiny_config

from deep_nmt_hf import training
from deep_nmt_hf.cli import main
from deep_nmt_hf.data import write_parallel_dir
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, demo_splits
from deep_nmt_hf.science.recipes import OPTION_FIELDS, RECIPES, describe, recipe_config, recipe_options
from deep_nmt_hf.training import TrainingOptions

CONFIG_FIELDS = {
    "dropout",
    "attention_dropout",
    "activation_dropout",
    "share_encoder_decoder_embeddings",
    "tie_word_embeddings",
}
BASE = dict(output_dir="out", data_source="data", src_lang="a", tgt_lang="b")


@pytest.mark.parametrize("name", list(RECIPES))
def test_every_recipe_is_complete_sourced_and_valid(name: str) -> None:
    recipe = RECIPES[name]
    assert set(recipe) == set(OPTION_FIELDS) | CONFIG_FIELDS
    assert all(setting.source.strip() for setting in recipe.values())
    options = TrainingOptions.from_recipe(name, **BASE)  # validates optimizer, betas, eps, batching, forms
    assert options.recipe == name
    tiny_config(**recipe_config(name))  # the config fields are valid
    text = describe(name)
    assert text.splitlines()[0].startswith(f"recipe {name!r}") and len(text.splitlines()) == len(recipe) + 1


def test_recipes_hold_the_papers_values() -> None:
    admin, dsinit, dlcl = recipe_options("admin"), recipe_options("dsinit_matt"), recipe_options("dlcl")
    assert (admin["optimizer"], admin["learning_rate"], admin["warmup_steps"], admin["max_tokens"]) == (
        "radam",
        1e-3,
        4000,
        3584,
    )
    assert recipe_config("dsinit_matt")["share_encoder_decoder_embeddings"] is False
    assert (dsinit["length_penalty"], dsinit["length_penalty_form"], dsinit["max_tokens"]) == (
        0.6,
        "gnmt",
        5752,  # 40K target tokens per update (Table 3, 12 layers) over 8 processes
    )
    assert (dsinit["max_grad_norm"], dsinit["adam_epsilon"]) == (5.0, 1e-9)  # bzhangGo/zero run.py
    assert (admin["average_last_checkpoints"], admin["save_strategy"]) == (10, "epoch")
    assert recipe_config("admin")["attention_dropout"] == recipe_config("admin")["activation_dropout"] == 0.1
    assert (dlcl["max_tokens"], dlcl["gradient_accumulation_steps"], dlcl["save_strategy"]) == (
        4096,
        2,
        "epoch",
    )
    assert recipe_options("deep_decoder")["length_penalty_form"] == "fairseq"
    assert (dlcl["adam_beta2"], dlcl["warmup_steps"], recipe_config("dlcl")["attention_dropout"]) == (
        0.997,
        16000,
        0.1,
    )
    assert recipe_options("shared_layers")["adam_epsilon"] == 1e-9
    assert recipe_options("marian")["max_tokens"] is None


def test_explicit_options_win_over_the_recipe() -> None:
    options = TrainingOptions.from_recipe("admin", **BASE, learning_rate=5e-4, variant="base")
    assert options.learning_rate == 5e-4 and options.variant == "base"
    assert options.optimizer == "radam" and options.warmup_steps == 4000
    assert TrainingOptions.from_recipe(None, **BASE).optimizer == "adam"  # no recipe: the defaults
    with pytest.raises(ValueError, match="recipe='fairseq' is unknown; valid recipes: admin"):
        TrainingOptions.from_recipe("fairseq", **BASE)
    with pytest.raises(ValueError, match="optimizer='sgd'"):
        TrainingOptions(**BASE, optimizer="sgd")
    with pytest.raises(ValueError, match="max_grad_norm=-1"):
        TrainingOptions(**BASE, max_grad_norm=-1.0)


def test_cli_flags_left_unset_take_the_recipe(monkeypatch, tmp_path) -> None:
    seen = {}

    def fake_train(options, overrides):
        seen.update(options=options, overrides=overrides)
        return {"eval_split": None}

    monkeypatch.setattr(training, "train", fake_train)
    for lang in ("a", "b"):  # the named split's files must exist: train checks them before torch
        (tmp_path / f"train.{lang}").write_text("x\n")
    common = ["train", "--data-dir", str(tmp_path), "--src-lang", "a", "--tgt-lang", "b", "--output-dir"]
    assert main([*common, str(tmp_path / "o1"), "--recipe", "dlcl", "--lr", "0.01", "--dropout", "0.2"]) == 0
    options, overrides = seen["options"], seen["overrides"]
    assert options.learning_rate == 0.01 and options.adam_beta2 == 0.997 and options.variant == "dlcl"
    assert (
        options.max_grad_norm == 0.0 and options.max_tokens == 4096 and options.average_last_checkpoints == 5
    )
    assert overrides == {"dropout": 0.2}  # the recipe's config fields are merged under these inside train
    assert main([*common, str(tmp_path / "o2")]) == 0  # no recipe: the old defaults
    options = seen["options"]
    assert (options.learning_rate, options.max_grad_norm, options.num_beams, options.variant) == (
        5e-4,
        1.0,
        4,
        "deep_nmt",
    )
    assert options.max_tokens is None and options.optimizer == "adam"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("data")
    for split, pairs in demo_splits(train=120, valid=6, test=6, seed=3).items():
        write_parallel_dir(pairs, directory, split, SRC_LANG, TGT_LANG)
    return directory


def test_a_recipe_run_records_itself_and_saves_its_decoding(data_dir: Path, tmp_path: Path) -> None:
    """dsinit_matt at toy scale: token batches, untied target embedding, GNMT α 0.6, averaging of 2 checkpoints."""
    out = tmp_path / "run"
    options = TrainingOptions.from_recipe(
        "dsinit_matt",
        output_dir=str(out),
        data_source=data_dir,
        src_lang=SRC_LANG,
        tgt_lang=TGT_LANG,
        vocab_size=120,
        max_tokens=300,
        warmup_steps=2,
        learning_rate=3e-3,
        max_steps=4,
        save_steps=2,
        average_last_checkpoints=2,
        num_beams=2,
        disable_tqdm=True,
    )
    shape = {k: v for k, v in TINY_SHAPE.items() if "dropout" not in k}  # the recipe's dropouts stay
    record = training.train(options, shape)
    recipe = record["recipe"]
    assert recipe["name"] == "dsinit_matt"
    assert recipe["settings"]["max_tokens"] == {
        "value": 5752,
        "source": recipe["settings"]["max_tokens"]["source"],
        "used": 300,
    }
    assert recipe["settings"]["dropout"]["used"] == 0.3  # the recipe's config field reached the model
    assert (
        record["hyperparameters"]["optimizer"] == "adam"
        and record["hyperparameters"]["batching"] == "max_tokens=300"
    )
    assert record["hyperparameters"]["averaged_checkpoints"] == ["checkpoint-2", "checkpoint-4"]
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["recipe"]["name"] == "dsinit_matt"
    generation = json.loads((out / "generation_config.json").read_text())
    assert (generation["num_beams"], generation["length_penalty"], generation["length_penalty_form"]) == (
        2,
        0.6,
        "gnmt",
    )
    config = json.loads((out / "config.json").read_text())
    assert config["share_encoder_decoder_embeddings"] is False and config["attention_dropout"] == 0.2
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert model.lm_head.weight.data_ptr() == model.model.decoder.embed_tokens.weight.data_ptr()
    assert not torch.equal(model.model.decoder.embed_tokens.weight, model.model.shared.weight)
    from deep_nmt_hf.publish.hub import render_model_card

    card = str(render_model_card(out))
    assert "Trained with the `dsinit_matt` recipe" in card and "| `max_tokens` | `5752` | **`300`** |" in card
