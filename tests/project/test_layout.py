"""The layout's rules (issue #51): `model/` is exactly what a checkpoint ships and imports only torch, transformers
and itself; imports run one way (cli → training → publish → data / science → model); checkpoints saved before the
move still load; training chooses its data lane in one place."""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from factories import PAD, padded_batch
from fresh_process import run_without_package
from transformers import AutoModelForSeq2SeqLM

import deep_nmt_hf

REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = REPO / "deep_nmt_hf" / "model"
sys.path.insert(0, str(REPO / ".ci"))

import layout_metrics  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pre_layout_checkpoints.zip"
# shipped by a converted tokenizer's own save_pretrained (PairedTokenizerFast, FairseqBPE01Tokenizer), not by the model's
TOKENIZER_FILES = {"tokenization_paired.py", "tokenization_moses.py", "tokenization_bpe01.py"}
# shipped by `deep-nmt fold` as a converted model's custom_generate/generate.py (publish/folding.py), not by the model
FOLD_FILES = {"custom_generate.py"}


def model_files() -> set[str]:
    return {p.name for p in MODEL_DIR.glob("*.py") if p.name != "__init__.py"}


def test_model_imports_only_torch_transformers_the_standard_library_and_itself() -> None:
    allowed = set(sys.stdlib_module_names) | {"torch", "transformers"}
    for path in sorted(MODEL_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                assert {a.name.split(".")[0] for a in node.names} <= allowed, (path.name, ast.unparse(node))
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module.split(".")[0] in allowed, (path.name, ast.unparse(node))
            elif isinstance(node, ast.ImportFrom):
                # relative: only a sibling file (what transformers copies into a checkpoint)
                names = [node.module] if node.module else [a.name for a in node.names]
                assert node.level == 1 and all(f"{n}.py" in model_files() for n in names), (
                    path.name,
                    ast.unparse(node),
                )


@pytest.mark.parametrize("variant", sorted(deep_nmt_hf.VARIANTS))
def test_a_checkpoint_ships_exactly_the_model_folder(variant: str, tmp_path: Path) -> None:
    from factories import TINY_SHAPE, VOCAB

    config = deep_nmt_hf.VARIANTS[variant](vocab_size=VOCAB, max_position_embeddings=64, **TINY_SHAPE)
    AutoModelForSeq2SeqLM.from_config(config).save_pretrained(tmp_path)
    assert {p.name for p in tmp_path.glob("*.py")} == model_files() - TOKENIZER_FILES - FOLD_FILES


def test_a_two_vocabulary_tokenizer_ships_the_rest_of_the_model_folder(tmp_path: Path) -> None:
    from deep_nmt_hf.model.tokenization_paired import PairedTokenizerFast
    from deep_nmt_hf.publish.fairseq_tokenizer import build_tokenizer

    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    source, target = build_tokenizer(specials + ["a", "b"], None), build_tokenizer(specials + ["c"], None)
    PairedTokenizerFast.pair(source, target).save_pretrained(tmp_path)
    assert {p.name for p in tmp_path.glob("*.py")} == TOKENIZER_FILES <= model_files()


def test_imports_run_one_way_without_cycles() -> None:
    known = layout_metrics.modules(REPO)
    graph = {name: layout_metrics.imports(name, path, known) for name, path in known.items()}
    rank = {name: layout_metrics.RANK[layout_metrics.layer(name)] for name in known}
    upward = [(a, b) for a, targets in graph.items() for b in targets if rank[b] > rank[a]]
    assert upward == []
    assert layout_metrics.cycles(graph) == []
    flat = [name for name in known if name.count(".") == 1 and name.split(".")[1] not in layout_metrics.RANK]
    assert flat == [], "a module at the package's top: put it in the folder of its layer"


def test_training_chooses_the_streaming_lane_in_one_place() -> None:
    """`--streaming` picks `data.corpus.TrainingCorpus`'s lane once (`training.inputs.training_corpus`); before,
    training/run.py and training/inputs.py each branched on it."""
    branches = []
    for path in sorted((REPO / "deep_nmt_hf").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.If | ast.IfExp | ast.BoolOp):
                tested = node.values if isinstance(node, ast.BoolOp) else [node.test]
                if any("options.streaming" in ast.unparse(t) for t in tested):
                    branches.append(f"{path.relative_to(REPO).as_posix()}:{node.lineno}")
    assert branches == []
    source = (REPO / "deep_nmt_hf" / "training" / "inputs.py").read_text()
    assert "streaming=options.streaming" in source


OLD_CODE_CHECKPOINT = """
import json, torch
from transformers import AutoConfig, AutoModelForSeq2SeqLM
from transformers.pipelines import PIPELINE_REGISTRY
out = {}
for variant in json.load(open("variants.json")):
    config = AutoConfig.from_pretrained(variant, trust_remote_code=True)
    torch.manual_seed(0)
    model = AutoModelForSeq2SeqLM.from_config(config, trust_remote_code=True).eval()
    # that code registered the pipeline of the first folder's copy only (fixed since: pipeline_shipping.py)
    PIPELINE_REGISTRY.supported_tasks.pop("translation", None)
    model.save_pretrained(variant)  # weights written by the code of before the move
    batch = torch.load("batch.pt")
    with torch.no_grad():
        out[variant] = model(**batch).logits.tolist()
print(json.dumps(out))
"""


@pytest.mark.slow
def test_checkpoints_saved_before_the_move_load_with_the_package(tmp_path: Path) -> None:
    """The fixture holds the configs and remote code that `save_pretrained` wrote before the move, for one tiny
    model per variant. The code of then builds and saves each model in a fresh process without the package;
    today's package loads every one with no missing or unexpected weights and the same logits."""
    with zipfile.ZipFile(FIXTURE) as archive:
        archive.extractall(tmp_path / "fixture")
    code = sorted((tmp_path / "fixture" / "code").glob("*.py"))
    variants = sorted(p.name for p in (tmp_path / "fixture").iterdir() if (p / "config.json").is_file())
    assert variants == sorted(deep_nmt_hf.VARIANTS)
    for variant in variants:
        folder = tmp_path / variant
        folder.mkdir()
        for path in [*code, *(tmp_path / "fixture" / variant).glob("*.json")]:
            (folder / path.name).write_bytes(path.read_bytes())
    ids, mask = padded_batch([5, 3])
    batch = {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": torch.full((2, 3), PAD)}
    torch.save(batch, tmp_path / "batch.pt")
    (tmp_path / "variants.json").write_text(json.dumps(variants))

    old = run_without_package(OLD_CODE_CHECKPOINT, tmp_path)

    for variant in variants:
        model, info = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / variant, output_loading_info=True)
        assert type(model).__module__.startswith("deep_nmt_hf.model."), (
            variant
        )  # the package's class, not remote
        assert not info["missing_keys"] and not info["unexpected_keys"], (variant, info)
        with torch.no_grad():
            logits = model.eval()(**batch).logits
        torch.testing.assert_close(logits, torch.tensor(old[variant]), atol=1e-5, rtol=1e-5, msg=variant)
