"""`deep-nmt preprocess`: read, train the tokenizer and tokenize once, ahead of training (like
fairseq-preprocess), into the fingerprinted cache that `deep-nmt train` with the same flags picks up."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .common import _add_data_flags, _data_source, _HelpFormatter


def _add_data_path_flags(parser: argparse.ArgumentParser) -> None:
    """Flags of the data path shared by `train` and `preprocess` (see `deep_nmt_hf.data.preprocessing`)."""
    group = parser.add_argument_group("data path (cache, workers, streaming)")
    group.add_argument(
        "--cache-dir",
        help="where the Arrow corpus, tokenizer and tokenized splits are cached "
        "(default: $DEEP_NMT_HF_CACHE, else <datasets cache>/deep_nmt_hf)",
    )
    group.add_argument("--num-proc", type=int, help="processes that tokenize (default: one)")
    group.add_argument(
        "--tokenizer-sample",
        type=int,
        metavar="N",
        help="train the BPE tokenizer on N pairs drawn with --seed (default: every pair)",
    )


def add_parsers(commands: Any) -> dict[str, Any]:
    """The `preprocess` parser; returns {command: handler}."""
    parser = commands.add_parser(
        "preprocess",
        help="read, train the tokenizer and tokenize into the cache, ahead of training",
        description="Stream the training split into Arrow, train (or load) the tokenizer and tokenize into a "
        "fingerprinted on-disk cache; prints where each piece is. `deep-nmt train` with the same data and "
        "tokenizer / length flags finds the entries by fingerprint and skips the work (every rank loads them).",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt preprocess --data-dir wmt14 --src-lang en --tgt-lang de --num-proc 8 "
        "--tokenizer-sample 1000000\n  deep-nmt train --data-dir wmt14 --src-lang en --tgt-lang de "
        "--tokenizer-sample 1000000 --output-dir out/en-de ...",
    )
    # the defaults train's flags have (TrainingOptions' fields), so that train finds what this caches
    # light: training/__init__.py's names are lazy and options.py needs only the standard library
    from ..training.options import option_default as default

    _add_data_flags(parser)
    parser.add_argument("--src-lang", required=True, help="source language code (file suffix / JSON key)")
    parser.add_argument("--tgt-lang", required=True, help="target language code (file suffix / JSON key)")
    parser.add_argument("--train-split", default=default("train_split"), help="training split name")
    parser.add_argument("--max-train-samples", type=int, help="use only the first N training pairs")
    parser.add_argument(
        "--vocab-size", type=int, default=default("vocab_size"), help="joint BPE vocabulary size"
    )
    parser.add_argument("--tokenizer", help="load this saved tokenizer instead of training one")
    parser.add_argument(
        "--max-source-length", type=int, default=default("max_source_length"), help="source tokens kept"
    )
    parser.add_argument(
        "--max-target-length", type=int, default=default("max_target_length"), help="target tokens kept"
    )
    parser.add_argument(
        "--max-position-embeddings",
        type=int,
        help="as given to train (sets the tokenizer's model_max_length; default: max(256, max lengths))",
    )
    parser.add_argument(
        "--seed", type=int, default=default("seed"), help="seed of the --tokenizer-sample draw"
    )
    _add_data_path_flags(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    return {"preprocess": _cmd_preprocess}


def _cmd_preprocess(args: argparse.Namespace) -> int:
    from pathlib import Path

    from transformers import AutoTokenizer

    from ..data import ReadReport
    from ..data.corpus import TrainingCorpus
    from ..data.preprocessing import cached_tokenizer, main_process_first, tokenize_cached

    for name in ("num_proc", "tokenizer_sample", "max_train_samples"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')}={value} must be a positive integer")
    report = ReadReport()
    # the split and subset `train` reads (its map-style lane), so that train finds what this caches
    corpus = TrainingCorpus(
        _data_source(args), args.train_split, args.src_lang, args.tgt_lang, cache_dir=args.cache_dir
    )
    with main_process_first():
        train_set = corpus.pairs(report, limit=args.max_train_samples)
    if args.tokenizer is not None:
        tokenizer, tokenizer_dir = AutoTokenizer.from_pretrained(args.tokenizer), Path(args.tokenizer)
    else:
        from ..training.options import default_max_positions

        positions = default_max_positions(args.max_source_length, args.max_target_length)
        tokenizer, tokenizer_dir = cached_tokenizer(
            train_set,
            args.src_lang,
            args.tgt_lang,
            vocab_size=args.vocab_size,
            model_max_length=args.max_position_embeddings or positions,
            sample=args.tokenizer_sample,
            seed=args.seed,
            cache_dir=args.cache_dir,
        )
    split = tokenize_cached(
        train_set,
        tokenizer,
        args.src_lang,
        args.tgt_lang,
        args.max_source_length,
        args.max_target_length,
        num_proc=args.num_proc,
        cache_dir=args.cache_dir,
    )
    corpus = Path(train_set.cache_files[0]["filename"]).parent if train_set.cache_files else None
    summary = {
        "corpus": str(corpus) if corpus else None,
        "pairs_read": report.total,
        "pairs_dropped_empty": report.dropped,
        "tokenizer": str(Path(tokenizer_dir).absolute()),
        "tokenized": str(split.path.absolute()),
        "pairs": len(split.dataset),
        "pairs_truncated": split.truncated_pairs,
        "tokenized_from_cache": split.from_cache,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"corpus:    {summary['corpus']} ({report.total} pairs read, {report.dropped} empty dropped)")
        print(f"tokenizer: {summary['tokenizer']}")
        state = "already cached" if split.from_cache else "written"
        print(
            f"tokenized: {summary['tokenized']} ({len(split.dataset)} pairs, {split.truncated_pairs} truncated; {state})"
        )
    return 0
