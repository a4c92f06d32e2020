"""Model cards, the upload folder of `deep-nmt push`, and loading that folder from a simulated Hub cache.

Every variant is trained for one step with `training.train` (tiny shapes, synthetic corpus), so the cards are
rendered from real training output. The Hub is not reachable: the upload is checked up to the `HfApi` calls,
and the download side by placing the prepared folder into a Hugging Face cache exactly as `hf_hub_download`
lays it out (blobs, snapshots/<revision>, refs/main) and loading it in a fresh process with HF_HUB_OFFLINE=1 where
`deep_nmt_hf` is not importable.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from fresh_process import run_without_package
from huggingface_hub import ModelCard, ModelCardData
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

import deep_nmt_hf
from deep_nmt_hf.cli import main
from deep_nmt_hf.data import write_parallel_dir
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, demo_splits
from deep_nmt_hf.publish.folding import NotFoldableError, check_foldable
from deep_nmt_hf.publish.hub import CARD_DIR, prepare_upload, render_model_card, transformers_range
from deep_nmt_hf.training import TrainingOptions, train

TINY = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4)
TINY |= dict(decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, dropout=0.0)
PER_VARIANT = {
    "shared_layers": {"encoder_layer_repeats": 2, "decoder_layer_repeats": 2},
    "deep_decoder": {"cross_attention_drop_layers": 1},
}
FOLDABLE = {
    "base",
    "admin",
    "deepnorm",
    "deep_decoder",
}  # MAtt, DLCL and re-injected shared layers do not fold
PAPERS = yaml.safe_load((CARD_DIR / "papers.yaml").read_text(encoding="utf-8"))
VARIANT_PAPER = {"base": "vaswani2017", "admin": "admin", "deepnorm": "deepnet", "dsinit_matt": "dsinit"}
VARIANT_PAPER |= {"dlcl": "dlcl", "shared_layers": "shared_layers", "deep_decoder": "deep_decoder"}
SOURCES = ["ela gupebeda avure .", "kol nuto vugat un vibome like ."]
GENERATION = dict(num_beams=2, max_new_tokens=6, min_new_tokens=3)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every variant trained for 1 step on a small synthetic corpus (one shared tokenizer)."""
    root = tmp_path_factory.mktemp("trained")
    data = root / "data"
    for split, pairs in demo_splits(train=48, valid=2, test=2, seed=5).items():
        write_parallel_dir(pairs, data, split, SRC_LANG, TGT_LANG)
    models: dict[str, Path] = {}
    for variant in sorted(deep_nmt_hf.VARIANTS):
        first = next(iter(models.values()), None)
        options = TrainingOptions(
            output_dir=str(root / variant),
            data_source=data,
            src_lang=SRC_LANG,
            tgt_lang=TGT_LANG,
            valid_split="valid",
            test_split="test" if variant == "admin" else None,
            variant=variant,
            tokenizer_dir=str(first) if first else None,
            vocab_size=160,
            max_source_length=24,
            max_target_length=24,
            batch_size=16,
            learning_rate=1e-3,
            warmup_steps=1,
            max_steps=1,
            save_steps=1,
            logging_steps=1,
            num_beams=1,
            disable_tqdm=True,
        )
        train(options, {**TINY, **PER_VARIANT.get(variant, {})})
        models[variant] = root / variant
    return models


def _front_matter(text: str) -> dict:
    match = re.match(r"^---\n(.*?)\n---\n", text, flags=re.S)
    assert match, "the card must start with YAML metadata"
    return yaml.safe_load(match.group(1))


# ------------------------------------------------------------------------------------------------------ cards
@pytest.mark.parametrize("variant", sorted(deep_nmt_hf.VARIANTS))
def test_card_of_every_variant_is_filled_from_training_output(variant: str, trained) -> None:
    model_dir = trained[variant]
    record = json.loads((model_dir / "metrics.json").read_text())
    config = json.loads((model_dir / "config.json").read_text())
    card = render_model_card(model_dir, repo_id="org/tiny-" + variant.replace("_", "-"), license="mit")
    text = str(card)

    metadata = _front_matter(text)
    reparsed = ModelCard(text)  # huggingface_hub's own parser; ModelCardData validates the model-index
    assert reparsed.data.to_dict() == metadata
    ModelCardData(**metadata)  # raises on an invalid model-index (ignore_metadata_errors=False)
    assert metadata["pipeline_tag"] == "translation" and metadata["license"] == "mit"
    assert metadata["library_name"] == "transformers"
    assert {variant, config["model_type"], "translation", "custom_code"} <= set(metadata["tags"])
    assert "language" not in metadata  # the synthetic sa/sb pair is not a real language ("sa" is Sanskrit)
    assert "datasets" not in metadata  # trained on local files: no Hub dataset to name
    assert metadata["metrics"] == ["bleu", "chrf", "ter"]

    (index,) = metadata["model-index"]
    assert index["name"] == "tiny-" + variant.replace("_", "-")
    found = {}
    for result in index["results"]:
        assert result["task"]["type"] == "translation"
        for metric in result["metrics"]:
            found[(result["dataset"]["split"], metric["type"])] = (metric["value"], metric["config"])
    expected = {
        (split, metric): (scores[metric], scores[f"{metric}_signature"])
        for split, scores in record["metrics"].items()
        for metric in ("bleu", "chrf", "ter")
    }
    assert found == expected and len(expected) == 3 * len(record["metrics"])

    depth = config["encoder_layers"] * config.get("encoder_layer_repeats", 1)
    assert f"a {depth}-layer encoder" in text
    assert f"| training pairs | {record['num_train_examples']} |" in text
    assert f"| steps | {record['global_step']} |" in text
    assert f"| learning rate | {record['hyperparameters']['learning_rate']:g} |" in text
    assert f"| parameters | {record['model']['num_parameters']:,} |" in text
    assert PAPERS[VARIANT_PAPER[variant]]["title"] in text
    assert PAPERS["vaswani2017"]["title"] in text
    assert "trust_remote_code=True)" in text and 'from_pretrained("org/tiny-' in text
    declared = transformers_range()["declared"]
    assert declared.startswith(">=5.") and f"tested with `transformers{declared}`" in text
    folds = variant in ("admin", "base", "deep_decoder", "deepnorm")
    assert ("`deep-nmt push --fold`" in text) == folds, "the card recommends the fold exactly where it exists"
    for value in ("None", "null", "nan"):
        assert not re.search(rf"\b{value}\b", text), f"{value} leaked into the card"
    if variant == "admin":
        omegas = json.loads((model_dir / "admin_omega.json").read_text())
        assert f"| encoder | {len(omegas['encoder'])} | {min(omegas['encoder']):.3f} | " in text
        assert f"{max(omegas['decoder']):.3f}" in text and "admin_omega.png" in text
        assert {("test", "bleu"), ("valid", "bleu")} <= set(found)


def test_missing_values_are_left_out_and_known_languages_and_datasets_are_named(trained, tmp_path) -> None:
    model_dir = tmp_path / "model"
    shutil.copytree(trained["base"], model_dir)
    record = json.loads((model_dir / "metrics.json").read_text())
    for key in ("metrics", "bleu", "chrf", "ter", "global_step", "num_train_examples", "model"):
        record.pop(key, None)
    record["hyperparameters"].pop("learning_rate")
    record["hyperparameters"]["warmup_steps"] = None
    record |= {"src_lang": "en", "tgt_lang": "de", "data_source": "bentrevett/multi30k"}
    (model_dir / "metrics.json").write_text(json.dumps(record))

    text = str(render_model_card(model_dir))
    metadata = _front_matter(text)
    assert metadata["language"] == ["en", "de"] and metadata["datasets"] == ["bentrevett/multi30k"]
    assert "model-index" not in metadata and "metrics" not in metadata
    assert "No evaluation was recorded" in text
    assert "| learning rate |" not in text and "| warmup steps |" not in text and "| steps |" not in text
    assert "| parameters |" not in text and "`learning_rate`" not in text
    assert "| batch size | 16 |" in text  # what is recorded is still there
    assert not re.search(r"\b(None|null)\b", text)

    (model_dir / "metrics.json").unlink()
    bare = str(render_model_card(model_dir))
    metadata = _front_matter(bare)
    assert "language" not in metadata and "model-index" not in metadata
    assert "No training record" in bare and "No evaluation was recorded" in bare
    assert not re.search(r"\b(None|null)\b", bare)
    ModelCardData(**metadata)


# ---------------------------------------------------------------------------------------------------- push
def test_push_dry_run_lists_the_folder_and_bad_input_is_a_one_line_error(trained, tmp_path, capsys) -> None:
    staging = tmp_path / "upload"
    assert (
        main(["push", str(trained["dlcl"]), "org/dlcl-tiny", "--dry-run", "--staging-dir", str(staging)]) == 0
    )
    out = capsys.readouterr().out
    files = {p.name: p.stat().st_size for p in staging.iterdir()}
    for name, size in files.items():
        assert re.search(rf"^{re.escape(name)}\s+\S+ (B|KB|MB)$", out, flags=re.M), name
        assert size > 0
    assert str(staging) in out and "dry run" in out
    assert {"README.md", "model.safetensors", "config.json", "generation_config.json", "metrics.json"} <= set(
        files
    )
    assert {"tokenizer.json", "modeling_deep_nmt.py", "configuration_deep_nmt.py", "dlcl_weights.png"} <= set(
        files
    )
    assert not [name for name in files if name.endswith((".bin", ".pt", ".pth"))]
    assert "training.py" not in files and "cli.py" not in files
    config = json.loads((staging / "config.json").read_text())
    assert config["auto_map"]["AutoModelForSeq2SeqLM"].startswith("modeling_deep_nmt.")
    # the translation pipeline travels with it (pipeline_shipping.py): no install needed on the Hub
    assert "translation_pipeline.py" in files
    assert config["custom_pipelines"]["translation"]["impl"] == "translation_pipeline.TranslationPipeline"
    readme = (staging / "README.md").read_text()
    assert "![DLCL weights](dlcl_weights.png)" in readme and "`modeling_deep_nmt.py`" in readme
    assert 'pipeline("translation", model="org/dlcl-tiny", trust_remote_code=True)' in readme

    not_a_model = tmp_path / "empty"
    not_a_model.mkdir()
    cases = [
        ([str(tmp_path / "missing"), "org/x"], "no such model directory"),
        ([str(not_a_model), "org/x"], "no config.json"),
        ([str(trained["base"]), "not a/valid repo"], "repo id 'not a/valid repo' is invalid"),
        ([str(trained["base"]), "a/b/c"], "is invalid"),
    ]
    for args, message in cases:
        assert main(["push", *args, "--dry-run"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and message in err and "\n" not in err, err


def test_push_uploads_exactly_the_prepared_folder(trained, monkeypatch) -> None:
    import huggingface_hub

    calls: list[tuple[str, dict]] = []

    class RecordingApi:  # stands in for the network: records what push asks the Hub to do
        def __init__(self, token=None) -> None:
            calls.append(("init", {"token": token}))

        def create_repo(self, repo_id, **kwargs):
            calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))

        def upload_folder(self, folder_path, **kwargs):
            listing = sorted(p.name for p in Path(folder_path).iterdir())
            calls.append(("upload_folder", {"folder": folder_path, "listing": listing, **kwargs}))
            return type("Commit", (), {"commit_url": "https://huggingface.co/org/m/commit/0"})()

    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    from deep_nmt_hf.cli import common

    monkeypatch.setattr(common, "check_hub_reachable", lambda *args, **kwargs: None)  # no network here either
    assert main(["push", str(trained["admin"]), "org/admin-tiny", "--fold", "--private"]) == 0
    names = [name for name, _ in calls]
    assert names == ["init", "create_repo", "upload_folder"]
    create, upload = calls[1][1], calls[2][1]
    assert create == {"repo_id": "org/admin-tiny", "repo_type": "model", "private": True, "exist_ok": True}
    assert upload["repo_id"] == "org/admin-tiny" and upload["delete_patterns"] == "*"
    assert "model.safetensors" in upload["listing"] and "README.md" in upload["listing"]
    assert "fold_report.json" in upload["listing"] and not [n for n in upload["listing"] if n.endswith(".py")]
    assert not Path(upload["folder"]).exists()  # the temporary folder is cleaned up


# ------------------------------------------------------------------------------------- simulated Hub download
def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def place_in_hub_cache(folder: Path, hf_home: Path, repo_id: str) -> str:
    """Lay `folder` out as `hf_hub_download` does: blobs named by their hash (sha256 for LFS files, the git
    blob sha1 otherwise), snapshots/<revision>/<file> symlinks to them, refs/main holding the revision."""
    repo = hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    revision = hashlib.sha1(b"".join(hashlib.sha256(p.read_bytes()).digest() for p in files)).hexdigest()
    snapshot = repo / "snapshots" / revision
    (repo / "blobs").mkdir(parents=True)
    for path in files:
        data = path.read_bytes()
        lfs = path.suffix in (".safetensors", ".png")
        blob = repo / "blobs" / (hashlib.sha256(data).hexdigest() if lfs else _git_blob_sha1(data))
        blob.write_bytes(data)
        link = snapshot / path.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return revision


DOWNLOAD_AND_TRANSLATE = """
import json, sys
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
jobs = json.load(open("jobs.json"))
out = {}
for repo_id, custom in jobs["repos"]:
    tokenizer = AutoTokenizer.from_pretrained(repo_id, trust_remote_code=custom)
    model = AutoModelForSeq2SeqLM.from_pretrained(repo_id, trust_remote_code=custom).eval()
    batch = tokenizer(jobs["sources"], return_tensors="pt", padding=True)
    ids = model.generate(**batch, **jobs["generation"])
    out[repo_id] = {"class": type(model).__name__, "module": type(model).__module__, "ids": ids.tolist(),
                    "text": tokenizer.batch_decode(ids, skip_special_tokens=True)}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_every_variant_loads_from_a_simulated_hub_cache_in_a_fresh_process(trained, tmp_path) -> None:
    hf_home = tmp_path / "hf_home"
    repos, expected = [], {}
    for variant, model_dir in sorted(trained.items()):
        config = AutoModelForSeq2SeqLM.from_pretrained(model_dir).config
        try:
            check_foldable(config)
            foldable = True
        except NotFoldableError:
            foldable = False
        assert foldable == (variant in FOLDABLE), variant
        for fold in (False, True) if foldable else (False,):
            name = variant.replace("_", "-") + ("-folded" if fold else "")
            prepared = prepare_upload(
                model_dir, tmp_path / "uploads" / name, fold=fold, repo_id=f"org/{name}"
            )
            revision = place_in_hub_cache(prepared.folder, hf_home, f"org/{name}")
            assert re.fullmatch(r"[0-9a-f]{40}", revision)
            model = AutoModelForSeq2SeqLM.from_pretrained(prepared.folder).eval()
            tokenizer = AutoTokenizer.from_pretrained(prepared.folder)
            with torch.no_grad():
                ids = model.generate(**tokenizer(SOURCES, return_tensors="pt", padding=True), **GENERATION)
            expected[f"org/{name}"] = (type(model).__name__, ids.tolist())
            repos.append((f"org/{name}", not fold))
    (tmp_path / "jobs.json").write_text(
        json.dumps({"repos": repos, "sources": SOURCES, "generation": GENERATION})
    )

    result = run_without_package(DOWNLOAD_AND_TRANSLATE, tmp_path, hf_home=hf_home)

    assert len(repos) == len(deep_nmt_hf.VARIANTS) + len(FOLDABLE)
    for repo_id, custom in repos:
        class_name, ids = expected[repo_id]
        got = result[repo_id]
        assert got["class"] == class_name and got["ids"] == ids, repo_id
        assert len(got["text"]) == len(SOURCES) and all(isinstance(t, str) for t in got["text"])
        if custom:
            assert got["module"].startswith("transformers_modules."), repo_id
        else:
            assert got["module"].startswith("transformers.models."), repo_id
            assert class_name in ("MarianMTModel", "PegasusForConditionalGeneration")


@pytest.mark.slow
def test_a_folded_cards_code_runs_with_stock_transformers_alone(trained, tmp_path) -> None:
    """Issue #59, item 4: the folded card says what runs without the package (Transformers 5 has no
    "translation" pipeline) and its "How to use" code runs as written in a fresh process where deep_nmt_hf
    cannot be imported, the repository id answered from a Hub cache."""
    hf_home = tmp_path / "hf_home"
    prepared = prepare_upload(trained["admin"], tmp_path / "upload", fold=True, repo_id="org/admin-folded")
    place_in_hub_cache(prepared.folder, hf_home, "org/admin-folded")
    card = (prepared.folder / "README.md").read_text(encoding="utf-8")
    usage = card.split("## How to use", 1)[1].split("\n## ", 1)[0]
    assert "stock Transformers alone" in usage and "`generate`" in usage, usage
    assert 'pipeline("translation"' in usage and "removed" in usage, usage  # says why there is no pipeline
    blocks = re.findall(r"```python\n(.*?)```", usage, flags=re.S)
    assert len(blocks) == 2 and "trust_remote_code" not in blocks[0], blocks  # the stock block, then int8's
    assert "quantization_config=int8_quantization_config()" in blocks[1], blocks
    code = blocks[0] + "\nimport json, sys\nprint(json.dumps({'model': type(model).__module__}))\n"
    result = run_without_package(code, tmp_path, hf_home=hf_home)
    assert result["model"].startswith("transformers.models.marian."), result


@pytest.mark.parametrize(
    "source, pair, name",
    [
        ("DATA", ("sa", "sb"), "deep_nmt_hf synthetic sa-sb (deep-nmt demo's corpus)"),
        ("/corpora/multi30k/data", ("en", "de"), "multi30k/data"),
        ("/corpora/multi30k", ("en", "de"), "multi30k"),
        ("/corpora/wmt16.jsonl", ("en", "de"), "wmt16"),
    ],
)
def test_a_corpus_read_from_local_files_is_named_by_what_it_is(
    trained, tmp_path: Path, source: str, pair: tuple[str, str], name: str
) -> None:
    """--data-dir out/demo/data named the corpus "data" in the card."""
    model_dir = tmp_path / "model"
    shutil.copytree(trained["base"], model_dir)
    record = json.loads((model_dir / "metrics.json").read_text())
    assert Path(record["data_source"]).name == "data"  # the fixture's corpus: a folder named data
    if source != "DATA":
        record["data_source"] = source
    record["src_lang"], record["tgt_lang"] = pair
    (model_dir / "metrics.json").write_text(json.dumps(record))
    text = str(render_model_card(model_dir))
    (index,) = _front_matter(text)["model-index"]
    assert {result["dataset"]["name"] for result in index["results"]} == {name}
    assert f"| data | {name} |" in text and "| data | data |" not in text
