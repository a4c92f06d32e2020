"""`deep-nmt push`: publish a trained model on the Hub (model card, safetensors, code or folded)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import _HelpFormatter


def add_parsers(commands: Any) -> dict[str, Any]:
    """The `push` parser; returns {command: handler}."""
    push = commands.add_parser(
        "push",
        help="publish a trained model on the Hugging Face Hub (model card, safetensors, code or folded)",
        description="Prepare the exact folder to upload (safetensors weights, config.json with auto_map and the "
        "code files, tokenizer, generation config, README.md model card from metrics.json, plots) and upload "
        "it with huggingface_hub. --fold uploads the folded stock model instead (no custom code needed).",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt push out/demo me/deep-nmt-demo --dry-run",
    )
    push.add_argument("model_dir", type=Path, help="saved model directory (from deep-nmt train / demo)")
    push.add_argument("repo_id", help="Hub repository id, NAMESPACE/NAME")
    push.add_argument(
        "--fold", action="store_true", help="upload the folded stock Transformers model (foldable variants)"
    )
    push.add_argument("--private", action="store_true", help="create the repository as private")
    push.add_argument(
        "--dry-run", action="store_true", help="prepare the folder and list it; do not touch the network"
    )
    push.add_argument("--license", default="apache-2.0", help="license id for the model card metadata")
    push.add_argument(
        "--dataset", help="Hub dataset id of the training data, for the card (when training read local files)"
    )
    push.add_argument(
        "--staging-dir",
        type=Path,
        help="where to write the upload folder (a new directory; default: temporary)",
    )
    return {"push": _cmd_push}


def _cmd_push(args: argparse.Namespace) -> int:
    from ..publish.hub import check_repo_id, push

    check_repo_id(args.repo_id)
    prepared, url = push(
        args.model_dir,
        args.repo_id,
        fold=args.fold,
        private=args.private,
        dry_run=args.dry_run,
        license=args.license,
        dataset=args.dataset,
        staging_dir=args.staging_dir,
    )
    print(prepared.listing())
    if url is None:
        where = f"the folder for {args.repo_id} is {prepared.folder}"
        if args.staging_dir is None:  # a temporary folder kept for inspection: say so and how to remove it
            where += (
                f" (temporary: `rm -r {prepared.folder.parent}` removes it; --staging-dir DIR chooses it)"
            )
        print(f"dry run: nothing uploaded; {where}")
    else:
        print(f"uploaded to https://huggingface.co/{args.repo_id} ({url})")
    return 0
