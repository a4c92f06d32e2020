"""`deep-nmt fold`, `export`, `plot` and `data`: tools around a trained model or a corpus."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import _HelpFormatter, _load_model


def add_parsers(commands: Any) -> dict[str, Any]:
    """Parsers of `fold`, `export`, `plot dlcl|omega` and `data to-json`; returns {command: handler}."""
    fold = commands.add_parser(
        "fold",
        help="fold a trained model into a stock Transformers class (MarianMTModel / Pegasus)",
        description="Fold IN into the stock class with the same function (post-LN, ADMIN, DeepNorm, DS-Init -> "
        "MarianMTModel; pre-LN -> PegasusForConditionalGeneration; post-LN converted from fairseq -> "
        "FSMTForConditionalGeneration), check that logits agree to --atol and beam-4 "
        "outputs are identical on a probe batch, and write the stock model, tokenizer and generation config to "
        "OUT (a new directory, written atomically). OUT loads with plain AutoModelForSeq2SeqLM, no custom code. "
        "DLCL, merged attention and input re-injection between loops have no stock equivalent: refused.",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt fold out/admin out/admin-marian",
    )
    fold.add_argument("input", type=Path, metavar="IN", help="saved deep_nmt_hf model directory")
    fold.add_argument("output", type=Path, metavar="OUT", help="new directory for the folded stock model")
    fold.add_argument(
        "--atol", type=float, default=1e-4, help="largest |Δlogits| allowed by the check (fp32)"
    )

    export = commands.add_parser(
        "export",
        help="export a model for another runtime (CTranslate2)",
        description="Fold IN when needed, then convert it for CTranslate2 (OUT: a new directory, written "
        "atomically). Post-LN models (MarianMTModel) and pre-LN models (Pegasus) are both supported; float32 "
        "output equals Transformers' beam search token for token (tests/publish/test_ctranslate2.py).",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt export out/base out/base-ct2 --to ctranslate2 --quantization int8\n"
        "then: ctranslate2.Translator('out/base-ct2', intra_threads=2).translate_batch(tokens, beam_size=4,\n"
        "      patience=1, min_decoding_length=0)  # the same search as Transformers' generate(num_beams=4,\n"
        "      early_stopping=True); intra_threads: its CPU threads (as --threads; 0 = all cores, which collapses "
        "on shared cores)",
    )
    export.add_argument(
        "input", type=Path, metavar="IN", help="saved model directory (deep_nmt_hf or folded)"
    )
    export.add_argument("output", type=Path, metavar="OUT", help="new directory for the exported model")
    export.add_argument("--to", choices=("ctranslate2",), default="ctranslate2", help="target runtime")
    export.add_argument(
        "--quantization",
        help="CTranslate2 weight type: one of float32, int8, int8_float32, int16, float16, bfloat16, "
        "int8_float16 (default: keep float32)",
    )

    plot = commands.add_parser(
        "plot",
        help="plot what a model learned: DLCL weights or ADMIN ω",
        description="Save a PNG of a trained model's DLCL layer-combination weights (prenorm-dlcl Fig. 5) or of "
        "ADMIN's residual scale ω per sublayer.",
        formatter_class=_HelpFormatter,
    )
    plots = plot.add_subparsers(dest="plot_kind", metavar="KIND", required=True)
    for kind, what, default in (
        (
            "dlcl",
            "heatmap of the learned DLCL weights W per side (models with layer aggregation 'dlcl')",
            "dlcl",
        ),
        (
            "omega",
            "ADMIN ω per sublayer, encoder and decoder (models with residual_scaling 'admin')",
            "omega",
        ),
    ):
        sub = plots.add_parser(
            kind, help=what, description=f"Save a PNG: {what}.", formatter_class=_HelpFormatter
        )
        sub.add_argument("model", metavar="MODEL", help="saved deep_nmt_hf model directory")
        sub.add_argument("--out", type=Path, help=f"PNG file to write (default: MODEL/{default}.png)")

    data = commands.add_parser(
        "data",
        help="convert parallel data (to run_translation.py JSON lines)",
        description="Data tools.",
        formatter_class=_HelpFormatter,
    )
    data_tools = data.add_subparsers(dest="data_tool", metavar="TOOL", required=True)
    to_json = data_tools.add_parser(
        "to-json",
        help='write {"translation": {SRC: .., TGT: ..}} JSON lines (transformers run_translation.py format)',
        description="Read one split (--split) or every split (--all-splits) of a directory of line-aligned "
        "{split}.{lang}[.gz] files and write run_translation.py JSON lines: with --split, OUT is the .jsonl file; "
        "with --all-splits, OUT is a new directory receiving {split}.jsonl per split. Output is written "
        "atomically (temporary sibling, then rename).",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt data to-json --data-dir data/multi30k --src-lang en --tgt-lang de "
        "--split train train.jsonl",
    )
    to_json.add_argument(
        "--data-dir", type=Path, required=True, help="directory of {split}.{lang}[.gz] files"
    )
    to_json.add_argument("--src-lang", required=True, help="source language code (file suffix / JSON key)")
    to_json.add_argument("--tgt-lang", required=True, help="target language code (file suffix / JSON key)")
    which = to_json.add_mutually_exclusive_group(required=True)
    which.add_argument("--split", help="the split to convert; OUT is a .jsonl file")
    which.add_argument(
        "--all-splits", action="store_true", help="convert every split found; OUT is a new directory"
    )
    to_json.add_argument("output", type=Path, metavar="OUT", help="output .jsonl file (or directory)")
    to_json.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    return {"fold": _cmd_fold, "export": _cmd_export, "plot": _cmd_plot, "data": _cmd_data}


def _cmd_fold(args: argparse.Namespace) -> int:
    from ..publish.folding import FoldCheckError, fold_directory

    if not args.atol > 0:
        raise ValueError(f"--atol {args.atol}: must be > 0")
    try:
        report = fold_directory(args.input, args.output, atol=args.atol)
    except FoldCheckError as error:
        raise ValueError(f"{args.input}: {error}") from error
    print(f"folded {args.input} into {report.stock_class} -> {args.output}")
    print(f"max |Δlogits| = {report.max_abs_logit_diff:.2e} (allowed {args.atol:.0e})")
    print(f"beam-4 outputs identical: {'yes' if report.beam_outputs_identical else 'no'}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from ..publish.export import QUANTIZATIONS, export_ctranslate2
    from ..publish.folding import FoldCheckError

    if args.quantization is not None and args.quantization not in QUANTIZATIONS:
        raise ValueError(f"--quantization {args.quantization}: not one of {', '.join(QUANTIZATIONS)}")
    try:
        out = export_ctranslate2(args.input, args.output, quantization=args.quantization)
    except (FoldCheckError, RuntimeError) as error:
        raise ValueError(f"{args.input}: {error}") from error
    print(f"exported {args.input} to CTranslate2 ({args.quantization or 'float32'}) -> {out}")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from ..data.atomic import atomic_path
    from ..model.residual import current_omegas
    from ..science.plots import dlcl_weights, plot_dlcl_weights, plot_omegas

    model, _ = _load_model(args.model)
    config = model.config
    if not str(getattr(config, "model_type", "")).startswith("deep_nmt"):
        raise ValueError(f"{args.model}: model_type={config.model_type!r} is not a deep_nmt_hf model")
    out = args.out or Path(args.model) / f"{args.plot_kind}.png"
    if out.suffix.lower() != ".png":
        raise ValueError(f"--out {out}: expected a .png file name")
    if args.plot_kind == "dlcl":
        try:
            dlcl_weights(model)
        except ValueError as error:
            raise ValueError(f"{args.model}: {error}") from error
    elif getattr(config, "residual_scaling", None) != "admin":
        raise ValueError(
            f"{args.model}: not an ADMIN model (residual_scaling={config.residual_scaling!r}); ω exists only "
            "with residual_scaling='admin'"
        )
    with atomic_path(out) as temp:  # the umask's mode, renamed into place when complete
        if args.plot_kind == "dlcl":
            plot_dlcl_weights(model, temp)
        else:
            omegas = current_omegas(model)
            plot_omegas(omegas, temp)
            for side, values in omegas.items():
                print(f"{side} ω: " + " ".join(f"{value:.3g}" for value in values))
    print(f"wrote {out}")
    return 0


def _cmd_data(args: argparse.Namespace) -> int:
    from ..data import available_splits, load_parallel, write_jsonl
    from ..data.atomic import atomic_directory

    if not args.data_dir.is_dir():
        raise NotADirectoryError(f"--data-dir {args.data_dir}: no such directory")
    out = args.output
    if args.split is not None:
        if out.is_dir():
            raise IsADirectoryError(f"{out}: is a directory; with --split OUT is the .jsonl file to write")
        if out.exists() and not args.overwrite:
            raise FileExistsError(f"{out} exists already; pass --overwrite to replace it")
        rows = write_jsonl(
            load_parallel(args.data_dir, args.split, args.src_lang, args.tgt_lang),
            out,
            args.src_lang,
            args.tgt_lang,
        )
        print(f"{args.split}: {rows} pairs -> {out}")
        return 0
    splits = available_splits(args.data_dir, args.src_lang, args.tgt_lang)
    if not splits:
        raise ValueError(
            f"--data-dir {args.data_dir}: no split has files for both {args.src_lang} and {args.tgt_lang}"
        )
    if out.exists():
        raise FileExistsError(f"{out} exists already; --all-splits writes a new directory")
    counts = {}
    with atomic_directory(out) as staging:  # the umask's modes, renamed into place when complete
        for split in splits:
            data = load_parallel(args.data_dir, split, args.src_lang, args.tgt_lang)
            counts[split] = write_jsonl(data, staging / f"{split}.jsonl", args.src_lang, args.tgt_lang)
    for split, rows in counts.items():
        print(f"{split}: {rows} pairs -> {out / (split + '.jsonl')}")
    return 0
