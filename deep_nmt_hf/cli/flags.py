"""Command-line flags made from a dataclass's fields (issue #51): an option's help text, choices and default
live once, in its field's `metadata`, and the parser is generated from them.

A field gets a flag when its metadata has ``"help"``. The other keys say what the flag does not take from the
field:

- ``"flag"``: the option string (default ``--`` + the field's name, ``_`` written ``-``);
- ``"dest"``: the attribute of the parsed arguments (default: argparse's, from the option string);
- ``"flag_default"``: the flag's default where it is not the field's (None: the flag is unset unless given,
  so a recipe's or preset's value can apply);
- ``"type"``: what converts the value (default: `int` or `float` as annotated; none for `str`);
- ``"choices"``, ``"metavar"``: as argparse's.

A `bool` field (default False) becomes a switch (``store_true``); a field without a default, a required flag.
`TrainingOptions` (`deep_nmt_hf/training/options.py`) declares its fields with `option(...)`, which writes
this metadata; `deep-nmt train` (`cli/train.py`) places the flags.

Imports only the standard library: `deep-nmt --help` builds the parser without torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Iterable
from typing import Any

METADATA_KEYS = frozenset({"help", "flag", "dest", "flag_default", "type", "choices", "metavar"})
_SCALARS: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}


def flag_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of dataclass `cls` that have a flag (a "help" in their metadata), in field order."""
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


def option_string(field: dataclasses.Field) -> str:
    return field.metadata.get("flag", "--" + field.name.replace("_", "-"))


def flag_dest(field: dataclasses.Field) -> str:
    """Where the parsed value goes: the metadata's "dest", else argparse's choice (from the option string)."""
    return field.metadata.get("dest", option_string(field).lstrip("-").replace("-", "_"))


def _annotated_type(field: dataclasses.Field) -> type | None:
    """The field's one type besides None (int, float, str or bool), from its annotation (a string under
    ``from __future__ import annotations``); None for anything else."""
    hint = field.type
    if isinstance(hint, str):
        members = [part.strip() for part in hint.split("|") if part.strip() != "None"]
        return _SCALARS.get(members[0]) if len(members) == 1 else None
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(hint) if m is not type(None)]
        hint = members[0] if len(members) == 1 else None
    return hint if hint in _SCALARS.values() else None


def flag_arguments(field: dataclasses.Field) -> dict[str, Any]:
    """The keyword arguments of `add_argument` for the field's flag."""
    metadata = field.metadata
    unknown = set(metadata) - METADATA_KEYS
    if unknown:
        raise TypeError(
            f"field {field.name}: unknown flag metadata {sorted(unknown)}; known: {sorted(METADATA_KEYS)}"
        )
    kwargs: dict[str, Any] = {"dest": flag_dest(field), "help": metadata["help"]}
    required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    annotated = _annotated_type(field)
    if annotated is bool:
        if required or field.default is not False or "flag_default" in metadata:
            raise TypeError(f"field {field.name}: a switch (store_true) needs the default False")
        return {**kwargs, "action": "store_true"}
    if required:
        kwargs["required"] = True
    kwargs["default"] = metadata.get("flag_default", None if required else field.default)
    kind = metadata["type"] if "type" in metadata else annotated
    if kind is None:
        raise TypeError(
            f'field {field.name}: annotation {field.type!r}; give the flag\'s "type" in its metadata'
        )
    if kind is not str:  # argparse keeps a string as given
        kwargs["type"] = kind
    kwargs.update((key, metadata[key]) for key in ("choices", "metavar") if key in metadata)
    return kwargs


def flag_default(field: dataclasses.Field) -> Any:
    """The flag's default: the metadata's "flag_default", else the field's (a switch: False; required: None)."""
    return flag_arguments(field).get("default", False)


class FieldFlags:
    """Adds the flags of a dataclass's fields to argument groups, remembering which it has added: `add` places
    the named fields' flags, `add_rest` every other field that has one."""

    def __init__(self, cls: type) -> None:
        self.fields = {f.name: f for f in flag_fields(cls)}
        self.added: set[str] = set()

    def add(self, container: Any, *names: str) -> None:
        """The flags of the fields `names`, in that order, on `container` (a parser, an argument group or a
        mutually exclusive group)."""
        for name in names:
            if name not in self.fields:
                raise KeyError(f"{name}: no field with flag metadata (a 'help')")
            if name in self.added:
                raise ValueError(f"{name}: its flag was added already")
            container.add_argument(option_string(self.fields[name]), **flag_arguments(self.fields[name]))
            self.added.add(name)

    def add_rest(self, container: Any) -> None:
        """The flags of the fields not added yet, in field order."""
        self.add(container, *(name for name in self.fields if name not in self.added))


def add_field_flags(container: Any, cls: type, names: Iterable[str] | None = None) -> None:
    """Add to `container` the flag of every field of dataclass `cls` that has one, or of `names` in order."""
    flags = FieldFlags(cls)
    if names is None:
        flags.add_rest(container)
    else:
        flags.add(container, *names)


def field_values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """{field name: parsed value} for every field of `cls` whose flag was parsed into `args`."""
    return {f.name: getattr(args, flag_dest(f)) for f in flag_fields(cls) if hasattr(args, flag_dest(f))}
