"""One path for every value of a run (issue #57): `resolve_run` turns what a user asked for — variant, shape
preset, recipe, paper preset, flags and ``--set`` — into the run's `TrainingOptions` and its model config fields.

`deep-nmt train` (cli/train.py), `TrainingOptions.from_recipe` and `train` itself all go through it, so a value's
origin is decided here and nowhere else; the precedence is `resolve_run`'s docstring. Each field has one default:
a run option's is its `TrainingOptions` field (`option_default`), a model field's is its config class's (the
variant's `DEFAULTS` over `DeepNMTConfig`'s); the only derived default, `max_position_embeddings`, is
`default_max_positions`. `build_config` reads the same two functions.

Everything is checked before any data is read (issue #59): an unknown preset, a recipe, a variant or an invalid
config value (``--set encoder_layers=-2``) raises `ValueError` here, before the corpus, the tokenizer or the output
directory are touched. What only the tokenizer can tell (its special ids and vocabulary size, `build_config`) and
what only the machine can tell (the precision, `precision.resolve_precision` when `train` starts) come later.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..model.registry import VARIANT_SPECS
from ..science.preset_names import PAPER_PRESET_NAMES
from .options import TrainingOptions, default_max_positions, option_default

__all__ = [
    "ResolvedRun",
    "resolve_run",
    "resolve_options",
    "preset_layer",
    "option_default",
    "default_max_positions",
]

# config fields the tokenizer decides (`build_config`): not checked before it exists
TOKENIZER_FIELDS = frozenset(
    {"vocab_size", "pad_token_id", "eos_token_id", "unk_token_id", "decoder_start_token_id"}
)


@dataclasses.dataclass(frozen=True)
class ResolvedRun:
    """A run's values: its options, its config fields (without the tokenizer's ids) and its variant's classes."""

    options: TrainingOptions
    config: dict[str, Any]
    config_class: type
    model_class: type
    # the config fields of layers 4-6 (paper preset, --set, explicit): with `options` (which names the variant, the
    # shape preset and the recipe) all that `train(options, overrides)` needs to resolve the same run again
    overrides: dict[str, Any]


def preset_layer(
    preset: str | None, recipe: str | None = None
) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """(recipe, option fields, config fields) that `preset` brings: a paper preset (`science.paper_presets`)
    brings its recipe (unless `recipe` is given), its options, the recipe's variant, its shape as ``preset`` and
    its config fields; any other name is a shape preset, kept as ``preset`` (checked against the variant later)."""
    if preset in PAPER_PRESET_NAMES:
        from ..science.paper_presets import preset_values

        preset_recipe, options, config = preset_values(preset)
        return recipe or preset_recipe, options, config
    return recipe, {"preset": preset}, {}


def resolve_run(
    options: TrainingOptions | Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    *,
    config_set: Mapping[str, Any] | None = None,
) -> ResolvedRun:
    """The run's options and config fields, each value from the highest of these layers that sets it:

    1. **defaults** (lowest): `TrainingOptions`' field defaults; the variant's config class (`DeepNMTConfig`'s
       field defaults under the variant's `DEFAULTS`); `max_position_embeddings` = max(256, max_source_length,
       max_target_length) (`default_max_positions`);
    2. the variant's **shape preset** (``preset``, e.g. ``tiny``, ``60L-12L``: config fields);
    3. the **recipe** (``recipe``, `science.recipes`: option fields, the variant and config fields);
    4. the **paper preset** (a ``preset`` named in `science.paper_presets`: its recipe unless ``recipe`` is given,
       its options, the recipe's variant, its shape for layer 2, its config fields);
    5. ``config_set`` (``--set FIELD=VALUE``: config fields);
    6. **explicit** values (highest): `options` and `config`.

    `options` is either a mapping of the option fields a user gave (``variant``, ``preset`` and ``recipe``
    included; a key present is given, even with the value None; `deep-nmt train` passes the flags given) or a
    `TrainingOptions`, every field of which then counts as given (the Python API: `train(options, config)`).

    `label_smoothing` is one value, a `TrainingOptions` field, which the config takes (the model applies it in
    its loss); a ``label_smoothing`` in `config_set` or `config` sets the option at that layer.

    Raises ValueError, naming the field, for an unknown variant, recipe or preset and for any invalid option or
    config value — before any data is read. The tokenizer's ids (`build_config`) and the precision
    (`precision.resolve_precision`, against the machine) are settled when `train` runs.
    """
    from .inputs import resolve_variant  # torch and transformers: after the light checks

    run_options, fields, overrides = resolve_options(options, config, config_set=config_set)
    config_class, model_class = resolve_variant(run_options.variant)
    check_config(config_class, fields, run_options)
    return ResolvedRun(run_options, fields, config_class, model_class, overrides)


def resolve_options(
    options: TrainingOptions | Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    *,
    config_set: Mapping[str, Any] | None = None,
) -> tuple[TrainingOptions, dict[str, Any], dict[str, Any]]:
    """`resolve_run`'s layers without the config class: (the run's options, its config fields above the class
    defaults, the overrides of layers 4-6). Standard library only (the shape presets are read from the registry),
    so `deep-nmt train` runs it before torch is imported: an unknown recipe or preset, an invalid option
    (``--max-steps 0``) fails here at once. An unknown variant is left to `resolve_run`."""
    config_set = dict(config_set or {})
    explicit_config = dict(config or {})
    if isinstance(options, TrainingOptions):
        given = dataclasses.asdict(options)
        if given["preset"] in PAPER_PRESET_NAMES:
            raise ValueError(
                f"preset={given['preset']!r} is a paper preset: expand it with resolve_run({{'preset': ...}}, ...), "
                "which fills the options and config fields it sets"
            )
    else:
        given = dict(options)
    recipe, preset_options, preset_config = preset_layer(given.get("preset"), given.get("recipe"))
    if given.get("preset") in PAPER_PRESET_NAMES:
        del given["preset"]  # the paper preset's shape (in preset_options) is the run's shape preset
    smoothing = {
        key: layer.pop("label_smoothing") for key, layer in (("set", config_set), ("config", explicit_config))
        if "label_smoothing" in layer
    }  # fmt: skip
    values = dict(preset_options)
    if "set" in smoothing:
        values["label_smoothing"] = smoothing["set"]
    values.update(given)
    if "config" in smoothing:
        values["label_smoothing"] = smoothing["config"]
    values.pop("recipe", None)
    # the recipe under everything above it; checks every option (ValueError naming the field)
    run_options = TrainingOptions.from_recipe(recipe, **values)

    spec = next((s for name, s in VARIANT_SPECS.items() if run_options.variant in (name, s.model_type)), None)
    shape: dict[str, Any] = {}
    if run_options.preset is not None and spec is not None:
        shapes = spec.shapes
        if run_options.preset not in shapes:
            raise ValueError(
                f"preset={run_options.preset!r} is unknown for variant {run_options.variant!r}; presets: "
                f"{', '.join(shapes) or 'none'}; paper presets: {', '.join(PAPER_PRESET_NAMES)}"
            )
        shape = shapes[run_options.preset]
    recipe_config: dict[str, Any] = {}
    if recipe is not None:
        from ..science.recipes import recipe_config as config_of

        recipe_config = config_of(recipe)
    overrides = {**preset_config, **config_set, **explicit_config}
    fields = {**shape, **recipe_config, **overrides}
    fields["label_smoothing"] = run_options.label_smoothing
    fields.setdefault(
        "max_position_embeddings",
        default_max_positions(run_options.max_source_length, run_options.max_target_length),
    )
    return run_options, fields, overrides


def check_config(config_class: type, fields: Mapping[str, Any], options: TrainingOptions) -> None:
    """Build `config_class` from `fields` (less the tokenizer's) to run its checks now: ValueError naming the
    field, as `build_config` would raise it after the tokenizer is trained."""
    from .inputs import check_max_positions

    check_max_positions(
        fields["max_position_embeddings"], options.max_source_length, options.max_target_length
    )
    config_class(**{key: value for key, value in fields.items() if key not in TOKENIZER_FIELDS})
