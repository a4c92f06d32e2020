"""Publish a trained model on the Hugging Face Hub: model card, upload folder, push.

`render_model_card(model_dir)` fills a card from what training recorded — ``config.json`` and ``metrics.json``
(written by `training.train`) plus ``admin_omega.json`` — with `huggingface_hub.ModelCard` / `ModelCardData` and
the templates in ``model_cards/`` (one shared ``card.md.j2`` plus one short per-variant blurb in
``model_cards/variants/<variant>.md``: its limitations and text; the title and paper are the variant's registry
spec). A value that was not recorded is left out of the card, never invented.

`prepare_upload(model_dir)` writes the exact folder that goes to the Hub: weights as safetensors only,
``config.json`` (with ``auto_map`` and the shipped code files for custom variants, and the translation pipeline
under ``custom_pipelines``: pipeline_shipping.py), tokenizer,
``generation_config.json``, ``README.md`` (the card), ``metrics.json`` and plots. With ``fold=True`` it is the
folded stock model (`folding.fold_directory`): no custom code and no ``auto_map``. `push` prepares and then
uploads with `HfApi.create_repo` + `HfApi.upload_folder` (the remote repo then holds exactly that folder).

The card templates are the repository's top-level ``model_cards/``; a wheel carries them inside the package
(``deep_nmt_hf/model_cards/``, copied there by setup.py's build step). `card_dir()` finds either.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml
from huggingface_hub import EvalResult, ModelCard, ModelCardData
from huggingface_hub.utils import HFValidationError, validate_repo_id

from ..data.atomic import apply_umask_modes
from ..model.registry import VARIANT_SPECS

__all__ = [
    "CARD_DIR",
    "DEFAULT_LICENSE",
    "PreparedUpload",
    "card_dir",
    "check_repo_id",
    "prepare_upload",
    "push",
    "released_card_of",
    "render_model_card",
    "upload",
]


def card_dir() -> Path:
    """The model-card templates: inside the installed package (a wheel), else the checkout's ``model_cards/``."""
    package = Path(__file__).resolve().parents[1]  # deep_nmt_hf/
    candidates = (package / "model_cards", package.parent / "model_cards")
    for candidate in candidates:
        if (candidate / "card.md.j2").is_file():
            return candidate
    raise FileNotFoundError(
        "the model-card templates are missing: looked in "
        + " and ".join(map(str, candidates))
        + " (a wheel built without setup.py's build step? reinstall deep_nmt_hf)"
    )


CARD_DIR = card_dir()
DEFAULT_LICENSE = "apache-2.0"
METRICS_FILE = "metrics.json"  # the name training.train writes (training.METRICS_FILE; not imported: heavy)
OMEGA_FILE = "admin_omega.json"
OMEGA_PLOT = "admin_omega.png"
DLCL_PLOT = "dlcl_weights.png"
FOLD_REPORT = "fold_report.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json")
WEIGHT_SUFFIXES_REFUSED = (".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack")
METRIC_NAMES = {"bleu": "BLEU", "chrf": "chrF", "ter": "TER"}
MODEL_TYPE_TO_VARIANT = {spec.model_type: name for name, spec in VARIANT_SPECS.items()}


# --------------------------------------------------------------------------------------------------- checks
def check_repo_id(repo_id: str) -> str:
    """`repo_id` if huggingface_hub's `validate_repo_id` accepts it, else ValueError with a one-line reason."""
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        reason = " ".join(str(err).split())
        raise ValueError(f"repo id {repo_id!r} is invalid: {reason} (expected NAMESPACE/NAME)") from None
    return repo_id


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None


def _check_model_dir(model_dir: str | os.PathLike[str]) -> tuple[Path, dict[str, Any]]:
    path = Path(model_dir).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such model directory")
    if not path.is_dir():
        raise NotADirectoryError(f"{path}: not a directory (give the directory a model was saved to)")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path}: not a saved model directory (no config.json)")
    config = _read_json(path / "config.json")
    model_type = config.get("model_type")
    if model_type not in MODEL_TYPE_TO_VARIANT:
        raise ValueError(
            f"{path}: model_type={model_type!r} is not a deep_nmt_hf model; valid model types: "
            f"{', '.join(sorted(MODEL_TYPE_TO_VARIANT))}"
        )
    return path, config


# ------------------------------------------------------------------------------------------------- the card
def _front_matter(path: Path) -> tuple[dict[str, Any], str]:
    text = path.read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, flags=re.S)
    if match is None:
        raise ValueError(f"{path}: a variant blurb must start with a YAML front matter block (--- ... ---)")
    return yaml.safe_load(match.group(1)) or {}, match.group(2).strip()


def _papers_for(config: Any, variant_paper: str) -> list[str]:
    """The papers whose choices this config uses (the variant's own paper first, Vaswani et al. last)."""
    keys = [variant_paper]
    uses = {
        "admin": config.residual_scaling == "admin",
        "deepnet": config.residual_scaling == "deepnorm" or config.init_method == "deepnorm",
        "dsinit": config.init_method == "ds_init" or config.decoder_attention == "merged",
        "dlcl": "dlcl" in (config.encoder_layer_aggregation, config.decoder_layer_aggregation),
        "shared_layers": config.encoder_layer_repeats > 1 or config.decoder_layer_repeats > 1,
        "deep_decoder": config.cross_attention_drop_layers > 0
        or config.ddr_loss_weight > 0
        or config.ald_loss_weight > 0,
    }
    keys += [key for key, used in uses.items() if used]
    keys.append("vaswani2017")
    return list(dict.fromkeys(keys))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    return str(value)


def _side_rows(config: Any, side: str) -> str:
    layers = getattr(config, f"{side}_layers")
    repeats = getattr(config, f"{side}_layer_repeats", 1)
    depth = getattr(config, f"{side}_depth")
    text = f"{depth} layers"
    if repeats > 1:
        order = getattr(config, f"{side}_layer_order")
        text += f" ({layers} unique layers applied {repeats}× in {order} order"
        if not getattr(config, f"{side}_share_layers", True):
            text += ", not shared"
        if getattr(config, f"{side}_reinject_input", False):
            text += ", input re-injected"
        text += ")"
    heads = getattr(config, f"{side}_attention_heads")
    ffn = getattr(config, f"{side}_ffn_dim")
    return f"{text}, {heads} heads, FFN {ffn}"


def _architecture_rows(config: Any, record: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [
        ("model type", f"`{config.model_type}` (`{(config.architectures or ['?'])[0]}`)"),
        ("encoder", _side_rows(config, "encoder")),
        ("decoder", _side_rows(config, "decoder")),
        ("width (d_model)", _fmt(config.d_model)),
        ("vocabulary", f"{config.vocab_size} (joint, shared embeddings)"),
        ("max positions", _fmt(config.max_position_embeddings)),
        ("layer norm", f"{config.layer_norm_position}-LN"),
    ]
    if config.residual_scaling != "none":
        text = config.residual_scaling
        if config.residual_scaling == "admin":
            text += f" (ω {config.admin_omega}, init {config.admin_init})"
        rows.append(("residual scaling", text))
    init = config.init_method
    if init == "ds_init":
        init += f" (α = {_fmt(config.ds_init_alpha)})"
    rows.append(("initialisation", init))
    if config.decoder_attention != "self":
        rows.append(("decoder attention", f"{config.decoder_attention} (MAtt)"))
    for side in ("encoder", "decoder"):
        if getattr(config, f"{side}_layer_aggregation") == "dlcl":
            window = "all" if config.dlcl_window == -1 else _fmt(config.dlcl_window)
            rows.append((f"{side} aggregation", f"DLCL (init {config.dlcl_init}, window {window})"))
    if config.cross_attention_drop_layers > 0:
        rows.append(
            (
                "cross-attention drop",
                f"lowest {config.cross_attention_drop_layers} decoder layers, "
                f"rate {_fmt(config.cross_attention_drop_rate)}",
            )
        )
    if config.ddr_loss_weight > 0 or config.ald_loss_weight > 0:
        rows.append(
            (
                "training losses",
                f"DDR × {_fmt(config.ddr_loss_weight)}, ALD × {_fmt(config.ald_loss_weight)} "
                f"(max ratio {_fmt(config.ald_max_ratio)}, τ {_fmt(config.ald_temperature)})",
            )
        )
    rows.append(("dropout", f"{_fmt(config.dropout)} (attention {_fmt(config.attention_dropout)})"))
    rows.append(("label smoothing", _fmt(config.label_smoothing)))
    parameters = (record.get("model") or {}).get("num_parameters")
    if parameters is not None:
        rows.append(("parameters", f"{parameters:,}"))
    return rows


def _omega_rows(model_dir: Path, trained: dict[str, list[float]] | None) -> list[dict[str, Any]]:
    path = model_dir / OMEGA_FILE
    if not path.is_file():
        return []
    rows = []
    for side, values in _read_json(path).items():
        if not values:
            continue
        row: dict[str, Any] = {"side": side, "count": len(values), "min": min(values), "max": max(values)}
        row["mean"] = sum(values) / len(values)
        if trained and trained.get(side):
            after = trained[side]
            row |= {
                "trained_mean": sum(after) / len(after),
                "trained_min": min(after),
                "trained_max": max(after),
            }
        rows.append(row)
    return rows


def _is_local_source(source: str) -> bool:
    return (
        os.path.isabs(source)
        or source.startswith((".", "~"))
        or Path(source).expanduser().exists()
        or Path(source).suffix in (".jsonl", ".json", ".gz", ".txt")
    )


# folder names that say nothing of the corpus (`out/demo/data`): the card names the folder above them too
GENERIC_FOLDERS = ("data", "dataset", "datasets", "corpus", "corpora", "raw", "text")


def _dataset(record: dict[str, Any], override: str | None) -> tuple[str | None, str | None]:
    """(Hub dataset id or None, name for the model-index or None). Local files are named by what they are: the
    demo's synthetic pair as such, a folder (--data-dir) or file (--data) by its name, a generic folder name
    (``data``) with the folder above it (``multi30k/data``)."""
    if override:
        return override, override
    source = record.get("data_source")
    if not source:
        return None, None
    if not _is_local_source(str(source)):
        return str(source), str(source)
    src, tgt = record.get("src_lang"), record.get("tgt_lang")
    if _synthetic_pair(src, tgt):
        return None, f"deep_nmt_hf synthetic {src}-{tgt} (deep-nmt demo's corpus)"
    path = Path(str(source))
    name = path.stem if path.suffix in (".jsonl", ".json") else path.name
    if name.lower() in GENERIC_FOLDERS and path.parent.name not in ("", ".", ".."):
        name = f"{path.parent.name}/{name}"
    return None, name or str(source)


def _synthetic_pair(src: str | None, tgt: str | None) -> bool:
    from ..data.synthetic import SRC_LANG, TGT_LANG

    return (src, tgt) == (SRC_LANG, TGT_LANG)


def _scores(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Scores per split as `training.train` records them under "metrics"."""
    return {split: dict(values) for split, values in (record.get("metrics") or {}).items() if values}


def _eval_results(
    scores: dict[str, dict[str, Any]], src: str | None, tgt: str | None, dataset_name: str | None
) -> list[EvalResult]:
    results = []
    task_name = f"Translation {src}-{tgt}" if src and tgt else "Translation"
    for split, values in scores.items():
        for metric, label in METRIC_NAMES.items():
            value = values.get(metric)
            if value is None:
                continue
            signature = values.get(f"{metric}_signature")
            results.append(
                EvalResult(
                    task_type="translation",
                    task_name=task_name,
                    dataset_type=dataset_name or split,
                    dataset_name=dataset_name or split,
                    dataset_split=split,
                    metric_type=metric,
                    metric_name=label,
                    metric_value=value,
                    metric_config=signature,
                )
            )
    return results


def _training_rows(record: dict[str, Any], dataset_label: str | None) -> list[tuple[str, str]]:
    hyper = record.get("hyperparameters") or {}
    train = record.get("train") or {}
    candidates: list[tuple[str, Any]] = [
        ("data", dataset_label),
        ("training split", record.get("train_split")),
        ("training pairs", record.get("num_train_examples")),
        ("steps", record.get("global_step")),
        ("epochs", record.get("epoch")),
        ("batch size", hyper.get("batch_size")),
        ("optimizer", hyper.get("optimizer")),
        ("Adam betas", hyper.get("adam_betas")),
        ("learning rate", hyper.get("learning_rate")),
        ("schedule", hyper.get("lr_scheduler")),
        ("warmup steps", hyper.get("warmup_steps")),
        ("label smoothing", hyper.get("label_smoothing")),
        ("gradient clipping (max norm)", hyper.get("max_grad_norm")),
        ("precision", _precision_text(hyper.get("precision"), record.get("train") or {})),
        ("max source / target length", _pair(hyper.get("max_source_length"), hyper.get("max_target_length"))),
        ("seed", hyper.get("seed")),
        (
            "first / last logged training loss",
            _pair(train.get("first_logged_loss"), train.get("last_logged_loss")),
        ),
        ("training time (s)", train.get("train_runtime")),
        ("tokenizer", _tokenizer_text(record.get("tokenizer"))),
        ("versions", _versions_text(record.get("versions"))),
        ("trained on", record.get("date")),
    ]
    return [(label, _fmt(value)) for label, value in candidates if value not in (None, "", [])]


def _precision_text(precision: Any, train: dict[str, Any]) -> str | None:
    """The recorded training precision (left out when metrics.json has none), with fp16's skipped steps."""
    if not precision:
        return None
    if precision == "fp32":
        return "fp32"
    text = f"{precision} mixed precision (autocast, fp32 weights)"
    overflows = train.get("fp16_overflow_steps")
    if precision == "fp16" and overflows is not None:
        text += f"; dynamic loss scaling skipped {len(overflows)} overflow steps"
    return text


def _pair(first: Any, second: Any) -> str | None:
    if first is None or second is None:
        return None
    return f"{_fmt(first)} / {_fmt(second)}"


def _tokenizer_text(info: dict[str, Any] | None) -> str | None:
    if not info or info.get("vocab_size") is None:
        return None
    source = info.get("source")
    return f"{info['vocab_size']} tokens" + (f", {source}" if source else "")


def _versions_text(versions: dict[str, Any] | None) -> str | None:
    if not versions:
        return None
    return ", ".join(f"{name} {version}" for name, version in versions.items() if version)


@dataclass
class _FoldInfo:
    stock_class: str
    max_abs_logit_diff: float
    beam_outputs_identical: bool
    custom_generate: bool = False  # the folder carries custom_generate/ (folding.write_custom_generate)


def render_model_card(
    model_dir: str | os.PathLike[str],
    *,
    repo_id: str | None = None,
    license: str = DEFAULT_LICENSE,
    dataset: str | None = None,
    folded: dict[str, Any] | None = None,
    code_files: list[str] | None = None,
    plots: list[str] | None = None,
    trained_omegas: dict[str, list[float]] | None = None,
) -> ModelCard:
    """The model card of the model saved in `model_dir`, from its config.json and metrics.json.

    `folded`: the fold report (`folding.FoldReport` as a dict) when the card describes the folded stock model.
    `code_files`: the code files shipped for `trust_remote_code`. `plots`: file names of plots in the upload
    folder (``admin_omega.png``, ``dlcl_weights.png``) to show (default: those in `model_dir`). `trained_omegas`: `model.residual.current_omegas` of the
    trained model. `dataset`: the Hub dataset id the training data came from, when `metrics.json` records a
    local path (otherwise a Hub dataset recorded there is used). Missing values are left out.
    """
    from transformers import AutoConfig

    model_dir, raw_config = _check_model_dir(model_dir)
    config = AutoConfig.from_pretrained(model_dir)  # the package is imported: our config classes resolve
    record = _read_json(model_dir / METRICS_FILE) if (model_dir / METRICS_FILE).is_file() else {}
    variant = MODEL_TYPE_TO_VARIANT[raw_config["model_type"]]
    spec = VARIANT_SPECS[variant]  # the card's title and paper; its template: the limitations and text
    meta, blurb_template = _front_matter(CARD_DIR / "variants" / f"{variant}.md")
    papers_db = yaml.safe_load((CARD_DIR / "papers.yaml").read_text(encoding="utf-8"))
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    blurb = environment.from_string(blurb_template).render(config=config)

    src, tgt = record.get("src_lang"), record.get("tgt_lang")
    synthetic = _synthetic_pair(src, tgt)
    hub_dataset, dataset_name = _dataset(record, dataset)
    scores = _scores(record)
    fold_info = _FoldInfo(**folded) if folded else None
    model_name = repo_id.split("/")[-1] if repo_id else model_dir.absolute().name

    tags = ["translation", "deep_nmt_hf", variant, raw_config["model_type"]]
    if fold_info is not None:
        tags.append("folded")
    else:
        tags.append("custom_code")
    if synthetic:
        tags.append("synthetic-data")
    card_data = ModelCardData(
        language=[src, tgt] if src and tgt and not synthetic else None,
        license=license,
        library_name="transformers",
        pipeline_tag="translation",
        tags=tags,
        datasets=[hub_dataset] if hub_dataset else None,
        metrics=[m for m in METRIC_NAMES if any(m in values for values in scores.values())] or None,
        model_name=model_name,
        eval_results=_eval_results(scores, src, tgt, dataset_name) or None,
    )

    limitations = list(meta.get("limitations") or [])
    if synthetic:
        limitations.insert(
            0,
            f"Trained on deep_nmt_hf's synthetic demo language pair ({src} → {tgt}: invented words and grammar), "
            "not on natural language: it shows the pipeline works, it does not translate any real language.",
        )
    if record.get("num_train_examples") is not None and record.get("global_step") is not None:
        limitations.append(
            f"Trained on {record['num_train_examples']:,} sentence pairs for {record['global_step']:,} steps; "
            "expect it to translate only text like its training data."
        )
    if fold_info is None:
        limitations.append(
            "Loading runs the Python files of this repository (`trust_remote_code=True`): read them first, or "
            "install `deep_nmt_hf` instead."
        )

    hyperparameters = sorted(
        (key, _fmt(value))
        for key, value in (record.get("hyperparameters") or {}).items()
        if value is not None
    )
    signatures: list[tuple[str, str]] = []
    for values in scores.values():
        for metric, label in METRIC_NAMES.items():
            signature = values.get(f"{metric}_signature")
            if signature and (label, signature) not in signatures:
                signatures.append((label, signature))
    score_rows = [
        {
            "split": split,
            "num_sentences": values.get("num_sentences"),
            "split_sentences": values.get("split_sentences"),  # more than num_sentences: a partial score
            **{metric: values.get(metric) for metric in METRIC_NAMES},
        }
        for split, values in scores.items()
    ]
    omegas = _omega_rows(model_dir, trained_omegas if config.residual_scaling == "admin" else None)
    if plots is None:  # the plots training left in the model directory
        plots = [name for name in (OMEGA_PLOT, DLCL_PLOT) if (model_dir / name).is_file()]
    context = dict(
        title=spec.title or variant,
        blurb=blurb,
        model_name=model_name,
        language_pair=f"{src} → {tgt}" if src and tgt else None,
        arch={"encoder_depth": config.encoder_depth, "decoder_depth": config.decoder_depth},
        arch_rows=_architecture_rows(config, record),
        folded=fold_info,
        original_model_type=raw_config["model_type"],
        omegas=omegas,
        omegas_trained=bool(omegas and "trained_mean" in omegas[0]),
        plots=list(plots or []),
        scores=score_rows,
        signatures=signatures,
        num_beams=(record.get("hyperparameters") or {}).get("num_beams"),
        training_rows=_training_rows(record, hub_dataset or dataset_name),
        hyperparameters=hyperparameters,
        recipe=_recipe_rows(record.get("recipe")),
        repo_id=repo_id or "path/to/model",
        example_source=_example_source(synthetic),
        code_files=list(code_files or []),
        transformers_range=transformers_range(),
        foldable_into=None if fold_info is not None else _foldable_into(config),
        limitations=limitations,
        papers=[papers_db[key] for key in _papers_for(config, spec.paper)],
    )
    template = (CARD_DIR / "card.md.j2").read_text(encoding="utf-8")
    return ModelCard.from_template(card_data, template_str=template, **context)


def transformers_range() -> dict[str, str]:
    """The `transformers` releases this package declares (its requirement, e.g. ">=5.3,<6"; the range CI tests at
    both ends) and the release installed now, for the model card of shipped custom code."""
    import transformers
    from packaging.requirements import Requirement

    requirements = [Requirement(line) for line in importlib.metadata.requires("deep_nmt_hf") or []]
    specifiers = next((r.specifier for r in requirements if r.name == "transformers"), [])
    declared = ",".join(sorted((str(s) for s in specifiers), key=lambda s: not s.startswith(">")))
    return {"declared": declared, "installed": transformers.__version__}


def _foldable_into(config: Any) -> str | None:
    """The stock class a model of this config folds into (no custom code), or None if it does not fold."""
    from .folding import NotFoldableError, check_foldable, stock_class

    try:
        check_foldable(config)
    except NotFoldableError:
        return None
    return stock_class(config).__name__


def _recipe_rows(recipe: dict[str, Any] | None) -> dict[str, Any] | None:
    """The recipe section of the card (metrics.json "recipe": name, value / used / source per setting)."""
    if not recipe:
        return None
    rows = []
    for name, entry in recipe.get("settings", {}).items():
        used = entry.get("used", entry.get("value"))
        rows.append(
            {
                "field": name,
                "value": _fmt(entry.get("value")),
                "used": _fmt(used),
                "overridden": used != entry.get("value"),
                "source": entry.get("source", ""),
            }
        )
    return {"name": recipe.get("name"), "rows": rows}


def _example_source(synthetic: bool) -> str:
    if synthetic:
        from ..data.synthetic import demo_splits

        return demo_splits(train=1, valid=1, test=1, seed=0)["test"][0][0]
    return "A sentence to translate."


# --------------------------------------------------------------------------------------------- upload folder
@dataclass
class PreparedUpload:
    """The folder `push` uploads, and what is in it (relative name -> size in bytes)."""

    folder: Path
    files: dict[str, int] = field(default_factory=dict)
    folded: bool = False

    def listing(self) -> str:
        width = max((len(name) for name in self.files), default=0)
        lines = [f"{name:<{width}}  {_human(size):>9}" for name, size in self.files.items()]
        total = sum(self.files.values())
        lines.append(f"{len(self.files)} files, {_human(total)} in {self.folder}")
        return "\n".join(lines)


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def _has_tokenizer(model_dir: Path) -> bool:
    return (model_dir / "tokenizer.json").is_file() or (model_dir / "tokenizer_config.json").is_file()


def released_card_of(model_dir: str | Path) -> Path | None:
    """The README.md a converter wrote for a released model (`deep-nmt convert zero --released NAME`: its
    conversion.json names the card), which `push` uploads instead of a card rendered from training records the
    conversion does not have; None for every other folder."""
    folder = Path(model_dir)
    conversion = folder / "conversion.json"
    if not conversion.is_file() or not (folder / "README.md").is_file():
        return None
    return folder / "README.md" if _read_json(conversion).get("model_card") else None


def prepare_upload(
    model_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str] | None = None,
    *,
    fold: bool = False,
    repo_id: str | None = None,
    license: str = DEFAULT_LICENSE,
    dataset: str | None = None,
) -> PreparedUpload:
    """Write the exact folder to upload for the model in `model_dir` into `out_dir` (a new directory; default a
    fresh temporary one) and return it with its file list.

    Custom (default): the model re-saved with `save_pretrained` (safetensors, config.json with ``auto_map``, the
    code files), the translation pipeline (``custom_pipelines``, translation_pipeline.py), tokenizer, generation
    config. ``fold=True``: the folded stock model (`folding.fold_directory`,
    checked numerically) — no code files, no ``auto_map``. Both: README.md (the card), metrics.json,
    admin_omega.json / .png when training wrote them, the DLCL weight plot for DLCL models. Built in a
    temporary sibling and renamed, so `out_dir` is never half-written.
    """
    from transformers import AutoModelForSeq2SeqLM

    from ..model.residual import current_omegas
    from ..model.tokenization_paired import load_folder_tokenizer
    from ..science.plots import plot_dlcl_weights
    from .folding import CUSTOM_GENERATE_DIR, fold_directory

    model_dir, _ = _check_model_dir(model_dir)
    if repo_id is not None:
        check_repo_id(repo_id)
    if not _has_tokenizer(model_dir):
        raise FileNotFoundError(
            f"{model_dir}: no tokenizer (tokenizer.json / tokenizer_config.json); save the tokenizer with the model"
        )
    temporary_parent = None  # ours to remove when the preparation fails (nothing left behind in /tmp)
    if out_dir is None:
        temporary_parent = Path(tempfile.mkdtemp(prefix="deep-nmt-push-"))
        out_dir = temporary_parent / model_dir.absolute().name
    out_dir = Path(out_dir).expanduser().absolute()
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} exists already; choose a new directory for the upload folder")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    build = work / "upload"
    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
        trained = current_omegas(model) if model.config.residual_scaling == "admin" else None
        folded = None
        if fold:
            fold_directory(model_dir, build)
            folded = json.loads((build / FOLD_REPORT).read_text(encoding="utf-8"))
            folded = {
                key: folded[key] for key in ("stock_class", "max_abs_logit_diff", "beam_outputs_identical")
            }
            folded["custom_generate"] = (build / CUSTOM_GENERATE_DIR).is_dir()
        else:
            build.mkdir()
            model.save_pretrained(build)  # with the translation pipeline (pipeline_shipping.py)
            load_folder_tokenizer(model_dir).save_pretrained(build)  # two vocabularies: both
        for name in (METRICS_FILE, OMEGA_FILE, OMEGA_PLOT):
            if (model_dir / name).is_file():
                shutil.copy2(model_dir / name, build / name)
        if not fold and "dlcl" in (
            model.config.encoder_layer_aggregation,
            model.config.decoder_layer_aggregation,
        ):
            plot_dlcl_weights(model, build / DLCL_PLOT)
        refused = [p.name for p in build.rglob("*") if p.suffix in WEIGHT_SUFFIXES_REFUSED]
        for name in refused:
            (build / name).unlink()
        code_files = sorted(p.name for p in build.glob("*.py"))
        if fold and (code_files or "auto_map" in _read_json(build / "config.json")):
            raise RuntimeError(f"the folded model still carries custom code: {code_files}")
        released = None if fold else released_card_of(model_dir)
        if (
            released is not None
        ):  # a converted release: its own card (the paper's numbers, how it was checked)
            shutil.copy2(released, build / "README.md")
        else:
            card = render_model_card(
                model_dir,
                repo_id=repo_id,
                license=license,
                dataset=dataset,
                folded=folded,
                code_files=code_files,
                plots=[name for name in (OMEGA_PLOT, DLCL_PLOT) if (build / name).is_file()],
                trained_omegas=trained,
            )
            card.save(build / "README.md")
        apply_umask_modes(build)  # safetensors / mkdtemp modes are 0600 / 0700 whatever the umask
        os.replace(build, out_dir)
    except BaseException:
        if temporary_parent is not None:
            shutil.rmtree(temporary_parent, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    files = {str(p.relative_to(out_dir)): p.stat().st_size for p in sorted(out_dir.rglob("*")) if p.is_file()}
    return PreparedUpload(out_dir, files, folded=fold)


def upload(
    folder: str | os.PathLike[str], repo_id: str, *, private: bool = False, token: str | None = None
) -> str:
    """Create `repo_id` (if needed) and make it hold exactly `folder` (remote files not in it are deleted,
    except .gitattributes). Returns the commit URL."""
    from huggingface_hub import HfApi

    check_repo_id(repo_id)
    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    commit = api.upload_folder(
        folder_path=str(folder),
        repo_id=repo_id,
        repo_type="model",
        commit_message="Upload model prepared by deep-nmt push",
        delete_patterns="*",
    )
    return str(getattr(commit, "commit_url", commit))


def push(
    model_dir: str | os.PathLike[str],
    repo_id: str,
    *,
    fold: bool = False,
    private: bool = False,
    dry_run: bool = False,
    license: str = DEFAULT_LICENSE,
    dataset: str | None = None,
    staging_dir: str | os.PathLike[str] | None = None,
    token: str | None = None,
) -> tuple[PreparedUpload, str | None]:
    """`deep-nmt push`: prepare the upload folder and (unless `dry_run`) upload it. Returns the prepared folder
    and the commit URL (None for a dry run). Without `staging_dir` the folder is temporary and removed after
    the upload attempt (a dry run keeps it for inspection)."""
    check_repo_id(repo_id)
    prepared = prepare_upload(
        model_dir, staging_dir, fold=fold, repo_id=repo_id, license=license, dataset=dataset
    )
    if dry_run:
        return prepared, None
    try:
        url = upload(prepared.folder, repo_id, private=private, token=token)
    finally:
        if staging_dir is None:  # our temporary folder: gone after the upload, also after a failed one
            with contextlib.suppress(OSError):
                shutil.rmtree(prepared.folder.parent)
    return prepared, url
