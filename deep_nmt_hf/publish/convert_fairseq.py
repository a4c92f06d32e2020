"""`deep-nmt convert fairseq`: a fairseq Transformer checkpoint (and its deep forks' layouts) as one of our models.

What is read, and where the authors' code defines it (fairseq 0.12.3.1 as `fairseq-fixed` installs it, paths under
fairseq/, line numbers of that release):

* the checkpoint: `args` (an argparse.Namespace: fairseq ≤ 0.9, and the forks) or `cfg` (fairseq ≥ 0.10:
  trainer.py:404 saves `OmegaConf.to_container(cfg)`; `cfg["model"]` a Namespace or a dict, flat or nested as
  TransformerConfig's `encoder.*` / `decoder.*`), and `model`, the state dict;
* the weights (models/transformer/transformer_encoder.py, transformer_decoder.py, modules/transformer_layer.py,
  modules/multihead_attention.py): `{encoder,decoder}.embed_tokens`, `embed_positions` (a learned table, or only
  `_float_tensor` for the sinusoidal one), `layernorm_embedding`, `layers.N.self_attn.{q,k,v,out}_proj` (or the
  older fused `in_proj_weight`, split q, k, v as multihead_attention.py:886 upgrades it), `self_attn_layer_norm`,
  `encoder_attn(_layer_norm)`, `fc1`, `fc2`, `final_layer_norm` (or the older `layer_norms.0/1(/2)`, renamed as
  transformer_layer.py:151-158 does), `layer_norm` (the final LayerNorm of a `normalize_before` stack),
  `decoder.output_projection` (or the older `decoder.embed_out`) when the output projection is untied;
* positions: modules/sinusoidal_positional_embedding.py:43-52 (`get_embedding`, frequencies over `half_dim - 1`:
  our `position_embedding="fairseq_sinusoidal"`, model/positions.py) and utils.py:256-266 (`make_positions`:
  positions start at `padding_idx + 1`: our `position_offset`);
* transformer_encoder.py:119-129 (`forward_embedding`): embeddings × sqrt(d) unless `no_scale_embedding`, plus
  positions, then `layernorm_embedding` (our field of that name), then dropout; the decoder alike;
* the dictionaries (data/dictionary.py): `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3, then one symbol per line of
  `dict.LANG.txt` (`symbol count [#fairseq:overwrite]`), in file order;
* the BPE the hub interface applies (hub_utils.py `GeneratorHubInterface.__init__`: `encoders.build_bpe(cfg.bpe)`):
  `args.bpe` / `cfg["bpe"]["_name"]`; for `sentencepiece` (data/encoders/sentencepiece_bpe.py) the
  `--sentencepiece-model` is required here, for `gpt2` (gpt2_bpe.py) its encoder.json / vocab.bpe, `subword_nmt`
  and `fastbpe` take their codes (subword-nmt codes without the `#version: 0.2` header with 0.1's rules,
  model/tokenization_bpe01.py); any other (`hf_byte_bpe`, `bytes`, `byte_bpe`, `bert`, `characters`, a
  --user-dir one) is refused (the tokenizer: fairseq_tokenizer.py, sentencepiece_model.py);
* `merge_src_tgt_embed` (models/transformer/transformer_base.py `build_model`: the source dictionary extended by
  the target's other symbols, data/dictionary.py `update`, is both sides' dictionary and the embedding's rows);
* learned positions: each side's table as saved (max_source_positions / max_target_positions + padding_idx + 1
  rows each);
* the tokenizer it applies first (hub_utils.py:119 `encoders.build_tokenizer(cfg.tokenizer)`): `args.tokenizer` /
  `cfg["tokenizer"]["_name"]`; `moses` (data/encoders/moses_tokenizer.py: `source_lang` / `target_lang`, in
  fairseq ≤ 0.9's args `moses_source_lang` / `moses_target_lang` defaulting to the task's languages,
  `moses_no_dash_splits`, `moses_no_escape`) is reproduced by model/tokenization_moses.py, `space` (space_tokenizer.py: runs
  of whitespace to one space) by the tokenizer's whitespace split; others (`nltk`, a --user-dir one) are refused;
* generation (sequence_generator.py): `<pad>` never chosen (line 377), no `</s>` before `min_len` = 1 (line 395),
  the decoder starts from `</s>`: `fairseq_generation_config`.

The deep forks, each from its authors' code:

* ADMIN as Transformer-Clinic stores it (LiyuanLucasLiu/Transformer-Clinic @70f72b7,
  fairseq/fairseq/modules/transformer_layer.py): encoder layers hold `attention_ratio_change`, `fc_ratio_change`
  (lines 60-61, 70-77), decoder layers `self_ratio_change`, `encoder_ratio_change`, `fc_ratio_change` (lines
  382-407), each a per-dimension vector used as `x + residual * ratio_change` before the post-LN LayerNorm
  (lines 196, 261; 571, 620, 654) — on EVERY sublayer, the first included (our `admin_first_omega=True`);
* DeepNorm as torchscale computes it (microsoft/torchscale @4d1e0e8, torchscale/architecture/encoder.py:80-87,
  decoder.py:91, `residual_connection` = `residual * alpha + x` at encoder.py:113-114): α = 0.81 (N⁴M)^(1/16) in the
  encoder and (3M)^(1/4) in the decoder of an encoder-decoder model, our `residual_scaling="deepnorm"`. It has no
  weights of its own: the plain post-LN layout plus `args.deepnorm` or `--fork deepnorm`;
* DLCL as wangqiangneu/dlcl stores it (@c632ee2): fairseq/modules/dlcl.py `DynamicLinearCombination` — `weight`
  (L+1, L+1, 1) for `weight_type='scalar'` (line 72), `layer_norms` with entry 0 an identity (line 45), pre-norm
  `push` normalising y_k (line 133), post-norm `pop` normalising the sum (line 166); wired in by
  fairseq/models/dlcl_transformer.py:165-184 (push the embeddings, pop → layer → push per layer, a final pop, then
  the stack's LayerNorm when pre-norm); the older fairseq/modules/layer_history.py (weight (L+1, L+1) at line 45,
  `layer_norms.0..L-1` at line 27) is read too. Ours: LayerAggregation with window -1 (dlcl reads every
  lower-triangle entry of its weight, window or not, so all of them are copied).

Everything else (adaptive softmax, cross-self-attention, NormFormer's extra scales, different encoder and decoder
widths, mixed pre-/post-LN, a pre-norm decoder without its final LayerNorm, DLCL's softmax-normalised or vector
weights) is refused with one line naming it: the converted model must score exactly as fairseq does.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..model.positions import max_positions

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # fairseq Dictionary's first four symbols, ids 0..3
BOS, PAD, EOS, UNK = range(4)
FORKS = ("auto", "none", "admin", "deepnorm", "dlcl")
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_accurate": "gelu_new", "gelu_fast": "gelu_new"}
ACTIVATIONS |= {"tanh": "tanh", "linear": "linear"}
# fairseq options with no counterpart here: (option, the value that keeps the plain Transformer); each is a name in
# fairseq's own argument parser (tests/fixtures/fairseq/option_names.json, checked by the tests). The *_layers_to_keep
# ones make fairseq prune layers as it loads the checkpoint (checkpoint_utils.py `prune_state_dict`), so the model
# fairseq runs is not the saved one.
UNSUPPORTED_OPTIONS = (
    ("adaptive_softmax_cutoff", None),
    ("cross_self_attention", False),
    ("no_cross_attention", False),
    ("no_token_positional_embeddings", False),
    ("scale_attn", False),
    ("scale_fc", False),
    ("scale_heads", False),
    ("scale_resids", False),
    ("encoder_layers_to_keep", None),
    ("decoder_layers_to_keep", None),
)
UNSUPPORTED_KEYS = (  # state-dict names of features we cannot express (NormFormer, adaptive softmax, ...)
    ("attn_ln", "NormFormer's attention LayerNorm (--scale-attn)"),
    ("ffn_layernorm", "NormFormer's FFN LayerNorm (--scale-fc)"),
    ("c_attn", "NormFormer's head scales (--scale-heads)"),
    ("w_resid", "NormFormer's residual scales (--scale-resids)"),
    ("adaptive_softmax", "an adaptive softmax"),
    ("project_in_dim", "a decoder input projection (decoder_input_dim != decoder_embed_dim)"),
    ("project_out_dim", "a decoder output projection (decoder_output_dim != decoder_embed_dim)"),
    ("alignment", "an alignment head"),
)
NOT_TRANSLATION = (
    "bart",
    "mbart",
    "transformer_lm",
    "roberta",
    "xlm",
)  # other architectures built of Transformers
ADMIN_ENCODER = {"attention_ratio_change": "self_attn", "fc_ratio_change": "ffn"}
ADMIN_DECODER = {
    "self_ratio_change": "self_attn",
    "encoder_ratio_change": "encoder_attn",
    "fc_ratio_change": "ffn",
}


class ConversionError(ValueError):
    """A checkpoint, dictionary or option this converter cannot turn into an exact model (one line)."""


@dataclass
class Checkpoint:
    """What the converter reads of a fairseq checkpoint."""

    path: Path
    options: dict[str, Any]
    state: dict[str, torch.Tensor]
    source_lang: str | None = None
    target_lang: str | None = None
    layout: dict[str, Any] = field(default_factory=dict)
    bpe: dict[str, Any] = field(
        default_factory=dict
    )  # the BPE its options name: {"name", "sentencepiece_model"}
    tokenizer: dict[str, Any] = field(default_factory=dict)  # its --tokenizer: {"name", Moses's options}


# ------------------------------------------------------------------------------------------------ reading
def load_checkpoint(path: str | Path, trust_pickle: bool = False) -> Checkpoint:
    """Read a fairseq checkpoint: tensors and argparse.Namespace only, unless `trust_pickle`."""
    path = Path(path)
    if not path.is_file():
        raise ConversionError(f"checkpoint {path} does not exist (give a fairseq checkpoint_*.pt file)")
    with path.open("rb") as handle:  # torch.save writes a zip archive, or (before torch 1.6) a pickle
        head = handle.read(4)
    if not (head.startswith(b"PK\x03\x04") or head[:1] == b"\x80"):
        raise ConversionError(
            f"{path} is not a PyTorch checkpoint (torch.save writes a zip archive or a pickle); give a fairseq "
            "checkpoint_*.pt file"
        )
    try:
        if trust_pickle:
            raw = torch.load(path, map_location="cpu", weights_only=False)
        else:
            with torch.serialization.safe_globals([argparse.Namespace]):
                raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises several kinds; the user gets one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        hint = "" if trust_pickle else "; if you trust the file, rerun with --trust-pickle"
        raise ConversionError(f"cannot read {path} as a fairseq checkpoint: {first[:200]}{hint}") from None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("model"), Mapping):
        raise ConversionError(f"{path} is not a fairseq checkpoint: no 'model' state dict in it")
    options, task = _options(raw, path)
    state = {k: v for k, v in raw["model"].items() if isinstance(v, torch.Tensor)}
    return Checkpoint(
        path=path,
        options=options,
        state=state,
        source_lang=task.get("source_lang"),
        target_lang=task.get("target_lang"),
        bpe=_bpe_options(raw),
        tokenizer=_tokenizer_options(raw, task),
    )


def _bpe_options(raw: Mapping) -> dict[str, Any]:
    """The BPE fairseq's hub interface would apply (`--bpe`; `cfg["bpe"]` from 0.10 on): its name and, for
    sentencepiece (fairseq/data/encoders/sentencepiece_bpe.py), the `--sentencepiece-model` it was given."""
    args, cfg = raw.get("args"), _as_dict(raw.get("cfg"))
    if args is not None:
        options = _as_dict(args)
        name = options.get("bpe")
    else:
        options = _as_dict(cfg.get("bpe"))
        name = options.get("_name")
    if not isinstance(name, str) or not name:
        return {}
    return {
        "name": name,
        "sentencepiece_model": options.get("sentencepiece_model"),
        "gpt2_encoder_json": options.get("gpt2_encoder_json"),
    }


def _tokenizer_options(raw: Mapping, task: Mapping[str, Any]) -> dict[str, Any]:
    """The tokenizer fairseq's hub interface would apply before the BPE (`--tokenizer`; `cfg["tokenizer"]`) and
    Moses's options (fairseq/data/encoders/moses_tokenizer.py): the languages (fairseq ≤ 0.9: `moses_source_lang`,
    else the task's; 0.10+: the tokenizer section's), `moses_no_dash_splits`, `moses_no_escape`."""
    args = raw.get("args")
    if args is not None:
        options = _as_dict(args)
        name = options.get("tokenizer")
        source = options.get("moses_source_lang") or options.get("source_lang")
        target = options.get("moses_target_lang") or options.get("target_lang")
    else:
        options = _as_dict(_as_dict(raw.get("cfg")).get("tokenizer"))
        name = options.get("_name")
        source = options.get("source_lang") or task.get("source_lang")
        target = options.get("target_lang") or task.get("target_lang")
    return {
        "name": name if isinstance(name, str) and name else None,
        "moses_source_lang": str(source or "en"),  # moses_tokenizer.py's default
        "moses_target_lang": str(target or "en"),
        "moses_dash_splits": not options.get("moses_no_dash_splits", False),
        "moses_escape": not options.get("moses_no_escape", False),
    }


def _as_dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, argparse.Namespace):
        return dict(vars(value))
    if isinstance(value, Mapping):
        return dict(value)
    return {}


def _flatten(options: dict[str, Any]) -> dict[str, Any]:
    """fairseq ≥ 0.11's TransformerConfig nests `encoder.embed_dim`, ...: flatten to the legacy names."""
    flat = {}
    for key, value in options.items():
        if key in ("encoder", "decoder") and isinstance(value, Mapping):
            for inner, inner_value in value.items():
                if isinstance(inner_value, Mapping):  # leaves only
                    continue
                flat[f"{key}_{inner}"] = inner_value
        else:
            flat[key] = value
    return (
        flat  # TransformerConfig's encoder.ffn_embed_dim is then the legacy encoder_ffn_embed_dim, and so on
    )


def _options(raw: Mapping, path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    args = raw.get("args")
    cfg = raw.get("cfg")
    if args is not None:
        options = _as_dict(args)
        return options, options
    cfg = _as_dict(cfg)
    if not cfg or not cfg.get("model"):
        raise ConversionError(
            f"{path} holds neither 'args' nor 'cfg' with a model section: cannot tell its shape"
        )
    model = _flatten(_as_dict(cfg["model"]))
    return model, _as_dict(cfg.get("task")) or model


def read_dictionary(path: Path) -> list[str]:
    """The symbols of a fairseq dictionary in id order: the four specials, then one per line of the file, as
    fairseq/data/dictionary.py `add_from_file` / `add_symbol` read it (a symbol seen before is an error, unless its
    line ends in `#fairseq:overwrite`: then it gets a new id too, and the text maps to that later one)."""
    if not path.is_file():
        raise ConversionError(f"dictionary {path} does not exist (give --source-dict / --target-dict)")
    symbols = list(SPECIALS)
    seen = set(symbols)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.rstrip()
        if not line:
            continue
        overwrite = line.endswith(" #fairseq:overwrite")
        if overwrite:
            line = line[: -len(" #fairseq:overwrite")]
        fields = line.rsplit(" ", 1)
        if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
            raise ConversionError(
                f"{path}:{number} is not a fairseq dictionary line ('SYMBOL COUNT'): {line!r}"
            )
        symbol = fields[0]
        if symbol in seen and not overwrite:
            raise ConversionError(
                f"{path}:{number}: {symbol!r} is listed twice (fairseq refuses it too, unless the line ends in "
                "#fairseq:overwrite)"
            )
        seen.add(symbol)
        symbols.append(symbol)
    return symbols


def find_dictionaries(
    checkpoint: Checkpoint, source_dict: Path | None, target_dict: Path | None
) -> tuple[Path, Path]:
    """`dict.SRC.txt` and `dict.TGT.txt` beside the checkpoint (or named by flags). Without a language pair in the
    checkpoint (`fairseq-train data-bin` infers it at run time and saves none) the pair is inferred as fairseq's
    data_utils.py `infer_language_pair` does, from `*.SRC-TGT.*` files beside it, else `src` / `tgt` where
    dict.src.txt and dict.tgt.txt are there."""
    folder = checkpoint.path.parent
    found = []
    source_lang, target_lang = checkpoint.source_lang, checkpoint.target_lang
    if not source_lang and not target_lang:
        source_lang, target_lang = _infer_language_pair(folder)
    for given, lang, side in (
        (source_dict, source_lang, "source"),
        (target_dict, target_lang, "target"),
    ):
        if given is not None:
            found.append(Path(given))
            continue
        candidates = [folder / f"dict.{lang}.txt"] if lang else []
        candidates += sorted(folder.glob("dict.*.txt")) if not lang else []
        candidates = [c for c in candidates if c.is_file()]
        if lang and candidates:
            found.append(candidates[0])
        elif not lang and len(candidates) == 1:
            found.append(candidates[0])
        else:
            wanted = f"dict.{lang}.txt" if lang else "dict.LANG.txt"
            raise ConversionError(
                f"no {side} dictionary: {folder / wanted} not found; give --{side}-dict PATH (fairseq's "
                f"dict.{lang or 'LANG'}.txt from fairseq-preprocess)"
            )
    return found[0], found[1]


def _merged_dictionary(checkpoint: Checkpoint, source: list[str], target: list[str]) -> list[str] | None:
    """With `--merge-src-tgt-embed` (and without --share-all-embeddings) fairseq's model builder
    (models/transformer/transformer_base.py `build_model`) extends the source dictionary by the target symbols it
    lacks (data/dictionary.py `update`: in the target's order) and makes that merged dictionary both the task's source
    and target dictionary: the embedding has its rows, and fairseq decodes target ids with it. The merged symbols,
    or None without that option."""
    options = checkpoint.options
    if not options.get("merge_src_tgt_embed", False) or options.get("share_all_embeddings", False):
        return None
    merged = list(source)
    seen = set(merged)
    for symbol in target:
        if symbol not in seen:
            seen.add(symbol)
            merged.append(symbol)
    return merged


def _infer_language_pair(folder: Path) -> tuple[str | None, str | None]:
    """fairseq/data/data_utils.py `infer_language_pair`: the first file named `SPLIT.SRC-TGT.*` gives the pair;
    else (only the dictionaries copied beside the checkpoint) `src` / `tgt` when both dict.src.txt and dict.tgt.txt
    are there."""
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        parts = path.name.split(".")
        if len(parts) >= 3 and len(parts[1].split("-")) == 2:
            source, target = parts[1].split("-")
            if (folder / f"dict.{source}.txt").is_file() and (folder / f"dict.{target}.txt").is_file():
                return source, target
    if (folder / "dict.src.txt").is_file() and (folder / "dict.tgt.txt").is_file():
        return "src", "tgt"
    return None, None


# ------------------------------------------------------------------------------------------------ layout
def _count_layers(state: Mapping[str, torch.Tensor], side: str) -> int:
    numbers = {int(m.group(1)) for k in state if (m := re.match(rf"{side}\.layers\.(\d+)\.", k))}
    return max(numbers) + 1 if numbers else 0


def detect_layout(checkpoint: Checkpoint, fork: str = "auto") -> dict[str, Any]:
    """The architecture the checkpoint holds, checked against the options; ConversionError where it is not a
    fairseq Transformer or a known fork of it."""
    options, state, path = checkpoint.options, checkpoint.state, checkpoint.path
    arch = str(options.get("arch") or options.get("_name") or "")
    if fork not in FORKS:
        raise ConversionError(f"--fork {fork!r} is unknown; use one of: {', '.join(FORKS)}")
    if arch and ("transformer" not in arch or arch.startswith(NOT_TRANSLATION)):
        raise ConversionError(
            f"{path.name} is a fairseq {arch!r} model, not a Transformer translation model (expected arch "
            "transformer* or a fork's *transformer*, with encoder.layers.* and decoder.layers.* weights)"
        )
    for side in ("encoder", "decoder"):
        if not any(k.startswith(f"{side}.layers.") for k in state):
            raise ConversionError(f"{path.name} has no {side}.layers.* weights: not a fairseq Transformer")
    for key, what in UNSUPPORTED_KEYS:
        hit = next((k for k in state if f".{key}" in k or k.startswith(key)), None)
        if hit is not None:
            raise ConversionError(f"{path.name} holds {what} ({hit}); no exact counterpart here")
    for option, plain in UNSUPPORTED_OPTIONS:
        value = options.get(option, plain)
        if value not in (plain, None, False, 0, "", "0"):
            raise ConversionError(
                f"{path.name} was trained with {option}={value!r}; no exact counterpart here"
            )
    layout: dict[str, Any] = {}
    for side in ("encoder", "decoder"):
        layout[f"{side}_layers"] = _count_layers(state, side)
        layout[f"{side}_pre"] = bool(
            options.get(f"{side}_normalize_before", f"{side}.layer_norm.weight" in state)
        )
        layout[f"{side}_dlcl"] = f"{side}.history.weight" in state
    if layout["encoder_pre"] != layout["decoder_pre"]:
        raise ConversionError(
            f"{path.name} has encoder_normalize_before={layout['encoder_pre']} but decoder_normalize_before="
            f"{layout['decoder_pre']}; our models put the LayerNorm at one place on both sides"
        )
    if layout["decoder_pre"] and options.get("no_decoder_final_norm", False):
        raise ConversionError(
            f"{path.name} is pre-norm with no_decoder_final_norm=True; no exact counterpart here"
        )
    admin = any(k.endswith("_ratio_change") for k in state)
    deepnorm = bool(options.get("deepnorm", False))
    dlcl = layout["encoder_dlcl"] or layout["decoder_dlcl"]
    found = "admin" if admin else "deepnorm" if deepnorm else "dlcl" if dlcl else "none"
    if fork not in ("auto", found) and not (fork == "deepnorm" and found == "none"):
        raise ConversionError(
            f"--fork {fork} does not match {path.name}: its weights have the {found!r} layout "
            "(ADMIN: *_ratio_change, DLCL: *.history.weight, DeepNorm and plain fairseq: neither)"
        )
    layout["fork"] = fork if fork != "auto" else found
    if layout["fork"] in ("admin", "deepnorm") and layout["encoder_pre"]:
        raise ConversionError(
            f"{path.name}: the {layout['fork']} layout is post-LN, but the checkpoint is normalize_before (pre-LN)"
        )
    if layout["fork"] == "dlcl":
        for option, plain in (("normalize_learned_weight", False), ("normalize_embed", False)):
            if options.get(option, plain):
                raise ConversionError(f"{path.name}: DLCL with {option}=True has no exact counterpart here")
        for side in ("encoder", "decoder"):
            weight = state.get(f"{side}.history.weight")
            if weight is not None and weight.dim() == 3 and weight.shape[2] != 1:
                raise ConversionError(
                    f"{path.name}: {side}.history.weight has shape {tuple(weight.shape)}; only scalar weights "
                    "(L+1, L+1, 1) or (L+1, L+1) have a counterpart here (weight_type='scalar')"
                )
    checkpoint.layout = layout
    return layout


# ------------------------------------------------------------------------------------------------ config
def _option(options: Mapping[str, Any], name: str, default: Any) -> Any:
    value = options.get(name)
    return default if value is None else value


def build_config(checkpoint: Checkpoint, source: list[str], target: list[str]) -> Any:
    """Our DeepNMTConfig for the checkpoint (layout detected first)."""
    from ..model.configuration_deep_nmt import DeepNMTConfig

    options, state, layout, name = (
        checkpoint.options,
        checkpoint.state,
        checkpoint.layout,
        checkpoint.path.name,
    )
    embed = state.get("encoder.embed_tokens.weight")
    target_embed = state.get("decoder.embed_tokens.weight")
    if embed is None or target_embed is None:
        raise ConversionError(f"{name} lacks encoder/decoder.embed_tokens.weight: not a fairseq Transformer")
    for side, symbols, table in (("source", source, embed), ("target", target, target_embed)):
        if len(symbols) != table.shape[0]:
            raise ConversionError(
                f"the {side} dictionary has {len(symbols)} symbols (4 specials + {len(symbols) - 4} lines) but "
                f"{name}'s {'en' if side == 'source' else 'de'}coder embedding has {table.shape[0]} rows; give the "
                "dictionary the model was trained with"
            )
    # dictionaries of different sizes: the decoder's own embedding and output projection of the target's size
    # (`decoder_vocab_size`, MarianConfig's rule)
    target_size = None if embed.shape[0] == target_embed.shape[0] else target_embed.shape[0]
    d_model = embed.shape[1]
    if target_embed.shape[1] != d_model:
        raise ConversionError(f"{name}: encoder width {d_model} != decoder width {target_embed.shape[1]}")
    share_all = embed.data_ptr() == target_embed.data_ptr() or bool(
        options.get("share_all_embeddings", False)
    )
    if not share_all and source == target and torch.equal(embed, target_embed):
        share_all = True
    untied = "decoder.output_projection.weight" in state or "decoder.embed_out" in state
    tied = bool(options.get("share_decoder_input_output_embed", False)) or share_all
    if untied:
        projection = state.get("decoder.output_projection.weight", state.get("decoder.embed_out"))
        tied = torch.equal(projection, target_embed)
    activation = str(_option(options, "activation_fn", "relu"))
    if activation not in ACTIVATIONS:
        raise ConversionError(
            f"{name}: activation_fn={activation!r} is unknown here; known: {', '.join(ACTIVATIONS)}"
        )
    positions = {}
    for side in ("encoder", "decoder"):
        learned = f"{side}.embed_positions.weight" in state
        positions[side] = "learned" if learned else "fairseq_sinusoidal"
    if positions["encoder"] != positions["decoder"]:
        raise ConversionError(
            f"{name}: learned positions on one side only; our models use one kind on both sides"
        )
    if options.get("encoder_learned_pos") and positions["encoder"] != "learned":
        raise ConversionError(f"{name}: encoder_learned_pos=True but no encoder.embed_positions.weight in it")
    max_source = int(_option(options, "max_source_positions", 1024))
    max_target = int(_option(options, "max_target_positions", 1024))
    encoder_positions, decoder_positions = min(max_source, max_target), None
    # learned tables: each side its own rows, its own limit (fairseq's max_source_positions / max_target_positions)
    if positions["encoder"] == "learned":
        encoder_positions, decoder_positions = (
            state[f"{side}.embed_positions.weight"].shape[0] - (PAD + 1) for side in ("encoder", "decoder")
        )
        decoder_positions = None if decoder_positions == encoder_positions else decoder_positions
    layer_norm_embedding = "encoder.layernorm_embedding.weight" in state
    if layer_norm_embedding != ("decoder.layernorm_embedding.weight" in state):
        raise ConversionError(f"{name}: layernorm_embedding on one side only; no exact counterpart here")
    fork = layout["fork"]
    heads_e = int(_option(options, "encoder_attention_heads", 8))
    heads_d = int(_option(options, "decoder_attention_heads", heads_e))
    fields = dict(
        vocab_size=embed.shape[0],
        decoder_vocab_size=target_size,
        d_model=d_model,
        encoder_layers=layout["encoder_layers"],
        decoder_layers=layout["decoder_layers"],
        encoder_attention_heads=heads_e,
        decoder_attention_heads=heads_d,
        encoder_ffn_dim=_Reading(state, name)["encoder.layers.0.fc1.weight"].shape[0],
        decoder_ffn_dim=_Reading(state, name)["decoder.layers.0.fc1.weight"].shape[0],
        max_position_embeddings=encoder_positions,
        decoder_max_position_embeddings=decoder_positions,
        dropout=float(_option(options, "dropout", 0.1)),
        attention_dropout=float(_option(options, "attention_dropout", 0.0)),
        activation_dropout=float(
            _option(options, "activation_dropout", _option(options, "relu_dropout", 0.0))
        ),
        activation_function=ACTIVATIONS[activation],
        scale_embedding=not bool(options.get("no_scale_embedding", False)),
        layer_norm_eps=1e-5,
        layer_norm_position="pre" if layout["encoder_pre"] else "post",
        position_embedding=positions["encoder"],
        position_offset=PAD + 1,
        layernorm_embedding=layer_norm_embedding,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=BOS,
        unk_token_id=UNK,
        decoder_start_token_id=EOS,  # fairseq's decoder starts from </s> (prev_output_tokens)
        tie_word_embeddings=tied,
        share_encoder_decoder_embeddings=share_all,
    )
    if fork == "admin":
        fields |= dict(
            residual_scaling="admin", admin_omega="trainable", admin_first_omega=True, admin_profiled=True
        )
    elif fork == "deepnorm":
        fields |= dict(residual_scaling="deepnorm", init_method="deepnorm")
    for side in ("encoder", "decoder"):
        if layout[f"{side}_dlcl"]:
            fields[f"{side}_layer_aggregation"] = "dlcl"
            fields["dlcl_window"] = -1
    try:
        return DeepNMTConfig(**fields)
    except ValueError as err:
        raise ConversionError(f"{name}: {err}") from None


# ------------------------------------------------------------------------------------------------ weights
def _attention(state: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """q/k/v/out projections of one fairseq MultiheadAttention (fused in_proj_weight split in q, k, v order)."""
    out = {}
    if f"{prefix}.in_proj_weight" in state:
        weights = state[f"{prefix}.in_proj_weight"].chunk(3, dim=0)
        biases = state[f"{prefix}.in_proj_bias"].chunk(3, dim=0)
        for name, weight, bias in zip(("q_proj", "k_proj", "v_proj"), weights, biases, strict=True):
            out[f"{name}.weight"], out[f"{name}.bias"] = weight, bias
    else:
        for name in ("q_proj", "k_proj", "v_proj"):
            out[f"{name}.weight"] = state[f"{prefix}.{name}.weight"]
            out[f"{name}.bias"] = state[f"{prefix}.{name}.bias"]
    out["out_proj.weight"] = state[f"{prefix}.out_proj.weight"]
    out["out_proj.bias"] = state[f"{prefix}.out_proj.bias"]
    return out


def _layer_norm(
    state: Mapping[str, torch.Tensor], layer: str, name: str, old_index: int
) -> dict[str, torch.Tensor]:
    """A layer's LayerNorm under its name, or under the older `layer_norms.N`."""
    for key in (f"{layer}.{name}", f"{layer}.layer_norms.{old_index}"):
        if f"{key}.weight" in state:
            return {"weight": state[f"{key}.weight"], "bias": state[f"{key}.bias"]}
    raise ConversionError(
        f"missing {layer}.{name}.weight (nor {layer}.layer_norms.{old_index}.weight) in the checkpoint"
    )


class _Reading(dict):
    """The fairseq state dict, remembering which names were read."""

    def __init__(self, state: Mapping[str, torch.Tensor], name: str = "the checkpoint") -> None:
        super().__init__(state)
        self.used: set[str] = set()
        self.name = name

    def __getitem__(self, key: str) -> torch.Tensor:
        self.used.add(key)
        if key not in self:  # a layout without a weight the model needs: one line, not a KeyError traceback
            raise ConversionError(
                f"{self.name} lacks {key}, which a fairseq Transformer (or ADMIN, DeepNorm, DLCL) layout holds: "
                "a layout we do not know"
            )
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        if key in self:
            self.used.add(key)
        return super().get(key, default)


def convert_state(checkpoint: Checkpoint, config: Any) -> dict[str, torch.Tensor]:
    """Our state dict (DeepNMTForConditionalGeneration names) from the fairseq one; ConversionError naming a
    fairseq weight that nothing read (a layout we do not know)."""
    state, layout = _Reading(checkpoint.state, checkpoint.path.name), checkpoint.layout
    ours: dict[str, torch.Tensor] = {}

    def put(prefix: str, tensors: Mapping[str, torch.Tensor]) -> None:
        for key, value in tensors.items():
            ours[f"{prefix}.{key}"] = value

    ours["model.shared.weight"] = state["encoder.embed_tokens.weight"]
    target_embedding = state["decoder.embed_tokens.weight"]  # the shared one itself when share_all_embeddings
    if not config.share_encoder_decoder_embeddings:
        ours["model.decoder_embed_tokens.weight"] = target_embedding
    projection = state.get("decoder.output_projection.weight", state.get("decoder.embed_out"))
    ours["lm_head.weight"] = projection if projection is not None else target_embedding
    for side in ("encoder", "decoder"):
        base = f"model.{side}"
        if config.position_embedding == "learned":
            rows = max_positions(config, side) + config.position_offset
            ours[f"{base}.embed_positions.weight"] = state[f"{side}.embed_positions.weight"][:rows]
        if config.layernorm_embedding:
            put(f"{base}.layernorm_embedding", _layer_norm(state, side, "layernorm_embedding", -1))
        if layout[f"{side}_pre"]:
            put(f"{base}.layer_norm", _layer_norm(state, side, "layer_norm", -1))
        sublayers = ["self_attn", "ffn"] if side == "encoder" else ["self_attn", "encoder_attn", "ffn"]
        for i in range(layout[f"{side}_layers"]):
            theirs, mine = f"{side}.layers.{i}", f"{base}.layers.{i}"
            put(f"{mine}.self_attn.fn", _attention(state, f"{theirs}.self_attn"))
            put(f"{mine}.self_attn.layer_norm", _layer_norm(state, theirs, "self_attn_layer_norm", 0))
            if side == "decoder":
                put(f"{mine}.encoder_attn.fn", _attention(state, f"{theirs}.encoder_attn"))
                put(
                    f"{mine}.encoder_attn.layer_norm",
                    _layer_norm(state, theirs, "encoder_attn_layer_norm", 1),
                )
            for linear in ("fc1", "fc2"):
                ours[f"{mine}.ffn.fn.{linear}.weight"] = state[f"{theirs}.{linear}.weight"]
                ours[f"{mine}.ffn.fn.{linear}.bias"] = state[f"{theirs}.{linear}.bias"]
            put(f"{mine}.ffn.layer_norm", _layer_norm(state, theirs, "final_layer_norm", len(sublayers) - 1))
            if layout["fork"] == "admin":
                names = ADMIN_ENCODER if side == "encoder" else ADMIN_DECODER
                for theirs_name, sublayer in names.items():
                    key = f"{theirs}.{theirs_name}"
                    if key not in state:
                        raise ConversionError(
                            f"ADMIN layout without {key} (Transformer-Clinic stores one per sublayer)"
                        )
                    ours[f"{mine}.{sublayer}.residual_scale.omega"] = state[key].reshape(-1)
        if layout[f"{side}_dlcl"]:
            put(f"{base}.aggregation", _history(state, side, layout[f"{side}_layers"]))
    # fairseq's bookkeeping, the sinusoidal table's placeholder, and the sinusoidal table itself as fairseq ≤ 0.6
    # saved it (recomputed here: fairseq's own upgrade_state_dict deletes it too)
    ignored = ("version", "_float_tensor", "embed_positions.weights")
    left = sorted(k for k in state if k not in state.used and not k.endswith(ignored))
    if left:
        raise ConversionError(
            f"{checkpoint.path.name} holds weights of a layout we do not know: {', '.join(left[:3])}"
            f"{' ...' if len(left) > 3 else ''} (known: fairseq Transformer, ADMIN, DeepNorm, DLCL)"
        )
    return ours


def _history(state: Mapping[str, torch.Tensor], side: str, layers: int) -> dict[str, torch.Tensor]:
    """DLCL's weights and LayerNorms: dlcl.py's (L+1, L+1, 1) with norms 1..L, or layer_history.py's (L+1, L+1)
    with norms 0..L-1; ours are (L+1, L+1) with norms 0..L-1 for y_1..y_L (pre) / rows 1..L (post)."""
    weight = state[f"{side}.history.weight"]
    weight = weight.reshape(weight.shape[0], weight.shape[1])
    if weight.shape != (layers + 1, layers + 1):
        raise ConversionError(
            f"{side}.history.weight has shape {tuple(weight.shape)}; expected ({layers + 1}, {layers + 1}[, 1])"
        )
    shift = 1 if f"{side}.history.layer_norms.{layers}.weight" in state else 0
    out = {"weight": torch.tril(weight)}
    for k in range(layers):
        key = f"{side}.history.layer_norms.{k + shift}"
        if f"{key}.weight" not in state:
            raise ConversionError(f"DLCL layout without {key}.weight ({layers} LayerNorms expected)")
        out[f"layer_norms.{k}.weight"] = state[f"{key}.weight"]
        out[f"layer_norms.{k}.bias"] = state[f"{key}.bias"]
    return out


# ------------------------------------------------------------------------------------------------ the whole
def fairseq_model(
    checkpoint_path: str | Path,
    source_dict: str | Path | None = None,
    target_dict: str | Path | None = None,
    bpe_codes: str | Path | None = None,
    fork: str = "auto",
    trust_pickle: bool = False,
    sentencepiece_model: str | Path | None = None,
    moses: bool = False,
    gpt2_bpe: tuple[str | Path, str | Path] | None = None,
) -> tuple[Any, Any, dict[str, Any]]:
    """(our model in eval mode, its tokenizer or None, what was converted) from a fairseq checkpoint; `moses`
    adds Moses tokenisation where the checkpoint's options do not name it (text tokenised before preprocessing);
    `gpt2_bpe` is fairseq's (encoder.json, vocab.bpe) for a `--bpe gpt2` checkpoint."""
    from ..model.modeling_deep_nmt import DeepNMTForConditionalGeneration
    from ..model.tokenization_paired import PairedTokenizerFast
    from .fairseq_tokenizer import build_tokenizer

    checkpoint = load_checkpoint(checkpoint_path, trust_pickle=trust_pickle)
    detect_layout(checkpoint, fork)
    _check_tokenizer_files(checkpoint, bpe_codes, sentencepiece_model)
    gpt2 = _gpt2_files(checkpoint, gpt2_bpe, bpe_codes or sentencepiece_model)
    moses_options = _moses_options(checkpoint, moses)
    source_path, target_path = find_dictionaries(
        checkpoint, Path(source_dict) if source_dict else None, Path(target_dict) if target_dict else None
    )
    source, target = read_dictionary(source_path), read_dictionary(target_path)
    merged = _merged_dictionary(checkpoint, source, target)
    if merged is not None:
        source = target = merged
    config = build_config(checkpoint, source, target)
    ours = convert_state(checkpoint, config)
    model = DeepNMTForConditionalGeneration(config)
    missing = sorted(set(model.state_dict()) - set(ours) - _tied_or_derived(config))
    if missing:
        raise ConversionError(
            f"conversion left {missing[0]} unset ({len(missing)} in all): an unknown layout"
        )
    model.load_state_dict({k: v.float() for k, v in ours.items()}, strict=False)
    model.eval()
    model.generation_config = fairseq_generation_config(config)
    tokenizer, why_none = None, ""
    spm = Path(sentencepiece_model) if sentencepiece_model else None
    if source == target:  # one dictionary for both sides: one tokenizer
        try:
            tokenizer = build_tokenizer(
                source, Path(bpe_codes) if bpe_codes else None, spm, moses_options, gpt2
            )
        except ImportError as err:  # sacremoses
            raise ConversionError(str(err)) from None
        except ValueError as err:
            if bpe_codes or spm or gpt2:  # the files given do not make a tokenizer
                raise ConversionError(str(err)) from None
            why_none = str(err)  # BPE pieces but no codes: the model converts, without a tokenizer
    else:  # two dictionaries: the source's tokenizer encodes, the target's decodes (model/tokenization_paired.py),
        # Moses around them where asked (the source language before, the target's detokeniser after)
        codes = Path(bpe_codes) if bpe_codes else None
        try:
            tokenizer = PairedTokenizerFast.pair(
                *(build_tokenizer(side, codes, spm, gpt2=gpt2) for side in (source, target)),
                moses=moses_options,
            )
        except ImportError as err:  # sacremoses
            raise ConversionError(str(err)) from None
        except ValueError as err:
            if bpe_codes or spm or gpt2:
                raise ConversionError(str(err)) from None
            why_none = str(err)
    splitting = f" + {_codes_kind(bpe_codes)} BPE" if bpe_codes else " + sentencepiece" if spm else ""
    splitting = " + GPT-2 byte-level BPE" if gpt2 else splitting
    if moses_options is not None:
        splitting = (
            f" + Moses ({moses_options['moses_source_lang']} → {moses_options['moses_target_lang']})"
            + splitting
        )
    provenance = {
        "converted_from": checkpoint.path.name,
        "layout": checkpoint.layout,
        "source_dictionary": source_path.name,
        "target_dictionary": target_path.name,
        "merged_dictionary": merged is not None,
        "bpe_codes": Path(bpe_codes).name if bpe_codes else None,
        "sentencepiece_model": spm.name if spm else None,
        "gpt2_bpe": [path.name for path in gpt2] if gpt2 else None,
        "tokenizer": f"none: {why_none}" if tokenizer is None else "fairseq dictionary ids" + splitting,
        "moses": moses_options,
        "not_reproduced": "truecasing" if moses_options else _NOT_REPRODUCED,
    }
    return model, tokenizer, provenance


def convert_fairseq(
    checkpoint_path: str | Path,
    output_dir: str | Path,
    source_dict: str | Path | None = None,
    target_dict: str | Path | None = None,
    bpe_codes: str | Path | None = None,
    fork: str = "auto",
    trust_pickle: bool = False,
    sentencepiece_model: str | Path | None = None,
    moses: bool = False,
    gpt2_bpe: tuple[str | Path, str | Path] | None = None,
) -> Path:
    """Convert into `output_dir`, which appears complete or not at all."""
    from ..data.atomic import atomic_directory

    output_dir = Path(output_dir)
    if output_dir.exists():
        raise ConversionError(f"{output_dir} exists already; choose a new output directory")
    model, tokenizer, provenance = fairseq_model(
        checkpoint_path,
        source_dict,
        target_dict,
        bpe_codes,
        fork,
        trust_pickle,
        sentencepiece_model,
        moses,
        gpt2_bpe,
    )
    with atomic_directory(output_dir) as work:
        model.save_pretrained(work)
        if tokenizer is not None:
            tokenizer.save_pretrained(work)
        (work / "conversion.json").write_text(json.dumps(provenance, indent=2) + "\n", encoding="utf-8")
    return output_dir


def _check_tokenizer_files(
    checkpoint: Checkpoint, bpe_codes: str | Path | None, sentencepiece_model: str | Path | None
) -> None:
    """The BPE files given exist and fit what the checkpoint was trained with (before anything is built)."""
    if bpe_codes is not None and sentencepiece_model is not None:
        raise ConversionError(
            "give --bpe-codes (subword-nmt) or --sentencepiece-model (sentencepiece), not both: fairseq applies one"
        )
    if bpe_codes is not None and not Path(bpe_codes).is_file():
        raise ConversionError(f"BPE codes {bpe_codes} do not exist (give subword-nmt's codes file)")
    if sentencepiece_model is not None and not Path(sentencepiece_model).is_file():
        raise ConversionError(
            f"sentencepiece model {sentencepiece_model} does not exist (give spm_train's .model file)"
        )
    named = checkpoint.bpe.get("name")
    if named == "sentencepiece" and bpe_codes is not None:
        raise ConversionError(
            f"{checkpoint.path.name} was preprocessed with sentencepiece (bpe='sentencepiece'), not subword-nmt: "
            "give --sentencepiece-model SPM.model instead of --bpe-codes"
        )
    if named == "sentencepiece" and sentencepiece_model is None:
        where = checkpoint.bpe.get("sentencepiece_model")
        raise ConversionError(
            f"{checkpoint.path.name} was preprocessed with sentencepiece (bpe='sentencepiece'"
            + (f", sentencepiece_model={where!r}" if where else "")
            + "): give --sentencepiece-model SPM.model so that the tokenizer splits raw text as fairseq did"
        )
    if named == "subword_nmt" and sentencepiece_model is not None:
        raise ConversionError(
            f"{checkpoint.path.name} was preprocessed with subword-nmt (bpe='subword_nmt'), not sentencepiece: "
            "give --bpe-codes CODES instead of --sentencepiece-model"
        )
    _check_bpe_name(checkpoint)
    if bpe_codes is not None:
        _check_codes(checkpoint, Path(bpe_codes))


# fairseq's --bpe choices (fairseq/data/encoders/) the converted tokenizer reproduces; the others (hf_byte_bpe,
# bytes, byte_bpe, bert, characters, a --user-dir one) are refused by name before anything is written
REPRODUCED_BPE = ("subword_nmt", "fastbpe", "sentencepiece", "gpt2")


def _gpt2_files(
    checkpoint: Checkpoint, given: tuple[str | Path, str | Path] | None, other: str | Path | None
) -> tuple[Path, Path] | None:
    """fairseq's GPT-2 files (encoder.json, vocab.bpe) for a `--bpe gpt2` checkpoint (gpt2_bpe.py downloads them;
    here the user gives them); ConversionError where they are missing, given for another BPE, or not files."""
    named = checkpoint.bpe.get("name")
    if given is None:
        if named == "gpt2":
            recorded = checkpoint.bpe.get("gpt2_encoder_json")
            raise ConversionError(
                f"{checkpoint.path.name} was preprocessed with fairseq's GPT-2 BPE (bpe='gpt2'"
                + (f", gpt2_encoder_json={recorded!r}" if recorded else "")
                + "): give --gpt2-bpe ENCODER_JSON VOCAB_BPE (the files fairseq downloaded) so that the tokenizer "
                "splits raw text as fairseq did"
            )
        return None
    if named not in (None, "gpt2") or other is not None:
        raise ConversionError(
            f"--gpt2-bpe is for a checkpoint preprocessed with fairseq's GPT-2 BPE; {checkpoint.path.name} names "
            f"bpe={named!r}" + (" and another BPE file is given" if other is not None else "")
        )
    paths = (Path(given[0]), Path(given[1]))
    for path, what in zip(paths, ("encoder.json", "vocab.bpe"), strict=True):
        if not path.is_file():
            raise ConversionError(
                f"GPT-2 {what} {path} does not exist (give the file fairseq's --bpe gpt2 used)"
            )
    return paths


def _check_bpe_name(checkpoint: Checkpoint) -> None:
    """ConversionError for a `--bpe` the converted tokenizer cannot reproduce (it would split raw text otherwise
    than fairseq, silently)."""
    named = checkpoint.bpe.get("name")
    if named is not None and named not in REPRODUCED_BPE:
        raise ConversionError(
            f"{checkpoint.path.name} was preprocessed with fairseq's {named!r} BPE (bpe={named!r}), which the "
            f"converted tokenizer cannot reproduce (it reproduces: {', '.join(REPRODUCED_BPE)})"
        )


def _check_codes(checkpoint: Checkpoint, codes: Path) -> None:
    """The codes file is one the tokenizer reproduces (subword-nmt 0.2 or 0.1, fastBPE:
    fairseq_tokenizer.codes_format) and the one the checkpoint's `--bpe` names."""
    from .fairseq_tokenizer import FASTBPE, SUBWORD_NMT, SUBWORD_NMT_01, codes_format

    try:
        kind = codes_format(codes)
    except (ValueError, UnicodeDecodeError) as err:
        raise ConversionError(str(err)) from None
    named = checkpoint.bpe.get("name")
    expected = {"subword_nmt": SUBWORD_NMT, "fastbpe": FASTBPE}.get(named or "", kind)
    if kind == SUBWORD_NMT_01 and expected == SUBWORD_NMT:
        return  # fairseq's subword_nmt reads either version (0.1 rules where the header is missing)
    if kind != expected:
        raise ConversionError(
            f"{codes} holds {kind} codes but {checkpoint.path.name} was preprocessed with bpe={named!r}: give "
            f"the {expected} codes file it was trained with"
        )


# fairseq's --tokenizer choices the converted tokenizer reproduces: Moses (model/tokenization_moses.py), and `space`
# (space_tokenizer.py: runs of whitespace to one space, decoding unchanged), which the whitespace split already does
REPRODUCED_TOKENIZERS = ("moses", "space")
_NOT_REPRODUCED = "Moses tokenisation / detokenisation (unless the options name it or --moses), truecasing"


def _moses_options(checkpoint: Checkpoint, force: bool) -> dict[str, Any] | None:
    """FairseqMosesTokenizer's options where the checkpoint's options name `tokenizer='moses'` (or `force`), None
    where they name none (or `space`); ConversionError for a tokenizer that cannot be reproduced (`nltk`, ...)."""
    named = checkpoint.tokenizer.get("name")
    if named is not None and named not in REPRODUCED_TOKENIZERS:
        raise ConversionError(
            f"{checkpoint.path.name} was preprocessed with fairseq's {named!r} tokenizer (tokenizer={named!r}), "
            f"which the converted tokenizer cannot reproduce (it reproduces: {', '.join(REPRODUCED_TOKENIZERS)})"
        )
    if named != "moses" and not force:
        return None
    return {key: value for key, value in checkpoint.tokenizer.items() if key.startswith("moses_")}


def _codes_kind(codes: str | Path) -> str:
    from .fairseq_tokenizer import codes_format

    return codes_format(Path(codes))


def _tied_or_derived(config: Any) -> set[str]:
    """Names our model shares with another (the stacks' embeddings) or rebuilds (none saved)."""
    names = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    if config.tie_word_embeddings:
        names.add("lm_head.weight")
    return names


# fairseq-generate's search (fairseq/sequence_generator.py, SequenceGenerator's defaults and `_generate`)
FAIRSEQ_BEAM = 5
FAIRSEQ_MAX_LEN_A, FAIRSEQ_MAX_LEN_B = 0, 200


def fairseq_search_settings(config: Any) -> dict[str, Any]:
    """fairseq's beam search as GenerationConfig fields: a sentence is done once `beam` hypotheses have ended
    (`is_finished`: ``early_stopping=True``), ``</s>`` ends a hypothesis only among the best `beam` of the
    2 · beam candidates, as in Transformers, and the first `beam` to end are the n-best list, not the best `beam`
    of all that ended (`finalize_hypos`: ``beam_search_rule="fairseq"``, model/beam_rules.py); ``--lenpen 1``: score / length^1, the length counting ``</s>``
    (`finalize_hypos`: ``(step + 1) ** len_penalty``, Transformers' `length_penalty`); ``--max-len-a 0
    --max-len-b 200``: ``</s>`` forced after ``int(a · source length + b)`` tokens, at most the decoder's positions
    - 1 (model/length_limit.py; `max_length` fits that ``</s>`` and the decoder start); ``--unkpen 0``:
    ``<unk>`` neither banned nor penalised (``--unkpen P`` is ``sequence_bias={(unk,): -P}``)."""
    return {
        "num_beams": FAIRSEQ_BEAM,
        "early_stopping": True,
        "beam_search_rule": "fairseq",
        "length_penalty": 1.0,
        "max_len_a": FAIRSEQ_MAX_LEN_A,
        "max_len_b": FAIRSEQ_MAX_LEN_B,
        "max_length": min(FAIRSEQ_MAX_LEN_B, max_positions(config, "decoder") - 1) + 2,
    }


def fairseq_generation_config(config: Any) -> Any:
    """fairseq-generate's defaults as a GenerationConfig: its search (`fairseq_search_settings`), at least one
    token before </s> (`--min-len 1`), <pad> never generated (fairseq/sequence_generator.py bans it every
    step)."""
    from transformers import GenerationConfig

    generation = GenerationConfig(
        decoder_start_token_id=config.decoder_start_token_id,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        min_new_tokens=1,
        suppress_tokens=[config.pad_token_id],
    )
    for key, value in fairseq_search_settings(config).items():
        setattr(generation, key, value)
    return generation


__all__ = [
    "Checkpoint",
    "ConversionError",
    "build_config",
    "convert_fairseq",
    "convert_state",
    "detect_layout",
    "fairseq_generation_config",
    "fairseq_search_settings",
    "fairseq_model",
    "load_checkpoint",
    "read_dictionary",
]
