"""CTranslate2 export parity: for every foldable variant, a briefly trained tiny model exported to CTranslate2
gives exactly the beam-4 tokens of Transformers' `generate` (float32), and the int8 export runs.

Both sides are set explicitly to the same search: beam 4, length penalty 1 (score = sum of log-probs / length,
</s> counted), stop once 4 hypotheses are finished (HF `early_stopping=True` = CTranslate2 `patience=1`), at most
MAX_NEW tokens (HF `max_length` counts the decoder start token), no forced </s> at the length limit (CTranslate2
has none), and </s> allowed as the first token (CTranslate2's default min_decoding_length=1 forbids it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from factories import TINY_SHAPE

ctranslate2 = pytest.importorskip("ctranslate2", reason="the ctranslate2 extra is not installed")

from transformers import AutoTokenizer  # noqa: E402

from deep_nmt_hf.data.synthetic import generate_pairs  # noqa: E402
from deep_nmt_hf.data.tokenization import train_tokenizer  # noqa: E402
from deep_nmt_hf.publish.export import export_ctranslate2  # noqa: E402
from deep_nmt_hf.training import build_config, resolve_variant  # noqa: E402
from deep_nmt_hf.training.admin_profiling import admin_profile  # noqa: E402

BEAM = 4
MAX_NEW = 40
PROBES = 16
STEPS = 120
STEPS_OF = {"deepnorm": 240}
TINY = dict(TINY_SHAPE, max_position_embeddings=64, label_smoothing=0.0)
# every variant that folds into a stock class: (variant, config fields, expected stock model_type)
FOLDABLE: dict[str, tuple[str, dict[str, Any], str]] = {
    "base_post_ln": ("base", {"layer_norm_position": "post"}, "marian"),
    "base_pre_ln": ("base", {"layer_norm_position": "pre"}, "pegasus"),
    "admin": ("admin", {}, "marian"),
    "deepnorm": ("deepnorm", {}, "marian"),  # β-scaled init learns slower: twice the steps (STEPS_OF)
    "deep_decoder_cad": ("deep_decoder", {"decoder_layers": 3, "cross_attention_drop_layers": 1}, "pegasus"),
    "shared_layers": (
        "shared_layers",
        {"encoder_layer_repeats": 2, "encoder_reinject_input": False, "decoder_reinject_input": False},
        "pegasus",
    ),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Any]:
    pairs = generate_pairs(3000, seed=0)
    tokenizer = train_tokenizer(
        [text for pair in pairs for text in pair], vocab_size=400, model_max_length=64
    )
    probes = [source for source, _ in generate_pairs(PROBES, seed=777)]
    return {"pairs": pairs, "tokenizer": tokenizer, "probes": probes, "root": tmp_path_factory.mktemp("ct2")}


def train_tiny(name: str, corpus: dict[str, Any]) -> Path:
    """A few Adam steps (batch 32, lr 3e-3) on the synthetic corpus; saved with its tokenizer."""
    variant, fields, _ = FOLDABLE[name]
    tokenizer = corpus["tokenizer"]
    config_class, model_class = resolve_variant(variant)
    config = build_config(
        tokenizer, config_class, max_source_length=64, max_target_length=64, **TINY | fields
    )
    torch.manual_seed(0)
    model = model_class(config).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    pairs = corpus["pairs"]
    for step in range(STEPS_OF.get(name, STEPS)):
        chunk = pairs[(step * 32) % len(pairs) :][:32]
        batch = tokenizer(
            [s for s, _ in chunk], text_target=[t for _, t in chunk], padding=True, return_tensors="pt"
        )
        batch["labels"] = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
        if step == 0 and variant == "admin":
            admin_profile(model, batch)
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    out = corpus["root"] / name
    model.eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def trained(corpus):
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = train_tiny(name, corpus)
        return cache[name]

    return get


def hf_tokens(model_dir: Path, sources: list[str]) -> list[list[str]]:
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    batch = tokenizer(sources, padding=True, return_tensors="pt")
    with torch.no_grad():
        output = model.generate(
            **batch,
            num_beams=BEAM,
            max_length=MAX_NEW + 1,
            length_penalty=1.0,
            early_stopping=True,
            forced_eos_token_id=None,
            do_sample=False,
        )
    rows = [[i for i in row[1:].tolist() if i != tokenizer.pad_token_id] for row in output]
    return [tokenizer.convert_ids_to_tokens(row) for row in rows]


def ct2_tokens(ct2_dir: Path, tokenizer, sources: list[str]) -> list[list[str]]:
    translator = ctranslate2.Translator(str(ct2_dir), device="cpu", compute_type="default")
    source_tokens = [tokenizer.convert_ids_to_tokens(ids) for ids in tokenizer(sources)["input_ids"]]
    results = translator.translate_batch(
        source_tokens,
        beam_size=BEAM,
        patience=1.0,
        length_penalty=1.0,
        max_decoding_length=MAX_NEW,
        min_decoding_length=0,
        return_end_token=True,
    )
    return [result.hypotheses[0] for result in results]


@pytest.mark.parametrize("name", list(FOLDABLE))
def test_ctranslate2_beam_outputs_equal_transformers(name, trained, corpus) -> None:
    model_dir = trained(name)
    out = corpus["root"] / f"{name}.ct2"
    export_ctranslate2(model_dir, out)
    assert (out / "model.bin").is_file()
    config = json.loads((out / "config.json").read_text())
    assert config["decoder_start_token"] == "<pad>" and config["eos_token"] == "</s>"

    expected = hf_tokens(model_dir, corpus["probes"])
    got = ct2_tokens(out, corpus["tokenizer"], corpus["probes"])

    assert got == expected
    # a trained model: the <pad> row the decoder starts from has moved away from zero (the tied output
    # projection's gradient reaches it), which is what the stock ct2-transformers-converter gets wrong
    from safetensors.torch import load_file

    weights = load_file(model_dir / "model.safetensors")
    shared = next(value for key, value in weights.items() if key.endswith("shared.weight"))
    assert shared[corpus["tokenizer"].pad_token_id].abs().max() > 1e-3
    finished = sum(row[-1:] == ["</s>"] for row in expected)
    assert finished >= PROBES * 3 // 4, f"{name}: only {finished}/{PROBES} outputs end in </s> (undertrained)"
    assert len({" ".join(row) for row in expected}) > 1, f"{name}: every probe translates the same"
    assert FOLDABLE[name][2] in ("marian", "pegasus")


@pytest.mark.parametrize("name", ["base_post_ln", "base_pre_ln"])
def test_int8_export_runs_and_reports_agreement(name, trained, corpus) -> None:
    model_dir = trained(name)
    out = corpus["root"] / f"{name}.int8.ct2"
    export_ctranslate2(model_dir, out, quantization="int8")
    assert json.loads((out / "config.json").read_text())["decoder_start_token"] == "<pad>"
    float32 = hf_tokens(model_dir, corpus["probes"])  # = CTranslate2 float32 (test above)
    int8 = ct2_tokens(out, corpus["tokenizer"], corpus["probes"])
    agreement = sum(a == b for a, b in zip(float32, int8, strict=True)) / PROBES
    same_tokens = sum(x == y for a, b in zip(float32, int8, strict=True) for x, y in zip(a, b, strict=False))
    positions = sum(max(len(a), len(b)) for a, b in zip(float32, int8, strict=True))
    print(
        f"{name}: int8 vs float32 on {PROBES} probes: {agreement:.0%} identical outputs, "
        f"{same_tokens / positions:.0%} of token positions equal"
    )
    # no exactness is claimed for int8 (d_model 32 quantizes coarsely): it runs and emits well-formed outputs
    assert all(0 < len(row) <= MAX_NEW and "<pad>" not in row for row in int8)
    assert all(row[-1] == "</s>" for row in int8 if len(row) < MAX_NEW)
    assert "</s>" not in [token for row in int8 for token in row[:-1]]


def test_export_refuses_unfoldable_and_bad_arguments(tmp_path, corpus) -> None:
    from factories import tiny_model

    from deep_nmt_hf.publish.folding import NotFoldableError

    tiny_model(encoder_layer_aggregation="dlcl", layer_norm_position="pre").save_pretrained(tmp_path / "dlcl")
    corpus["tokenizer"].save_pretrained(tmp_path / "dlcl")
    with pytest.raises(NotFoldableError, match="encoder_layer_aggregation='dlcl'"):
        export_ctranslate2(tmp_path / "dlcl", tmp_path / "out")
    with pytest.raises(ValueError, match="quantization='int4' is not one of"):
        export_ctranslate2(tmp_path / "dlcl", tmp_path / "out", quantization="int4")
    with pytest.raises(FileNotFoundError, match="missing: no such directory"):
        export_ctranslate2(tmp_path / "missing", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        export_ctranslate2(tmp_path / "empty", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
