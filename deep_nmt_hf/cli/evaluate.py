"""`deep-nmt evaluate` and `deep-nmt translate`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .common import (
    EXIT_ERROR,
    _add_data_flags,
    _add_generation_flags,
    _data_source,
    _HelpFormatter,
    _load_model,
    _print_scores,
)
from .model_checks import check_model_type


def add_parsers(commands: Any) -> dict[str, Any]:
    """The `evaluate` and `translate` parsers; returns {command: handler}."""
    evaluate = commands.add_parser(
        "evaluate",
        help="score a saved model: BLEU, chrF, TER with sacrebleu signatures",
        description="Translate one split with a saved model and print BLEU / chrF / TER with their signatures.",
        formatter_class=_HelpFormatter,
    )
    evaluate.add_argument("model", help="saved model directory")
    _add_data_flags(evaluate)
    evaluate.add_argument("--split", default="test", help="split to score")
    evaluate.add_argument("--src-lang", help="source language (default: from the model's metrics.json)")
    evaluate.add_argument("--tgt-lang", help="target language (default: from the model's metrics.json)")
    _add_generation_flags(evaluate)
    evaluate.add_argument(
        "--max-new-tokens", type=int, help="generated tokens per sentence (default: automatic)"
    )
    evaluate.add_argument(
        "--max-samples", type=int, metavar="N", help="score only the first N sentences of the split"
    )
    evaluate.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_int8_flag(evaluate)

    translate = commands.add_parser(
        "translate",
        help="translate stdin to stdout, one sentence per line",
        description="Read sentences from stdin and write one translation per line to stdout, in order; empty "
        "lines stay empty. Lines are translated in batches as they arrive (at most --batch-size, or whatever "
        "stdin has delivered so far) and each batch is flushed, so it works in a pipe and interactively.",
        formatter_class=_HelpFormatter,
    )
    translate.add_argument("model", help="saved model directory")
    _add_generation_flags(translate)
    translate.add_argument(
        "--max-new-tokens", type=int, help="generated tokens per sentence (default: automatic)"
    )
    translate.add_argument(
        "--encoding", default="utf-8", help="encoding of stdin (each line decoded on its own)"
    )
    translate.add_argument(
        "--compile",
        action="store_true",
        help="decode with a static cache through torch.compile (training/compilation.py compiled_decoding; any "
        "variant, folded or not). Pays on a GPU for many batches (beam search is host-bound there); compiling "
        "takes seconds to a minute first, and each new batch shape compiles again",
    )
    translate.add_argument(
        "--errors",
        choices=("strict", "replace"),
        default="strict",
        help="a line that does not decode: strict = report it on stderr with its line number, leave its output "
        "line empty, translate the rest and exit with code 2; replace = translate it with U+FFFD for the bad "
        "bytes",
    )
    _add_int8_flag(translate)

    return {"evaluate": _cmd_evaluate, "translate": _cmd_translate}


def _add_int8_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--int8",
        action="store_true",
        help="quantize every linear layer to int8 at load time (CPU; torchao, the `int8` extra: "
        "publish/quantization.py)",
    )


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from ..training import METRICS_FILE, evaluate_model

    if args.max_samples is not None and args.max_samples < 1:
        raise ValueError(f"--max-samples {args.max_samples}: must be at least 1")

    model_dir = Path(args.model).expanduser()
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{args.model}: not a saved model directory (no config.json)")
    check_model_type(model_dir)  # one line naming an unknown type, before Transformers could prompt on stdin
    src_lang, tgt_lang = args.src_lang, args.tgt_lang
    if src_lang is None or tgt_lang is None:
        metrics_path = model_dir / METRICS_FILE
        saved = json.loads(metrics_path.read_text(encoding="utf-8")) if metrics_path.is_file() else {}
        src_lang = src_lang or saved.get("src_lang")
        tgt_lang = tgt_lang or saved.get("tgt_lang")
        if src_lang is None or tgt_lang is None:
            raise ValueError(
                f"give --src-lang and --tgt-lang ({model_dir} has no {METRICS_FILE} naming them)"
            )
    result = evaluate_model(
        model_dir,
        _data_source(args),
        args.split,
        src_lang,
        tgt_lang,
        num_beams=args.num_beams,
        batch_size=args.batch_size,
        max_length=args.max_new_tokens,
        max_samples=args.max_samples,
        int8=args.int8,
    )
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print_scores(
            result,
            f"{args.model} on {args.split} ({result['num_sentences']} sentences, {src_lang}->{tgt_lang}, "
            f"beam {args.num_beams}):",
        )
    return 0


def _cmd_translate(args: argparse.Namespace) -> int:
    import codecs

    from ..training import translate
    from .streaming import UndecodableLine, arriving_batches, decode_lines

    try:
        codecs.lookup(args.encoding)
    except LookupError:
        raise ValueError(f"--encoding {args.encoding}: unknown encoding") from None
    if args.int8:
        from ..publish.quantization import check_int8

        check_int8()  # before loading: one line where torchao is missing
    model, tokenizer = _load_model(args.model)
    if args.int8:
        from ..publish.quantization import quantize_int8

        quantize_int8(model)
    if args.compile:
        from ..training.compilation import compiled_decoding

        compiled_decoding(model)
    bad_lines = 0
    for batch in arriving_batches(
        decode_lines(sys.stdin.buffer, args.encoding, args.errors), args.batch_size
    ):
        for line in batch:
            if isinstance(line, UndecodableLine):
                print(f"error: {line.message}", file=sys.stderr, flush=True)
                bad_lines += 1
        outputs = translate(
            model,
            tokenizer,
            ["" if isinstance(line, UndecodableLine) else line for line in batch],
            num_beams=args.num_beams,
            batch_size=args.batch_size,
            max_new_tokens=args.max_new_tokens,
        )
        for text in outputs:
            sys.stdout.write(" ".join(text.splitlines()) + "\n")
        sys.stdout.flush()
    if bad_lines:
        print(f"error: {bad_lines} undecodable line(s) left empty in the output", file=sys.stderr)
        return EXIT_ERROR
    return 0
