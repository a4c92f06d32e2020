"""`deep-nmt train`'s flags for how the authors ran their recipes: gradient accumulation, epoch checkpoints and
their averaging, ADMIN's profiling batch, and the papers' headline presets (`--preset NAME`).

Imports only the standard library and `names` at module level (the light launcher parses these without torch).
"""

from __future__ import annotations

import argparse
from typing import Any

from .names import PAPER_PRESET_NAMES


def add_schedule_flags(run: Any, options: Any) -> None:
    """The flags on the parser's "training" group. `options` (a `flags.FieldFlags` of `TrainingOptions`) adds
    those made from fields (--update-freq, --save-strategy, --admin-profile-positions; their help is in
    training/options.py). By hand: --average-last-epochs sets two fields, and --admin-profile-tokens' 0 means
    the field's None."""
    options.add(run, "gradient_accumulation_steps", "save_strategy")
    run.add_argument(
        "--average-last-epochs",
        type=int,
        metavar="N",
        help="final model = average of the last N epoch checkpoints (sets --save-strategy epoch; fairseq's "
        "--num-epoch-checkpoints N, as the papers' evaluation scripts)",
    )
    run.add_argument(
        "--admin-profile-tokens",
        type=int,
        metavar="N",
        help="ADMIN profiles ω on one batch of N tokens (footnote 5: 8k; default 8192); 0 = the first global "
        "sentence batch",
    )
    options.add(run, "admin_profile_positions")


def preset_help() -> str:
    """The --preset help: shape presets and the papers' headline presets."""
    return (
        "a named shape preset of the variant (e.g. tiny, 6L-6L; see the config), or a paper's headline setting "
        "(shape + recipe + batch, update_freq, epochs, averaging; explicit flags win): "
        + ", ".join(PAPER_PRESET_NAMES)
    )


def schedule_flag_values(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainingOptions fields the flags above set, those given only. Raises ValueError on contradicting
    flags."""
    explicit = {
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "save_strategy": args.save_strategy,
        "admin_profile_positions": args.admin_profile_positions,
        "num_train_epochs": args.epochs,
    }
    if args.admin_profile_tokens is not None:
        explicit["admin_profile_tokens"] = args.admin_profile_tokens or None
    if args.average_last_epochs is not None:
        if args.average_last_checkpoints is not None:
            raise ValueError(
                "--average-last-epochs and --average-last-checkpoints both given: choose one (epochs averages "
                "checkpoint-*-epoch* written with --save-strategy epoch)"
            )
        if args.save_strategy == "steps":
            raise ValueError("--average-last-epochs needs --save-strategy epoch (or no --save-strategy)")
        explicit.update(save_strategy="epoch", average_last_checkpoints=args.average_last_epochs)
    return {key: value for key, value in explicit.items() if value is not None}


def schedule_values(args: argparse.Namespace) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """(recipe, TrainingOptions fields, config fields) from --preset (`resolution.preset_layer`) with the flags
    above on top: layers 4 and 6 of `resolution.resolve_run` for these fields alone."""
    from ..training.resolution import preset_layer

    recipe, options, config = preset_layer(args.preset, args.recipe)
    return recipe, {**options, **schedule_flag_values(args)}, config
