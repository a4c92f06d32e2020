"""`deep-nmt convert fairseq` / `convert zero`: bring a fairseq Transformer checkpoint (or a deep fork's), or a
model of the DS-Init authors' TensorFlow toolkit (bzhangGo/zero), in as one of our models."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import _HelpFormatter


def add_parsers(commands: Any) -> dict[str, Any]:
    """The `convert` parser with its `fairseq` subcommand; returns {command: handler}."""
    convert = commands.add_parser(
        "convert",
        help="convert a model trained elsewhere (fairseq, zero) into a deep_nmt_hf model directory",
        description="Convert a model trained with other code into a directory that from_pretrained, "
        "pipeline('translation'), deep-nmt translate / evaluate / fold load. See docs/converting.md.",
        formatter_class=_HelpFormatter,
    )
    sources = convert.add_subparsers(dest="source", metavar="SOURCE", required=True)
    fairseq = sources.add_parser(
        "fairseq",
        help="a fairseq Transformer checkpoint (post-/pre-LN; ADMIN, DeepNorm, DLCL forks)",
        description="A fairseq Transformer checkpoint (0.9-0.12 layouts: args or cfg, fused or separate q/k/v, "
        "post-LN or normalize_before, shared / tied / untied embeddings, no_scale_embedding, "
        "layernorm_embedding, sinusoidal or learned positions; ADMIN as Transformer-Clinic stores it, DeepNorm, "
        "DLCL as wangqiangneu/dlcl stores it) becomes a model that scores exactly as fairseq does. The "
        "dictionaries dict.SRC.txt / dict.TGT.txt are read beside the checkpoint unless named.",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt convert fairseq wmt-ende/checkpoint_best.pt converted/ende "
        "--bpe-codes wmt-ende/bpecodes\n  deep-nmt convert fairseq spm-model/checkpoint_best.pt converted/spm "
        "--sentencepiece-model spm-model/sentencepiece.bpe.model",
    )
    fairseq.add_argument("checkpoint", type=Path, help="fairseq checkpoint file (checkpoint_*.pt)")
    fairseq.add_argument("output_dir", type=Path, help="new directory for the converted model")
    fairseq.add_argument(
        "--source-dict", type=Path, help="the source dictionary (default: dict.SRC.txt beside it)"
    )
    fairseq.add_argument(
        "--target-dict", type=Path, help="the target dictionary (default: dict.TGT.txt beside it)"
    )
    fairseq.add_argument(
        "--bpe-codes",
        type=Path,
        help="subword-nmt codes (0.2, with its '#version: 0.2' header; without it, 0.1 codes, applied with "
        "subword-nmt 0.1's rules as fairseq applies them) or fastBPE codes: the tokenizer then splits raw text as "
        "fairseq did",
    )
    fairseq.add_argument(
        "--sentencepiece-model",
        type=Path,
        metavar="SPM_MODEL",
        help="the sentencepiece .model fairseq's --bpe sentencepiece used: the tokenizer then normalises and splits "
        "raw text as fairseq did (required when the checkpoint's options name sentencepiece)",
    )
    fairseq.add_argument(
        "--gpt2-bpe",
        type=Path,
        nargs=2,
        metavar=("ENCODER_JSON", "VOCAB_BPE"),
        help="the encoder.json and vocab.bpe fairseq's --bpe gpt2 used (it downloads them): the tokenizer then splits "
        "raw text into GPT-2's byte-level pieces, under the dictionary's ids, as fairseq did",
    )
    fairseq.add_argument(
        "--moses",
        action="store_true",
        help="Moses tokenisation before the BPE and detokenisation after (sacremoses, fairseq's --tokenizer moses "
        "with its defaults, the checkpoint's languages), for text Moses-tokenised before fairseq-preprocess; "
        "automatic where the checkpoint's options say tokenizer='moses'",
    )
    fairseq.add_argument(
        "--fork",
        choices=("auto", "none", "admin", "deepnorm", "dlcl"),
        default="auto",
        help="the checkpoint's layout; auto reads it from the weights (DeepNorm has no weights of its own: give "
        "--fork deepnorm unless its args say deepnorm=True)",
    )
    fairseq.add_argument(
        "--trust-pickle",
        action="store_true",
        help="load a checkpoint holding pickled objects beyond tensors and argparse.Namespace (only files you trust)",
    )
    zero = sources.add_parser(
        "zero",
        help="a model of bzhangGo/zero (TensorFlow): the DS-Init + merged-attention models and their baselines",
        description="A checkpoint directory of the DS-Init authors' TensorFlow toolkit bzhangGo/zero (param.json, "
        "tf.train.Saver's model-STEP.index / .data-*, the vocabularies param.json names, looked up beside it) with "
        "model_name transformer_fuse (DS-Init + merged attention) or transformer (the baselines) becomes a model "
        "that scores exactly as zero does. TensorFlow is not needed (pip install deep_nmt_hf[convert-tf] only for "
        "checkpoints this reader refuses).",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt convert zero base+fuse_init20 converted/fuse20 --bpe-codes base+fuse_init20/bpe32k",
    )
    zero.add_argument("checkpoint_dir", type=Path, help="zero's model directory (param.json, checkpoint)")
    zero.add_argument("output_dir", type=Path, help="new directory for the converted model")
    zero.add_argument(
        "--source-vocab",
        type=Path,
        help="the source vocabulary (default: param.json's src_vocab_file, beside it)",
    )
    zero.add_argument(
        "--target-vocab",
        type=Path,
        help="the target vocabulary (default: param.json's tgt_vocab_file, beside it)",
    )
    zero.add_argument(
        "--bpe-codes",
        type=Path,
        help="subword-nmt BPE codes: the tokenizer then splits raw (tokenised) text as the training data was",
    )
    zero.add_argument(
        "--released",
        choices=("base", "big", "base_fuse_init20", "base_fuse_init30", "big_fuse_init20"),
        help="the authors' released model this is (its shape is checked): writes its model card as README.md",
    )
    zero.add_argument(
        "--moses",
        nargs=2,
        metavar=("SRC_LANG", "TGT_LANG"),
        help="Moses tokenisation (sacremoses, aggressive dash splits) of the source before the BPE and Moses "
        "detokenisation of the target after, for models trained on Moses-tokenised text (the WMT14 ones)",
    )
    zero.add_argument(
        "--moses-no-escape",
        action="store_true",
        help="with --moses: no HTML escaping of & < > ' \" [ ] | (tokenizer.perl -no-escape)",
    )
    return {"convert": _cmd_convert}


def _cmd_convert(args: argparse.Namespace) -> int:
    if args.source == "zero":
        return _cmd_convert_zero(args)
    from ..publish.convert_fairseq import convert_fairseq

    out = convert_fairseq(
        args.checkpoint,
        args.output_dir,
        source_dict=args.source_dict,
        target_dict=args.target_dict,
        bpe_codes=args.bpe_codes,
        fork=args.fork,
        trust_pickle=args.trust_pickle,
        sentencepiece_model=args.sentencepiece_model,
        moses=args.moses,
        gpt2_bpe=tuple(args.gpt2_bpe) if args.gpt2_bpe else None,
    )
    return _report(
        out, lambda record: f"converted {args.checkpoint} ({record['layout']['fork']} layout) into {out}"
    )


def _report(out: Path, first_line: Callable[[dict], str]) -> int:
    """Print what a conversion wrote (its conversion.json): the first line, then the tokenizer and what is not
    reproduced."""
    import json

    record = json.loads((out / "conversion.json").read_text(encoding="utf-8"))
    print(first_line(record))
    print(f"tokenizer: {record['tokenizer']}; not reproduced: {record['not_reproduced']}")
    return 0


def _cmd_convert_zero(args: argparse.Namespace) -> int:
    from ..publish.convert_zero import convert_zero

    out = convert_zero(
        args.checkpoint_dir,
        args.output_dir,
        source_vocab=args.source_vocab,
        target_vocab=args.target_vocab,
        bpe_codes=args.bpe_codes,
        released=args.released,
        moses=tuple(args.moses) if args.moses else None,
        moses_escape=not args.moses_no_escape,
    )
    return _report(out, lambda record: f"converted {record['converted_from']} into {out}")
