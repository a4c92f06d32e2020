"""`deep-nmt convert zero`: the DS-Init + merged-attention authors' TensorFlow models (bzhangGo/zero) as ours.

Read from zero's code at d97e2c2 (https://github.com/bzhangGo/zero; models/transformer_fuse.py and
models/transformer.py are unchanged since d83ed7a of 2019-08-26, the release of the EMNLP 2019 models; func.py's
only later change, 596c294, moves a minus sign in `attention_bias` and keeps its values):

* the checkpoint directory: `tf.train.Saver`'s V2 checkpoint (utils/saver.py:76, `model-STEP.*` and a `checkpoint`
  file), read by publish/tf_checkpoint.py without TensorFlow; `param.json` (run.py:250-272: HParams.to_json, one
  JSON line; zero's defaults in run.py:24-239 fill what it lacks); the vocabularies its `src_vocab_file` /
  `tgt_vocab_file` name (run.py:386-387), looked up by file name beside the checkpoint;
* vocab.py:10-42 (`Vocab`): `<pad>` = 0, `<unk>` = 1, `<eos>` = 2 inserted first, then one token a line (stripped; a
  token seen before keeps its id); `to_id` appends `<eos>` (line 73);
* models/transformer_fuse.py (and transformer.py, the 6-layer baselines' model: the same but a causal
  self-attention and a cross-attention sublayer, lines 132-170 there):
  - lines 22-31: `embedding` (shared_source_target_embedding) or `src_embedding`, × sqrt(hidden_size), plus `bias`
    (ONE variable of the model scope, read by the encoder and the decoder alike: our `embedding_bias`, copied into
    both stacks), plus `func.add_timing_signal`;
  - lines 103-116: the decoder's inputs are the target embeddings × sqrt(d) + bias, shifted right by padding with a
    ZERO vector (no start token, no bias: our `decoder_start_embedding="zero"`); at inference the first step's
    input is zeros too (`tf.cond` on an all-`<pad>` target, line 112), later steps are the previous token's;
  - lines 37-69, 122-161: post-LN layers, `x = layer_norm(x + sublayer(x))` (func.py:321-324, 289-303: LayerNorm
    with `dtype.epsilon()` = `dtype_epsilon`, 1e-8 by default: our `layer_norm_eps`); no final LayerNorm;
  - lines 166-174: the output projection reads `embedding`, `tgt_embedding` (shared_target_softmax_embedding,
    zero's default) or `softmax_embedding`, without bias;
* func.py:341-369 (`add_timing_signal`, tensor2tensor's): row p = [sin(p·ω_i)], [cos(p·ω_i)] with
  ω_i = exp(-i · ln(10⁴) / (d/2 - 1)), positions from 0: fairseq's table formula read from row 0
  (`position_embedding="fairseq_sinusoidal"`, `position_offset=0`; both compute it in float32);
* func.py:164-286 (`dot_attention`): `q_map`, `k_map`, `v_map`, `o_map` (func.py:14-65 `linear`: `W_0_0` of shape
  (in, out) and `b_0`), the encoder's fused `qkv_map` split in thirds (line 197), q scaled by (d/heads)^-1/2
  (line 222), padding masked with -1e8 (func.py:386-389). Merged attention (`fuse_mask`, lines 258-275):
  `o_map(cross(x, H) + A(v_map(x)))` with A the causal average over the real target positions (func.py:390-398;
  at inference the running sum / (t + 1), lines 262-272) and v_map SHARED with the cross-attention's values —
  exactly our MAtt, `W_o(M_a(S W_v) + context(S, H))` (model/merged_attention.py), so no field was needed for it;
* func.py:327-338 (`ffn_layer`): `enlarge`, relu, `output`;
* search.py: beam search from `<pad>` with GNMT's length penalty ((5 + len) / 6)^α over the generated tokens
  (line 169, `decode_alpha`), `<eos>` banned at the first step (lines 152-155), `beam_size`; a hypothesis that
  reaches source length + `decode_length` without `<eos>` is finished there; the search goes on until no live
  beam can beat a finished one. The generation config: `zero_search_settings` (num_beams = `beam_size`,
  `length_penalty_form="gnmt"` with α = `decode_alpha`, `early_stopping="never"`, the per-sentence limit
  `max_len_a=1`, `max_len_b=decode_length`) and `min_new_tokens=1`; what stays Transformers' own is listed in
  docs/converting.md.

Refused with one line (exit 2, nothing written): a directory without param.json or checkpoint, a `model_name`
other than transformer / transformer_fuse (rnnsearch, the AAN, RPR, L0Drop, Fixup models have other layouts),
`embed_size` != `hidden_size`, a missing vocabulary, a vocabulary whose size disagrees with its embedding, and any
model variable nothing here reads (an unknown layout). Optimizer slots (`.../Adam`, `.../Adam_1`, moving
averages) and the bookkeeping variables outside the model scope (`global_step`, `beta1_power`, ...) are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..model.tokenization_paired import PairedTokenizerFast
from .convert_fairseq import ConversionError

PAD, UNK, EOS = 0, 1, 2
SPECIALS = ("<pad>", "<unk>", "<eos>")  # vocab.py:16-22, ids 0..2
MODEL_NAMES = ("transformer", "transformer_fuse")
# run.py:24-239, the HParams defaults a param.json may leave out (those the model reads)
ZERO_DEFAULTS: dict[str, Any] = {
    "shared_source_target_embedding": False,
    "shared_target_softmax_embedding": True,
    "decode_length": 50,
    "beam_size": 4,
    "decode_alpha": 0.6,
    "hidden_size": 1000,
    "embed_size": 620,
    "dropout": 0.1,
    "relu_dropout": 0.1,
    "residual_dropout": 0.1,
    "attention_dropout": 0.1,
    "filter_size": 2048,
    "num_encoder_layer": 6,
    "num_decoder_layer": 6,
    "num_heads": 8,
    "deep_transformer_init": False,
    "dtype_epsilon": 1e-8,
    "model_name": "rnnsearch",
    "scope_name": "rnnsearch",
    "src_vocab_file": "",
    "tgt_vocab_file": "",
}
# the five WMT14 En-De models the authors released (zero's docs/depth_scale_init_and_merged_attention/README.md):
# `--released NAME` checks the shape and writes model_cards/zero/NAME.md as the folder's README.md
RELEASED: dict[str, tuple[str, int, int]] = {  # name -> (model_name, hidden_size, layers per side)
    "base": ("transformer", 512, 6),
    "big": ("transformer", 1024, 6),
    "base_fuse_init20": ("transformer_fuse", 512, 20),
    "base_fuse_init30": ("transformer_fuse", 512, 30),
    "big_fuse_init20": ("transformer_fuse", 1024, 20),
}
MAX_POSITIONS = 1024  # the timing signal has no limit; our table is rebuilt on load with this many rows


# ------------------------------------------------------------------------------------------------ reading
def read_params(directory: Path) -> dict[str, Any]:
    """param.json (its first line, as run.py:269-271 reads it) over zero's defaults."""
    path = directory / "param.json"
    if not path.is_file():
        raise ConversionError(
            f"{directory} has no param.json: give the directory of a zero model (run.py saves it)"
        )
    try:
        with path.open(encoding="utf-8") as handle:
            params = json.loads(handle.readline())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConversionError(f"{path} is not zero's param.json (one JSON line): {err}") from None
    if not isinstance(params, dict):
        raise ConversionError(f"{path} is not zero's param.json (a JSON object expected)")
    return ZERO_DEFAULTS | params


def read_vocab(path: Path) -> list[str]:
    """zero's Vocab (vocab.py:10-42): the three specials, then each stripped line not seen before, read as zero
    (Python 2) reads it: lines split on b"\\n" only and stripped of ASCII whitespace only, so U+2028, U+0085 or
    U+00A0 inside or around a token stay part of it (str.splitlines / str.strip would shift every later id)."""
    symbols = list(SPECIALS)
    seen = set(symbols)
    lines = path.read_bytes().split(b"\n")
    if lines[-1] == b"":  # the file's final newline ends the last line; it starts no empty one
        lines.pop()
    for number, raw in enumerate(lines, 1):
        try:
            token = raw.strip(b" \t\r\n\x0b\x0c").decode("utf-8")
        except UnicodeDecodeError:
            raise ConversionError(f"{path}:{number} is not UTF-8 text: {raw[:40]!r}") from None
        if token not in seen:
            seen.add(token)
            symbols.append(token)
    return symbols


def find_vocab(directory: Path, recorded: str, given: Path | None, side: str) -> Path:
    """The vocabulary file: the one given, else the file name param.json records, beside the checkpoint (the path
    it records is the training machine's)."""
    if given is not None:
        if not given.is_file():
            raise ConversionError(f"the {side} vocabulary {given} does not exist")
        return given
    name = Path(recorded).name if recorded else ""
    if not name:
        raise ConversionError(
            f"param.json names no {side} vocabulary ({side[:3]}_vocab_file); give --{side}-vocab PATH"
        )
    for candidate in (directory / name, Path(recorded)):
        if candidate.is_file():
            return candidate
    raise ConversionError(
        f"the {side} vocabulary {name} (param.json's {side[:3]}_vocab_file) is not in {directory}; copy it there or "
        f"give --{side}-vocab PATH"
    )


def _model_variables(variables: dict[str, np.ndarray], scope: str) -> dict[str, np.ndarray]:
    """The variables under the model scope, by their names below it."""
    prefix = f"{scope}/"
    return {name[len(prefix) :]: value for name, value in variables.items() if name.startswith(prefix)}


# ------------------------------------------------------------------------------------------------ config
def check_model_name(params: dict[str, Any]) -> None:
    """Only zero's Transformer layouts convert."""
    name = params["model_name"]
    if name not in MODEL_NAMES:
        raise ConversionError(
            f"param.json's model_name={name!r}: only zero's {' and '.join(MODEL_NAMES)} models convert (the "
            "DS-Init + merged-attention models and their baselines)"
        )


def build_config(params: dict[str, Any], source: list[str], target: list[str], weights: dict) -> Any:
    """Our config (DS-Init + MAtt's class for transformer_fuse, the base class for transformer)."""
    from ..model.configuration_deep_nmt import VARIANT_CONFIGS

    check_model_name(params)
    name = params["model_name"]
    if params["embed_size"] != params["hidden_size"]:
        raise ConversionError(
            f"param.json's embed_size={params['embed_size']} differs from hidden_size={params['hidden_size']}: "
            "zero's Transformer needs them equal"
        )
    shared = bool(params["shared_source_target_embedding"])
    source_name = "embedding" if shared else "src_embedding"
    target_name = "embedding" if shared else "tgt_embedding"
    for side, symbols, variable in (("source", source, source_name), ("target", target, target_name)):
        if variable not in weights:
            raise ConversionError(
                f"the checkpoint has no {params['scope_name']}/{variable} (shared_source_target_embedding="
                f"{shared}): not this model's checkpoint"
            )
        rows = weights[variable].shape[0]
        if rows != len(symbols):
            raise ConversionError(
                f"the {side} vocabulary has {len(symbols)} entries (3 specials + its lines) but the checkpoint's "
                f"{variable} has {rows} rows; give the vocabulary the model was trained with"
            )
    untied = not shared and not params["shared_target_softmax_embedding"]
    fields = dict(
        vocab_size=len(source),
        decoder_vocab_size=None if len(target) == len(source) else len(target),
        d_model=params["hidden_size"],
        encoder_layers=params["num_encoder_layer"],
        decoder_layers=params["num_decoder_layer"],
        encoder_attention_heads=params["num_heads"],
        decoder_attention_heads=params["num_heads"],
        encoder_ffn_dim=params["filter_size"],
        decoder_ffn_dim=params["filter_size"],
        max_position_embeddings=MAX_POSITIONS,
        dropout=params["residual_dropout"],
        attention_dropout=params["attention_dropout"],
        activation_dropout=params["relu_dropout"],
        activation_function="relu",
        scale_embedding=True,
        layer_norm_eps=float(params["dtype_epsilon"]),
        layer_norm_position="post",
        init_method="ds_init" if params["deep_transformer_init"] else "xavier",
        decoder_attention="merged" if name == "transformer_fuse" else "self",
        position_embedding="fairseq_sinusoidal",
        position_offset=0,
        embedding_bias=True,
        decoder_start_embedding="zero",
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=None,
        unk_token_id=UNK,
        decoder_start_token_id=PAD,  # search.py:50: decoding starts from <pad>, whose input is a zero vector
        tie_word_embeddings=not untied,
        share_encoder_decoder_embeddings=shared,
    )
    config_class = VARIANT_CONFIGS["dsinit_matt" if name == "transformer_fuse" else "base"]
    try:
        return config_class(**fields)
    except ValueError as err:
        raise ConversionError(f"param.json: {err}") from None


# ------------------------------------------------------------------------------------------------ weights
def _linear(weights: dict, prefix: str, used: set[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """func.py `linear`: W_0_0 (in, out) and b_0 -> torch's (out, in) weight and bias."""
    used.update({f"{prefix}/W_0_0", f"{prefix}/b_0"})
    try:
        weight, bias = weights[f"{prefix}/W_0_0"], weights[f"{prefix}/b_0"]
    except KeyError as err:
        raise ConversionError(
            f"the checkpoint lacks {err.args[0]}: not zero's layout for this param.json"
        ) from None
    return torch.from_numpy(np.ascontiguousarray(weight.T)), torch.from_numpy(bias)


def _projection(out: dict, ours: str, weights: dict, prefix: str, used: set[str]) -> None:
    out[f"{ours}.weight"], out[f"{ours}.bias"] = _linear(weights, prefix, used)


def _layer_norm(out: dict, ours: str, weights: dict, prefix: str, used: set[str]) -> None:
    for tf_name, torch_name in (("scale", "weight"), ("offset", "bias")):
        key = f"{prefix}/layer_norm/{tf_name}"
        if key not in weights:
            raise ConversionError(f"the checkpoint lacks {key}: not zero's layout for this param.json")
        used.add(key)
        out[f"{ours}.layer_norm.{torch_name}"] = torch.from_numpy(weights[key])


def _ffn(out: dict, ours: str, weights: dict, prefix: str, used: set[str]) -> None:
    _projection(out, f"{ours}.ffn.fn.fc1", weights, f"{prefix}/feed_forward/ffn_layer/enlarge", used)
    _projection(out, f"{ours}.ffn.fn.fc2", weights, f"{prefix}/feed_forward/ffn_layer/output", used)
    _layer_norm(out, f"{ours}.ffn", weights, f"{prefix}/feed_forward", used)


def _self_attention(out: dict, ours: str, weights: dict, prefix: str, used: set[str], d_model: int) -> None:
    """A layer's self-attention: zero's one fused (d, 3d) `qkv_map` split in thirds (func.py:196-197), `o_map`, and
    the sublayer's LayerNorm."""
    weight, qkv_bias = _linear(weights, f"{prefix}/self_attention/dot_attention/qkv_map", used)
    for i, name in enumerate(("q", "k", "v")):
        rows = slice(i * d_model, (i + 1) * d_model)
        out[f"{ours}.self_attn.fn.{name}_proj.weight"] = weight[rows].clone()
        out[f"{ours}.self_attn.fn.{name}_proj.bias"] = qkv_bias[rows].clone()
    attention = f"{prefix}/self_attention/dot_attention/o_map"
    _projection(out, f"{ours}.self_attn.fn.out_proj", weights, attention, used)
    _layer_norm(out, f"{ours}.self_attn", weights, f"{prefix}/self_attention", used)


def _attention(out: dict, ours: str, weights: dict, prefix: str, used: set[str]) -> None:
    for name in ("q", "k", "v"):
        _projection(out, f"{ours}.{name}_proj", weights, f"{prefix}/dot_attention/{name}_map", used)
    _projection(out, f"{ours}.out_proj", weights, f"{prefix}/dot_attention/o_map", used)


def convert_weights(
    weights: dict[str, np.ndarray], params: dict[str, Any], config: Any
) -> dict[str, torch.Tensor]:
    """Our state dict from the model scope's variables; raises on any model variable left unread."""
    out: dict[str, torch.Tensor] = {}
    used: set[str] = set()
    shared = config.share_encoder_decoder_embeddings

    def take(name: str) -> torch.Tensor:
        used.add(name)
        return torch.from_numpy(weights[name])

    out["model.shared.weight"] = take("embedding" if shared else "src_embedding")
    if not shared:
        out["model.decoder_embed_tokens.weight"] = take("tgt_embedding")
    if not config.tie_word_embeddings:
        if "softmax_embedding" not in weights:
            raise ConversionError(
                "the checkpoint lacks softmax_embedding (shared_target_softmax_embedding=False)"
            )
        out["lm_head.weight"] = take("softmax_embedding")
    if "bias" not in weights:
        raise ConversionError(f"the checkpoint lacks {params['scope_name']}/bias (zero's embedding bias)")
    bias = take("bias")
    out["model.encoder.embed_bias.bias"] = bias
    out["model.decoder.embed_bias.bias"] = bias.clone()
    for layer in range(config.encoder_layers):
        prefix, ours = f"encoder/layer_{layer}", f"model.encoder.layers.{layer}"
        _self_attention(out, ours, weights, prefix, used, config.d_model)
        _ffn(out, ours, weights, prefix, used)
    for layer in range(config.decoder_layers):
        prefix, ours = f"decoder/layer_{layer}", f"model.decoder.layers.{layer}"
        if config.decoder_attention == "merged":
            _attention(
                out, f"{ours}.merged_attn.fn.cross_attention", weights, f"{prefix}/fuse_attention", used
            )
            _layer_norm(out, f"{ours}.merged_attn", weights, f"{prefix}/fuse_attention", used)
        else:  # models/transformer.py: causal self-attention (fused qkv_map), then cross-attention
            _self_attention(out, ours, weights, prefix, used, config.d_model)
            _attention(out, f"{ours}.encoder_attn.fn", weights, f"{prefix}/cross_attention", used)
            _layer_norm(out, f"{ours}.encoder_attn", weights, f"{prefix}/cross_attention", used)
        _ffn(out, ours, weights, prefix, used)
    unread = sorted(name for name in weights if name not in used and not _is_slot(name, used))
    if unread:
        raise ConversionError(
            f"the checkpoint holds {params['scope_name']}/{unread[0]} ({len(unread)} unread variables in all), which "
            f"zero's {params['model_name']} with this param.json does not have: an unknown layout"
        )
    return out


def _is_slot(name: str, used: set[str]) -> bool:
    """An optimizer slot or moving average of a model variable (`W_0_0/Adam`, `.../ExponentialMovingAverage`)."""
    parts = name.split("/")
    return any("/".join(parts[:i]) in used for i in range(1, len(parts)))


# ------------------------------------------------------------------------------------------------ tokenizer
def build_zero_tokenizer(symbols: list[str], codes: Path | None) -> Any:
    """A fast tokenizer with zero's ids (`symbols`: `<pad>`, `<unk>`, `<eos>`, then the vocabulary), subword-nmt's
    BPE when `codes` is given (as publish/fairseq_tokenizer.py builds fairseq's), `<eos>` appended (vocab.py:73)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    from .fairseq_tokenizer import CONTINUATION, _internal, bpe_model

    pad, unk, eos = SPECIALS
    if codes is None:
        pieces = [s for s in symbols[3:] if s.endswith(CONTINUATION)]
        if pieces:
            raise ConversionError(
                f"the vocabulary holds BPE pieces ({pieces[0]!r}, ...): give --bpe-codes CODES (subword-nmt's codes "
                "file) so that the tokenizer splits raw text as the model's training data was split"
            )
        model = models.WordLevel({s: i for i, s in enumerate(symbols)}, unk_token=unk)
        join = None
    else:
        vocab: dict[str, int] = {}
        for i, symbol in enumerate(symbols):
            vocab.setdefault(symbol if i < 3 else _internal(symbol), i)
        try:
            model, join = bpe_model(vocab, codes, unk)
        except ValueError as err:
            raise ConversionError(str(err)) from None
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if join is not None:
        tokenizer.decoder = join
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, EOS)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=pad,
        eos_token=eos,
        unk_token=unk,
        model_max_length=MAX_POSITIONS,
        clean_up_tokenization_spaces=False,
    )


# ------------------------------------------------------------------------------------------------ the whole
def released_card(name: str, params: dict[str, Any]) -> str:
    """The model card of the released model `name`, after checking that param.json has its shape."""
    from .hub import card_dir

    if name not in RELEASED:
        raise ConversionError(f"--released {name!r}: the released models are {', '.join(RELEASED)}")
    found = (
        params["model_name"],
        params["hidden_size"],
        params["num_encoder_layer"],
        params["num_decoder_layer"],
    )
    model_name, width, layers = RELEASED[name]
    if found != (model_name, width, layers, layers):
        raise ConversionError(
            f"--released {name}: param.json has model_name={found[0]!r}, hidden_size={found[1]}, "
            f"{found[2]}+{found[3]} layers; the released {name} has {model_name!r}, {width}, {layers}+{layers}"
        )
    return (card_dir() / "zero" / f"{name}.md").read_text(encoding="utf-8")


def zero_search_settings(params: dict[str, Any]) -> dict[str, Any]:
    """search.py's beam search as GenerationConfig fields: beam `beam_size`; GNMT's penalty with α =
    `decode_alpha` (model/length_penalty.py); every `<eos>` among the 2 · beam candidates ends a hypothesis, and
    the search goes on until no live beam, at its best score over GNMT's penalty at the sentence's limit, could
    beat the worst finished one (`_not_finished`): ``beam_search_rule="zero"`` (model/beam_rules.py); a
    hypothesis holds source length (its ``<eos>`` counted) + `decode_length` tokens at most (`max_target_length`:
    ``max_len_a=1, max_len_b=decode_length``, model/length_limit.py), and one that reaches it without ``<eos>``
    counts only where no hypothesis has ended (search.py, decoding a sentence alone); `max_length` only bounds the
    longest source the positions allow."""
    return {
        "num_beams": int(params["beam_size"]),
        "length_penalty": float(params["decode_alpha"]),
        "length_penalty_form": "gnmt",
        "early_stopping": "never",
        "beam_search_rule": "zero",
        "max_len_a": 1.0,
        "max_len_b": int(params["decode_length"]),
        "max_length": MAX_POSITIONS + 1,
    }


def zero_generation_config(config: Any, params: dict[str, Any]) -> Any:
    """search.py's settings (`zero_search_settings`), decoding from `<pad>`, no `<eos>` first."""
    from transformers import GenerationConfig

    generation = GenerationConfig(
        decoder_start_token_id=PAD,
        eos_token_id=EOS,
        pad_token_id=PAD,
        min_new_tokens=1,
    )
    for key, value in zero_search_settings(params).items():
        setattr(generation, key, value)
    return generation


def zero_model(
    checkpoint_dir: str | Path,
    source_vocab: str | Path | None = None,
    target_vocab: str | Path | None = None,
    bpe_codes: str | Path | None = None,
    released: str | None = None,
    moses: tuple[str, str] | None = None,
    moses_escape: bool = True,
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(our model in eval mode, tokenizers {"": the tokenizer} (a `PairedTokenizerFast` for two vocabularies) or
    {} (none), what was converted) from a zero checkpoint directory. `moses` (source, target language): Moses
    tokenisation before and detokenisation after (the WMT14 data was Moses-tokenised, dsinit-merged-attention
    sec. 5; sacremoses with aggressive dash splits, HTML escaping unless `moses_escape` is False)."""
    from ..model.modeling_deep_nmt import VARIANT_MODELS
    from .tf_checkpoint import UnsupportedCheckpoint, checkpoint_prefix, read_checkpoint

    directory = Path(checkpoint_dir)
    if not directory.is_dir():
        raise ConversionError(
            f"{directory} is not a directory (give the directory holding param.json and the checkpoint)"
        )
    params = read_params(directory)
    check_model_name(params)
    card = released_card(released, params) if released else None
    source_path = find_vocab(
        directory, params["src_vocab_file"], Path(source_vocab) if source_vocab else None, "source"
    )
    target_path = find_vocab(
        directory, params["tgt_vocab_file"], Path(target_vocab) if target_vocab else None, "target"
    )
    if bpe_codes is not None and not Path(bpe_codes).is_file():
        raise ConversionError(f"BPE codes {bpe_codes} do not exist (give subword-nmt's codes file)")
    source, target = read_vocab(source_path), read_vocab(target_path)
    try:
        prefix = checkpoint_prefix(directory)
        variables = read_checkpoint(prefix)
    except (FileNotFoundError, UnsupportedCheckpoint) as err:
        raise ConversionError(str(err)) from None
    scope = params["scope_name"] or "model"  # models/transformer_fuse.py:202: `params.scope_name or "model"`
    weights = _model_variables(variables, scope)
    if not weights:
        raise ConversionError(
            f"{prefix} holds no variable under the scope {scope!r} (param.json's scope_name)"
        )
    config = build_config(params, source, target, weights)
    state = convert_weights(weights, params, config)
    model = VARIANT_MODELS["dsinit_matt" if config.decoder_attention == "merged" else "base"][1](config)
    missing = sorted(set(model.state_dict()) - set(state) - _tied(config))
    if missing:
        raise ConversionError(
            f"conversion left {missing[0]} unset ({len(missing)} in all): an unknown layout"
        )
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    model.eval()
    model.generation_config = zero_generation_config(config, params)
    codes = Path(bpe_codes) if bpe_codes else None
    tokenizers, why_none = {}, ""
    moses_options = _moses_options(moses, moses_escape)
    try:
        if source == target and moses_options is None:
            tokenizers = {"": build_zero_tokenizer(source, codes)}
        else:  # one vocabulary with Moses: paired with itself (PairedTokenizerFast holds the Moses steps)
            tokenizers = {
                "": PairedTokenizerFast.pair(
                    build_zero_tokenizer(source, codes),
                    build_zero_tokenizer(target, codes),
                    moses=moses_options,
                )
            }
    except ImportError as err:  # sacremoses
        raise ConversionError(str(err)) from None
    except ConversionError as err:  # BPE pieces but no codes: the model converts, without a tokenizer
        if codes is not None:
            raise
        why_none = str(err)
    provenance = {
        "converted_from": f"bzhangGo/zero {params['model_name']}: {prefix.name}",
        "param_json": {k: params[k] for k in sorted(ZERO_DEFAULTS) if k in params},
        "source_vocabulary": source_path.name,
        "target_vocabulary": target_path.name,
        "bpe_codes": codes.name if codes else None,
        "tokenizer": f"none: {why_none}"
        if not tokenizers
        else "one for both sides (one vocabulary)"
        if not isinstance(tokenizers[""], PairedTokenizerFast)
        else (
            "one vocabulary, as PairedTokenizerFast for Moses: " if source == target else "two vocabularies: "
        )
        + "PairedTokenizerFast encodes with the source (the folder's top) and decodes with target_tokenizer/",
        "moses": moses_options,
        "model_card": f"model_cards/zero/{released}.md (the released {released})" if card else None,
        "not_reproduced": (
            "truecasing" if moses_options else "Moses tokenisation / detokenisation, truecasing"
        )
        + ", subword-nmt's vocabulary filter",
    }
    if card:
        provenance["card_text"] = card
    return model, tokenizers, provenance


def convert_zero(
    checkpoint_dir: str | Path,
    output_dir: str | Path,
    source_vocab: str | Path | None = None,
    target_vocab: str | Path | None = None,
    bpe_codes: str | Path | None = None,
    released: str | None = None,
    moses: tuple[str, str] | None = None,
    moses_escape: bool = True,
) -> Path:
    """Convert into `output_dir`, which appears complete or not at all; `released` (one of RELEASED) writes that
    model's card as README.md; `moses`, `moses_escape` as `zero_model`'s."""
    from ..data.atomic import atomic_directory

    output_dir = Path(output_dir)
    if output_dir.exists():
        raise ConversionError(f"{output_dir} exists already; choose a new output directory")
    model, tokenizers, provenance = zero_model(
        checkpoint_dir, source_vocab, target_vocab, bpe_codes, released, moses, moses_escape
    )
    card = provenance.pop("card_text", None)
    with atomic_directory(output_dir) as work:
        if card:
            (work / "README.md").write_text(card, encoding="utf-8")
        model.save_pretrained(work)
        for folder, tokenizer in tokenizers.items():
            tokenizer.save_pretrained(work / folder if folder else work)
        (work / "conversion.json").write_text(json.dumps(provenance, indent=2) + "\n", encoding="utf-8")
    return output_dir


def _moses_options(moses: tuple[str, str] | None, escape: bool) -> dict[str, Any] | None:
    """`PairedTokenizerFast`'s Moses options for (source, target) languages; None without them."""
    if moses is None:
        return None
    for lang in moses:
        if not (lang.isascii() and lang.isalpha() and 2 <= len(lang) <= 3):
            raise ConversionError(
                f"--moses {lang!r}: give two language codes, the source's and the target's (e.g. --moses en de)"
            )
    source, target = moses
    return {
        "moses_source_lang": source,
        "moses_target_lang": target,
        "moses_dash_splits": True,  # tokenizer.perl -a, as the WMT14 En-De preparations (and fairseq's default)
        "moses_escape": escape,
    }


def _tied(config: Any) -> set[str]:
    names = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    if config.tie_word_embeddings:
        names.add("lm_head.weight")
    return names


__all__ = [
    "build_config",
    "build_zero_tokenizer",
    "convert_weights",
    "convert_zero",
    "read_params",
    "read_vocab",
    "released_card",
    "zero_generation_config",
    "zero_search_settings",
    "zero_model",
]
