"""Every variant works through `pipeline("translation", ...)`, custom and folded; a saved checkpoint carries the
pipeline, so it works without the package (trust_remote_code)."""

from __future__ import annotations

import ast
import json

import pytest
import torch
from fresh_process import run_without_package
from transformers import pipeline

import deep_nmt_hf
from deep_nmt_hf.data.synthetic import generate_pairs
from deep_nmt_hf.data.tokenization import special_token_ids, train_tokenizer
from deep_nmt_hf.publish.folding import fold_to_stock

SMALL = dict(
    d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_attention_heads=4, decoder_attention_heads=4
)
SHALLOW = dict(encoder_layers=2, decoder_layers=2, max_position_embeddings=128)


@pytest.fixture(scope="module")
def tokenizer():
    pairs = generate_pairs(400, seed=3)
    return train_tokenizer([s for pair in pairs for s in pair], vocab_size=300, min_frequency=1)


@pytest.mark.parametrize("variant", sorted(deep_nmt_hf.VARIANTS))
def test_translation_pipeline_for_every_variant(variant: str, tokenizer) -> None:
    config_class = deep_nmt_hf.VARIANTS[variant]
    ids = {k: v for k, v in special_token_ids(tokenizer).items()}
    overrides = {**SMALL, **SHALLOW, **ids}
    if variant == "shared_layers":
        overrides |= {"encoder_layer_repeats": 2, "decoder_layer_repeats": 2}
    if variant == "deep_decoder":
        overrides |= {"cross_attention_drop_layers": 1}
    torch.manual_seed(0)
    config = config_class(**overrides)
    model = deep_nmt_hf.MODEL_TYPES[[c for c, _, _ in deep_nmt_hf.MODEL_TYPES].index(config_class)][2](
        config
    ).eval()
    translator = pipeline("translation", model=model, tokenizer=tokenizer, max_new_tokens=8, num_beams=2)
    out = translator(["kol nuto vugat .", "ela gupebeda avure ."])
    assert len(out) == 2 and all(isinstance(o["translation_text"], str) for o in out)
    try:
        stock, _ = fold_to_stock(model)
    except deep_nmt_hf.publish.folding.NotFoldableError:
        return
    folded = pipeline("translation", model=stock, tokenizer=tokenizer, max_new_tokens=8, num_beams=2)
    assert folded(["kol nuto vugat .", "ela gupebeda avure ."]) == out


def test_pipeline_from_a_saved_directory_and_its_errors(tmp_path, tokenizer) -> None:
    ids = special_token_ids(tokenizer)
    torch.manual_seed(1)
    model = deep_nmt_hf.DeepNMTForConditionalGeneration(deep_nmt_hf.DeepNMTConfig(**SMALL, **SHALLOW, **ids))
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    # An untrained model likes the bare word-boundary piece, which decodes to nothing: ban it (and pad).
    blank = tokenizer.convert_tokens_to_ids("▁")
    generation = dict(max_new_tokens=6, min_new_tokens=4, bad_words_ids=[[blank], [ids["pad_token_id"]]])
    translator = pipeline("translation", model=str(tmp_path), **generation)
    assert isinstance(translator, deep_nmt_hf.TranslationPipeline)
    direct = model.eval().generate(**tokenizer(["kol nuto ."], return_tensors="pt"), **generation)
    expected = tokenizer.decode(direct[0], skip_special_tokens=True).strip()
    assert expected  # min_new_tokens forces real tokens, so the comparison below means something
    # as Transformers' translation pipeline: a list of records for a string and for a list of strings
    assert translator("kol nuto .") == [{"translation_text": expected}]
    assert translator(["kol nuto ."]) == [{"translation_text": expected}]
    assert translator(["kol nuto .", "kol nuto ."]) == [{"translation_text": expected}] * 2
    with pytest.raises(ValueError, match="takes strings"):
        translator(123)


PIPELINE_WITHOUT_THE_PACKAGE = """
import json
from transformers import pipeline
settings = json.load(open("settings.json"))
translator = pipeline("translation", model="model", trust_remote_code=True)
outputs = {name: translator(settings["sources"], **kwargs) for name, kwargs in settings["decoding"].items()}
print(json.dumps({"class": type(translator).__name__, "module": type(translator).__module__,
                  "model": type(translator.model).__module__, "outputs": outputs}))
"""


@pytest.mark.slow
def test_a_saved_checkpoint_carries_the_pipeline_and_translates_without_the_package(
    tmp_path, tokenizer
) -> None:
    """Transformers 5 has no "translation" task: a Hub user without deep_nmt_hf gets ours from the checkpoint
    (custom_pipelines + translation_pipeline.py) with trust_remote_code, and the same translations."""
    ids = special_token_ids(tokenizer)
    torch.manual_seed(2)
    config = deep_nmt_hf.DLCLConfig(**SMALL, **SHALLOW, **ids, dlcl_window=2)
    model = deep_nmt_hf.DLCLForConditionalGeneration(config).eval()
    with torch.no_grad():  # a real combination, so the shipped layer_aggregation.py matters
        model.model.encoder.aggregation.weight.add_(
            0.3 * torch.randn_like(model.model.encoder.aggregation.weight)
        )
    model.save_pretrained(tmp_path / "model")  # the plain save carries the pipeline (issue #49)
    tokenizer.save_pretrained(tmp_path / "model")
    config_json = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config_json["custom_pipelines"] == {
        "translation": {
            "impl": "translation_pipeline.TranslationPipeline",
            "pt": ["AutoModelForSeq2SeqLM"],
            "type": "text",
        }
    }
    # the shipped module imports only transformers (and the standard library), like the modeling files
    shipped = (tmp_path / "model" / "translation_pipeline.py").read_text()
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(ast.parse(shipped))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= {"__future__", "typing", "transformers", "torch"}, imported

    blank = tokenizer.convert_tokens_to_ids(
        "▁"
    )  # an untrained model likes it: ban it so outputs are not empty
    banned = [[blank], [ids["pad_token_id"]]]
    common = dict(max_new_tokens=6, min_new_tokens=4, bad_words_ids=banned, use_cache=False)
    decoding = {"greedy": dict(common, num_beams=1), "beam": dict(common, num_beams=3)}
    sources = ["kol nuto vugat .", "ela gupebeda avure ."]
    (tmp_path / "settings.json").write_text(json.dumps({"sources": sources, "decoding": decoding}))

    result = run_without_package(PIPELINE_WITHOUT_THE_PACKAGE, tmp_path)

    assert result["class"] == "TranslationPipeline"
    assert result["module"].startswith("transformers_modules.") and result["module"].endswith(
        ".translation_pipeline"
    )
    assert result["model"].startswith("transformers_modules.")  # the model came as remote code too
    # with the package: the registered task is enough (no trust_remote_code, no pipeline_class), and it gives the
    # installed class and model code
    translator = pipeline("translation", model=str(tmp_path / "model"))
    assert type(translator) is deep_nmt_hf.TranslationPipeline
    assert type(translator.model) is deep_nmt_hf.DLCLForConditionalGeneration
    for name, kwargs in decoding.items():
        expected = translator(sources, **kwargs)
        assert all(record["translation_text"] for record in expected)
        assert result["outputs"][name] == expected, name


@pytest.mark.parametrize("variant", sorted(deep_nmt_hf.VARIANTS))
def test_a_plain_save_pretrained_carries_the_pipeline_for_every_variant(variant: str, tmp_path) -> None:
    """Issue #49: `model.save_pretrained(DIR)` itself writes the custom_pipelines entry and translation_pipeline.py
    (one code path with training, checkpoints and `deep-nmt push`), for the model and the base model classes;
    the model's config in memory is left as it was. With the package, the saved config reads without the entry
    (the registered task serves it), so a re-save writes it once again."""
    from factories import variant_model

    model = variant_model(variant)
    for saved in (model, model.model):
        directory = tmp_path / type(saved).__name__
        saved.save_pretrained(directory)
        config_json = json.loads((directory / "config.json").read_text())
        assert config_json["custom_pipelines"] == deep_nmt_hf.model.pipeline_shipping.custom_pipelines_entry()
        assert (directory / "translation_pipeline.py").is_file() and (
            directory / "modeling_deep_nmt.py"
        ).is_file()
        assert not hasattr(saved.config, "custom_pipelines")
        loaded = deep_nmt_hf.VARIANTS[variant].from_pretrained(directory)
        assert not getattr(loaded, "custom_pipelines", None)


def test_the_registered_task_serves_a_saved_directory_without_trust_remote_code(tmp_path, tokenizer) -> None:
    """With the package imported, `pipeline("translation", model=DIR)` for a directory that carries the pipeline
    needs neither trust_remote_code nor pipeline_class (Transformers asked for one before: the config named the
    task under custom_pipelines); trust_remote_code=True still works and translates the same."""
    ids = special_token_ids(tokenizer)
    torch.manual_seed(4)
    model = deep_nmt_hf.DeepNMTForConditionalGeneration(deep_nmt_hf.DeepNMTConfig(**SMALL, **SHALLOW, **ids))
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    translator = pipeline("translation", model=str(tmp_path), max_new_tokens=4)
    assert type(translator) is deep_nmt_hf.TranslationPipeline
    assert type(translator.model) is deep_nmt_hf.DeepNMTForConditionalGeneration
    remote = pipeline("translation", model=str(tmp_path), trust_remote_code=True, max_new_tokens=4)
    assert remote("kol nuto .") == translator("kol nuto .")
