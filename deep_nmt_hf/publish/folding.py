"""Fold a trained deep_nmt_hf model into a stock Transformers class that needs no custom code.

    post-LN (plain, ADMIN, DeepNorm, DS-Init)  → MarianMTModel
    pre-LN                                     → PegasusForConditionalGeneration
    post-LN with fairseq's positions           → FSMTForConditionalGeneration (models converted from fairseq:
                                                 its table, rows from padding_idx + 1, is fairseq's own)

Why these classes: both use exactly our sinusoidal table (sin half, cos half, positions from 0), scale the word
embeddings by sqrt(d_model) when `scale_embedding`, share one embedding between encoder, decoder and output (Marian
can also hold separate source / target embeddings and an untied output projection; Pegasus an untied output
projection only — other cases raise NotFoldableError), use
LayerNorm with eps 1e-5, and have no other parameters (Marian's `final_logits_bias` is set to zero). Pegasus is
pre-LN with a final LayerNorm on encoder and decoder; M2M100 is pre-LN too but uses fairseq's padding-aware
position table, so it would not be exact.

ADMIN / DeepNorm (../shared/DESIGN.md, "Folding ADMIN exactly"): sublayer i computes LN_i(ω_i ⊙ x + f_i(x)) where
x is the output of LN_{i-1}. Multiplying LN_{i-1}'s weight and bias by ω_i makes it output ω_i ⊙ x, and dividing
the input columns of f_i's first linear maps (self-attention q/k/v, cross-attention q, FFN fc1) by ω_i keeps
f_i unchanged: the stock sublayer, exact for scalar and per-dimension ω. The first sublayer of a side reads the
embeddings (no LayerNorm before it): ADMIN keeps its ω at 1; DeepNorm's α there is folded on the output side,
LN(α x + f(x)) = LN(x + f(x)/α) up to LayerNorm's epsilon (f's output projection divided by α).

`fold_to_stock` checks on a probe batch that logits agree to `atol` (1e-4, fp32) and that beam-4 outputs are
identical before it returns, and raises `FoldCheckError` otherwise. The stock classes rank beams by Transformers'
``len^α`` only: a model whose generation config asks for GNMT's length penalty (`model/length_penalty.py`) is
checked under ``len^α`` and its folded copy says ``length_penalty_form="fairseq"``, with a warning.

A converted model's search (fairseq's or zero's beam-search rule, model/beam_rules.py; a per-sentence length
limit, model/length_limit.py) is no stock class's: `fold_directory` writes the folded folder of such a model with a
``custom_generate/`` folder (model/custom_generate.py as ``generate.py`` and the modules it imports), Transformers'
door for a model's own decoding method. ``from_pretrained(FOLDER, trust_remote_code=True)`` then searches as the
converted model does (its n-best lists); a plain load runs no code and searches by Transformers' rules.

Devices and dtypes: the fold works where the model lives. The stock model, the probe batch and every tensor the
fold makes are created on the model's device (never on the default device), so a CUDA-resident model folds on its
GPU. The folding and the check run in float32 on copies: the model passed in is not changed (its dtype, device and
training mode stay as they were), and the stock model returned is float32 on the model's device (`.to(...)` it
for another dtype or device; `save_pretrained` writes it from any device).
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import (
    FSMTConfig,
    FSMTForConditionalGeneration,
    GenerationConfig,
    MarianConfig,
    MarianMTModel,
    PegasusConfig,
    PegasusForConditionalGeneration,
    PreTrainedModel,
)

from ..data.atomic import atomic_directory
from ..model import custom_generate
from ..model.beam_rules import beam_search_rule
from ..model.length_limit import length_limit_of
from ..model.length_penalty import length_penalty_form
from ..model.registry import CHOICES, FOLD_TARGETS, FOLDABLE, FSMT, VARIANT_SPECS

logger = logging.getLogger(__name__)

STOCK_LAYER_NORM_EPS = 1e-5
# Transformers' folder for a model's own decoding method (`GenerationMixin.load_custom_generate`)
CUSTOM_GENERATE_DIR = "custom_generate"
# the first Transformers release whose FSMTForConditionalGeneration decodes with its cache at the right positions:
# before it, FSMT's decoder embedded the positions of the one new token that `generate` passes, so every cached
# step read the first position's row (fixed upstream by huggingface/transformers#48289)
FSMT_CACHED_DECODING_SINCE = "5.24.0"


class NotFoldableError(ValueError):
    """The model uses a feature that no stock Transformers class can express."""


class FoldCheckError(RuntimeError):
    """The folded model does not compute the same function as the original."""


@dataclass
class FoldReport:
    max_abs_logit_diff: float
    beam_outputs_identical: bool
    stock_class: str


def check_foldable(config) -> None:
    """Raise NotFoldableError naming every feature that keeps `config` from folding into a stock class.

    What folds is an allow-list in the registry (model/registry.py), so a new form is refused until someone adds
    the fold that expresses it: the variant's spec names the stock classes it may fold into (`folds_into`; an
    unregistered model type folds into none), and `FOLDABLE` the values of each choice field that a fold keeps.
    The rules below them are the ones between fields."""
    problems = []
    target = fold_target(config)
    spec = next(
        (s for s in VARIANT_SPECS.values() if s.model_type == getattr(config, "model_type", None)), None
    )
    allowed_targets = spec.folds_into if spec is not None else ()
    if target not in allowed_targets:
        problems.append(
            f"model_type={getattr(config, 'model_type', None)!r} folds into "
            f"{', '.join(allowed_targets) or 'no stock class'} (registry spec), not {target}"
        )
    for field in CHOICES:  # a choice field without a FOLDABLE entry folds none of its values
        value, foldable = getattr(config, field, None), FOLDABLE.get(field, ())
        if value not in foldable:
            problems.append(f"{field}={value!r} (no stock equivalent; foldable: {', '.join(foldable)})")
    for side in ("encoder", "decoder"):
        if (
            getattr(config, f"{side}_reinject_input", False)
            and getattr(config, f"{side}_layer_repeats", 1) > 1
        ):
            problems.append(
                f"{side}_reinject_input=True (re-injecting the input between loops has no stock equivalent)"
            )
    if not getattr(config, "share_encoder_decoder_embeddings", True) and config.layer_norm_position == "pre":
        problems.append(
            "share_encoder_decoder_embeddings=False with layer_norm_position='pre' (PegasusForConditionalGeneration,"
            " the stock pre-LN class, has one embedding for encoder and decoder; MarianMTModel, which can hold two,"
            " is post-LN)"
        )
    problems += _converted_model_problems(config)
    problems += _stock_release_problems(target)
    if config.layer_norm_eps != STOCK_LAYER_NORM_EPS:
        problems.append(f"layer_norm_eps={config.layer_norm_eps} (stock classes use {STOCK_LAYER_NORM_EPS})")
    if problems:
        raise NotFoldableError("cannot fold into a stock Transformers class: " + "; ".join(problems))


def _converted_model_problems(config) -> list[str]:
    """What a model converted from fairseq (publish/convert_fairseq.py) may hold that the stock classes we fold
    into cannot: Marian and Pegasus rebuild their own sinusoidal table from row 0 on load, have no embedding
    LayerNorm, and no ω before the first sublayer (it would scale the positions too)."""
    problems = []
    kind = getattr(config, "position_embedding", "sinusoidal")
    if kind != "sinusoidal" and not _fsmt_positions(config):
        problems.append(
            f"position_embedding={kind!r} with layer_norm_position={config.layer_norm_position!r} (fairseq's "
            f"positions, from row {getattr(config, 'position_offset', 0)}: MarianMTModel / "
            "PegasusForConditionalGeneration rebuild their own table from row 0 on load, and "
            "FSMTForConditionalGeneration, which holds fairseq's sinusoidal table, is post-LN only)"
        )
    if getattr(config, "embedding_bias", False):
        problems.append("embedding_bias=True (no stock class adds a bias to the word embeddings)")
    if getattr(config, "layernorm_embedding", False):
        problems.append("layernorm_embedding=True (Marian and Pegasus have no LayerNorm over the embeddings)")
    if getattr(config, "admin_first_omega", False):
        problems.append(
            "admin_first_omega=True (a trained ω before the first sublayer has no stock equivalent)"
        )
    return problems


def _stock_release_problems(target: str | None) -> list[str]:
    """What the installed Transformers' stock class gets wrong: FSMT's cached decoding before
    `FSMT_CACHED_DECODING_SINCE` (its folded copy would translate differently from the model)."""
    import transformers
    from packaging.version import Version

    installed = transformers.__version__
    if target == FSMT and Version(installed) < Version(FSMT_CACHED_DECODING_SINCE):
        return [
            f"transformers {installed}'s {FSMT} decodes every cached step at the first position (fixed in "
            f"{FSMT_CACHED_DECODING_SINCE}): fold with transformers>={FSMT_CACHED_DECODING_SINCE}"
        ]
    return []


def _fsmt_positions(config) -> bool:
    """fairseq's sinusoidal table from row padding_idx + 1 in a post-LN model: what FSMTForConditionalGeneration
    computes (its SinusoidalPositionalEmbedding and make_positions are fairseq's)."""
    return (
        getattr(config, "position_embedding", "sinusoidal") == "fairseq_sinusoidal"
        and getattr(config, "position_offset", 0) == config.pad_token_id + 1
        and config.layer_norm_position == "post"
    )


def _is_shared(config) -> bool:
    return any(
        getattr(config, f"{side}_layer_repeats", 1) > 1 and getattr(config, f"{side}_share_layers", True)
        for side in ("encoder", "decoder")
    )


def stock_config(config) -> MarianConfig | PegasusConfig | FSMTConfig:
    """The stock config with the same shape and special tokens."""
    common = dict(
        vocab_size=config.vocab_size,
        d_model=config.d_model,
        encoder_layers=config.encoder_depth,
        decoder_layers=config.decoder_depth,
        encoder_attention_heads=config.encoder_attention_heads,
        decoder_attention_heads=config.decoder_attention_heads,
        encoder_ffn_dim=config.encoder_ffn_dim,
        decoder_ffn_dim=config.decoder_ffn_dim,
        max_position_embeddings=config.max_position_embeddings,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        activation_function=config.activation_function,
        scale_embedding=config.scale_embedding,
        pad_token_id=config.pad_token_id,
        eos_token_id=config.eos_token_id,
        bos_token_id=config.bos_token_id,
        decoder_start_token_id=config.decoder_start_token_id,
        forced_eos_token_id=config.eos_token_id,
        tie_word_embeddings=config.tie_word_embeddings,
    )
    from ..model.modeling_deep_nmt import target_vocab_size

    target_vocab = target_vocab_size(config)
    shared = getattr(config, "share_encoder_decoder_embeddings", True)
    if _fsmt_positions(config):  # FSMT: two vocabularies (langs only named)
        vocab = common.pop("vocab_size")
        # FSMT's tie_word_embeddings ties all three matrices (encoder, decoder, output): with a target embedding of
        # its own (fairseq's --share-decoder-input-output-embed alone) it holds the decoder's twice instead
        common["tie_word_embeddings"] = config.tie_word_embeddings and shared
        return FSMTConfig(langs=["src", "tgt"], src_vocab_size=vocab, tgt_vocab_size=target_vocab, **common)
    if config.layer_norm_position == "pre":
        return PegasusConfig(**common)
    return MarianConfig(**common, share_encoder_decoder_embeddings=shared, decoder_vocab_size=target_vocab)


def _device_of(model: nn.Module) -> torch.device:
    """The device of the model's parameters (where everything the fold makes is created)."""
    return next(model.parameters()).device


def _scale_of(sublayer: nn.Module, device: torch.device) -> torch.Tensor | None:
    """The skip-branch scale of `sublayer` as a float32 tensor on `device`, None where it is 1 (or absent)."""
    scale = sublayer.residual_scale
    if scale is None:
        return None
    value = scale.value(device).float()
    return None if torch.all(value == 1) else value


def _first_linears(sublayer: nn.Module) -> list[nn.Linear]:
    fn = sublayer.fn
    if fn is None:
        return []  # a dropped cross-attention: no linear map reads x
    if hasattr(fn, "fc1"):
        return [fn.fc1]
    if fn.is_cross_attention:
        return [fn.q_proj]  # k/v read the encoder output, not x
    return [fn.q_proj, fn.k_proj, fn.v_proj]


def _last_linear(sublayer: nn.Module) -> nn.Linear:
    fn = sublayer.fn
    return fn.fc2 if hasattr(fn, "fc2") else fn.out_proj


@torch.no_grad()
def fold_residual_scales(model: PreTrainedModel) -> PreTrainedModel:
    """A float32 copy of `model` (on its device) whose residual scales are folded into LayerNorms and linear maps
    (all scales then 1). `model` itself is not changed."""
    folded = copy.deepcopy(model).float().eval()
    device = _device_of(folded)
    base = folded.model
    for stack in (base.encoder, base.decoder):
        sublayers = stack.sublayers()
        for i, sublayer in enumerate(sublayers):
            omega = _scale_of(sublayer, device)
            if omega is None:
                continue
            if i == 0:  # no LayerNorm before it: output-side form, exact up to LayerNorm's epsilon
                if omega.numel() != 1:
                    raise NotFoldableError("a per-dimension scale on the first sublayer cannot be folded")
                last = _last_linear(sublayer)
                last.weight.div_(omega)
                last.bias.div_(omega)
            else:
                previous = sublayers[i - 1].layer_norm
                previous.weight.mul_(omega)
                previous.bias.mul_(omega)
                for linear in _first_linears(sublayer):
                    linear.weight.div_(omega.view(1, -1))
            sublayer.residual_scale = None
    return folded


def _stock_state_dict(model: PreTrainedModel) -> dict[str, torch.Tensor]:
    base = model.model
    state = {
        "model.encoder.embed_tokens.weight": base.encoder.embed_tokens.weight,
        "model.decoder.embed_tokens.weight": base.decoder.embed_tokens.weight,
        "lm_head.weight": model.lm_head.weight,
    }
    if base.decoder_embed_tokens is None:  # Marian has `shared` only with share_encoder_decoder_embeddings
        state["model.shared.weight"] = base.shared.weight
    attn_names = ("q_proj", "k_proj", "v_proj", "out_proj")
    d_model = base.config.d_model
    like = dict(
        device=base.shared.weight.device, dtype=base.shared.weight.dtype
    )  # the model's, not the default
    zeros = {"weight": torch.zeros(d_model, d_model, **like), "bias": torch.zeros(d_model, **like)}
    unit_norm = {"weight": torch.ones(d_model, **like), "bias": torch.zeros(d_model, **like)}
    for side, stock_names in (
        ("encoder", ("self_attn", "final_layer_norm")),
        ("decoder", ("self_attn", "encoder_attn", "final_layer_norm")),
    ):
        for index, layer in enumerate(getattr(base, side).layers):
            prefix = f"model.{side}.layers.{index}."
            ours = (
                [layer.self_attn, layer.ffn]
                if side == "encoder"
                else [layer.self_attn, layer.encoder_attn, layer.ffn]
            )
            for sublayer, stock_name in zip(ours, stock_names, strict=True):
                fn = sublayer.fn if sublayer is not None else None
                if stock_name == "final_layer_norm":
                    for name in ("fc1", "fc2"):
                        for p in ("weight", "bias"):
                            state[f"{prefix}{name}.{p}"] = getattr(getattr(fn, name), p)
                    norm_name = "final_layer_norm"
                else:  # a cross-attention dropped with rate 1 becomes a stock one whose projections are zero
                    for name in attn_names:
                        for p in ("weight", "bias"):
                            value = getattr(getattr(fn, name), p) if fn is not None else zeros[p]
                            state[f"{prefix}{stock_name}.{name}.{p}"] = value
                    norm_name = f"{stock_name}_layer_norm"
                for p in ("weight", "bias"):
                    value = getattr(sublayer.layer_norm, p) if sublayer is not None else unit_norm[p]
                    state[f"{prefix}{norm_name}.{p}"] = value
        final = getattr(base, side).layer_norm
        if final is not None:
            for p in ("weight", "bias"):
                state[f"model.{side}.layer_norm.{p}"] = getattr(final, p)
    return {k: v.detach().clone() for k, v in state.items()}


def stock_class(config) -> type[PreTrainedModel]:
    """The stock class a foldable config folds into (`fold_target`): Pegasus for pre-LN, Marian for post-LN, FSMT
    for post-LN with fairseq's positions."""
    classes = {
        cls.__name__: cls
        for cls in (MarianMTModel, PegasusForConditionalGeneration, FSMTForConditionalGeneration)
    }
    return classes[fold_target(config)]


def fold_target(config) -> str | None:
    """The name of the stock class `config` would fold into (registry.FOLD_TARGETS; FSMT where it holds fairseq's
    positions), or None for a `layer_norm_position` no stock class has."""
    return FSMT if _fsmt_positions(config) else FOLD_TARGETS.get(getattr(config, "layer_norm_position", None))


def probe_batch(
    config, batch_size: int = 4, seed: int = 0, device: torch.device | str | None = None
) -> dict[str, torch.Tensor]:
    """Random source sentences of different lengths (right-padded) for the fold check, on `device` (default: the
    CPU). The tokens are drawn on the CPU, so every device gets the same batch for a seed."""
    cpu = torch.device("cpu")
    generator = torch.Generator(device=cpu).manual_seed(seed)
    lengths = [max(2, 12 - 3 * i) for i in range(batch_size)]
    ids = torch.full((batch_size, max(lengths)), config.pad_token_id, dtype=torch.long, device=cpu)
    special = {config.pad_token_id, config.eos_token_id, config.decoder_start_token_id}
    for row, length in enumerate(lengths):
        tokens = torch.randint(0, config.vocab_size, (length - 1,), generator=generator, device=cpu)
        tokens = torch.tensor([t if t not in special else 2 for t in tokens.tolist()], device=cpu)
        ids[row, : length - 1] = tokens
        ids[row, length - 1] = config.eos_token_id if config.eos_token_id is not None else 2
    batch = {"input_ids": ids, "attention_mask": ids.ne(config.pad_token_id).long()}
    return {k: v.to(device if device is not None else cpu) for k, v in batch.items()}


@torch.no_grad()
def compare_models(
    original: PreTrainedModel,
    folded: PreTrainedModel,
    batch: dict[str, torch.Tensor],
    num_beams: int = 4,
    max_new_tokens: int = 16,
) -> FoldReport:
    """Max |Δlogits| on a teacher-forced pass (over each row's positions up to its first </s>) and whether beam
    search gives identical outputs. Each model reads
    the batch on its own device; both run in eval mode and get their training mode back afterwards."""
    modes = original.training, folded.training
    original.eval(), folded.eval()
    try:
        # one search for both, the one the stock classes can run: Transformers' len^α (the fold checks the function)
        search = copy.deepcopy(original.generation_config)
        search.update(num_beams=num_beams, max_length=max_new_tokens + 1, do_sample=False)
        search.length_penalty_form = "fairseq"
        batch_a = {k: v.to(_device_of(original)) for k, v in batch.items()}
        batch_b = {k: v.to(_device_of(folded)) for k, v in batch.items()}
        reference = original.generate(**batch_a, generation_config=search)
        candidate = folded.generate(**batch_b, generation_config=search).to(reference.device)
        logits_a = original(**batch_a, decoder_input_ids=reference).logits.float()
        logits_b = folded(**batch_b, decoder_input_ids=reference.to(_device_of(folded))).logits.float()
        same = reference.shape == candidate.shape and torch.equal(reference, candidate)
        # positions after a hypothesis's </s> hold padding that no score reads (FSMT masks and positions it
        # as padding, the others do not): compared up to and including each row's first </s>
        ended = (reference[:, 1:] == original.config.eos_token_id).long()
        after_end = torch.cat([torch.zeros_like(ended[:, :1]), ended.cumsum(1) - ended], dim=1) > 0
        delta = (logits_a - logits_b.to(logits_a.device)).abs().amax(dim=-1).masked_fill(after_end, 0)
        difference = delta.max().item()
    finally:
        original.train(modes[0]), folded.train(modes[1])
    return FoldReport(difference, same, type(folded).__name__)


@torch.no_grad()
def _float32_reference(model: PreTrainedModel) -> PreTrainedModel:
    """`model` (a copy: changed in place) in float32 with its sinusoidal position tables recomputed in float32: the
    weights of a bf16 / fp16 model upcast exactly, and the fixed positions at the precision the stock classes use
    (a bf16 table is rounded; the stock model computes its own in float32)."""
    from ..model.modeling_deep_nmt import SinusoidalPositions, sinusoidal_table
    from ..model.positions import OffsetPositions

    model = model.float()
    for module in model.modules():
        if isinstance(module, OffsetPositions):
            if (
                module.kind != "learned"
            ):  # fairseq's table in float32; a learned one is a weight, upcast exactly
                module.reset()
        elif isinstance(module, SinusoidalPositions):
            table = sinusoidal_table(module.num_positions, module.weight.shape[1])
            module.weight.copy_(table.to(module.weight.device))
    return model


def fold_to_stock(
    model: PreTrainedModel, batch: dict[str, torch.Tensor] | None = None, atol: float = 1e-4
) -> tuple[PreTrainedModel, FoldReport]:
    """The stock model (MarianMTModel or PegasusForConditionalGeneration) holding the same function, and the
    check report. Raises NotFoldableError for unfoldable features and FoldCheckError if the check fails.

    Works on the model's device: the stock model is built there, in float32, and the check batch (`batch`, or
    `probe_batch`) is moved there. `model` is left as it was (dtype, device, training mode): the fold and the
    check run on float32 copies, so a bf16 / fp16 model is compared through its exact float32 upcast (its
    sinusoidal position table, not a weight, recomputed in float32 as the stock classes compute theirs)."""
    config = model.config
    check_foldable(config)
    device = _device_of(model)
    reference = model
    if _is_shared(config):
        from ..model.layer_sharing import unroll

        reference = unroll(model)  # a new model on the same device and dtype
        config = reference.config
    if (
        next(reference.parameters()).dtype != torch.float32
    ):  # compared in float32, on a copy: never the caller's
        reference = _float32_reference(copy.deepcopy(reference) if reference is model else reference)
    folded = fold_residual_scales(reference)
    stock_cls = stock_class(config)
    with torch.device(device):  # built where the model lives, not on the default device
        stock = stock_cls(stock_config(config))
    stock = stock.float().eval()
    state = _stock_state_dict(folded)
    if isinstance(stock, FSMTForConditionalGeneration):  # separate embeddings, the projection in the decoder
        state.pop("model.shared.weight", None)
        state["model.decoder.output_projection.weight"] = state.pop("lm_head.weight")
        # FSMT builds no causal mask in a forward pass with use_cache=True (it expects one token at a time): a
        # teacher-forced pass (scoring, training) then sees the future. Off in its config; `generate` still
        # caches (the generation config's use_cache)
        stock.config.use_cache = False
    missing, unexpected = stock.load_state_dict(state, strict=False)
    allowed_missing = {
        "final_logits_bias",
        "model.encoder.embed_positions.weight",
        "model.decoder.embed_positions.weight",
    }
    if set(missing) - allowed_missing or unexpected:
        raise FoldCheckError(
            f"state dict mismatch: missing {sorted(set(missing) - allowed_missing)}, unexpected {unexpected}"
        )
    if hasattr(stock, "final_logits_bias"):
        stock.final_logits_bias.zero_()
    stock.generation_config = copy.deepcopy(model.generation_config)
    if length_penalty_form(stock.generation_config) == "gnmt":
        logger.warning(
            "generation_config.length_penalty_form='gnmt': the folded %s ranks beams by len^α (the stock classes "
            "have no GNMT length penalty), so its beam-search translations can differ from the original's",
            stock_cls.__name__,
        )
        stock.generation_config.length_penalty_form = "fairseq"
    _warn_of_per_sentence_search(stock.generation_config, stock_cls.__name__)
    check_batch = batch if batch is not None else probe_batch(config, device=device)
    report = compare_models(reference, stock, {k: v.to(device) for k, v in check_batch.items()})
    if report.max_abs_logit_diff > atol or not report.beam_outputs_identical:
        raise FoldCheckError(
            f"folded {report.stock_class} differs from the original: max |Δlogits| = "
            f"{report.max_abs_logit_diff:.2e} (allowed {atol:.0e}), beam outputs identical: "
            f"{report.beam_outputs_identical}"
        )
    return stock, report


def _warn_of_per_sentence_search(generation_config: GenerationConfig, stock_name: str) -> None:
    """The stock classes' `generate` knows neither a per-sentence length limit (model/length_limit.py) nor fairseq's /
    zero's beam-search rules (model/beam_rules.py): a plain load of the folded folder searches by Transformers' rules
    (with ``max_len_a=0`` the limit is the fixed `max_length` the config already carries, fairseq's defaults); say
    that ``trust_remote_code=True`` (`write_custom_generate`) or ``deep-nmt translate`` applies them."""
    limit = length_limit_of(generation_config)
    if limit is not None and limit[0] != 0:
        logger.warning(
            "generation_config.max_len_a=%s: the folded %s's generate and pipeline stop at max_length, not at each "
            "sentence's own limit, unless loaded with trust_remote_code=True (deep-nmt translate applies it)",
            limit[0],
            stock_name,
        )
    if getattr(generation_config, "beam_search_rule", None) == "zero":
        logger.warning(
            "generation_config.beam_search_rule='zero': the folded %s searches by Transformers' rules unless "
            "loaded with trust_remote_code=True",
            stock_name,
        )


def needs_custom_generate(generation_config: GenerationConfig) -> bool:
    """Whether a folded model's generation config asks for a search that stock `generate` does not run: fairseq's
    or zero's beam-search rule (model/beam_rules.py) or a per-sentence length limit (model/length_limit.py), as a
    converted model's does. Our own models' configs ask for neither."""
    return (
        beam_search_rule(generation_config) != "transformers"
        or length_limit_of(generation_config) is not None
    )


def write_custom_generate(folder: str | Path) -> Path:
    """Write ``FOLDER/custom_generate/``: model/custom_generate.py as ``generate.py`` and the model/ modules it
    imports (relatively, as Transformers copies them: torch, transformers and the standard library only), so that
    ``from_pretrained(FOLDER, trust_remote_code=True)`` searches by the generation config's rules. Returns the
    folder written."""
    from transformers.dynamic_module_utils import get_relative_import_files

    source = Path(custom_generate.__file__)
    target = Path(folder) / CUSTOM_GENERATE_DIR
    target.mkdir()
    shutil.copyfile(source, target / "generate.py")
    for path in get_relative_import_files(str(source)):
        shutil.copyfile(path, target / Path(path).name)
    return target


def fold_directory(
    model_dir: str | Path, out_dir: str | Path, atol: float = 1e-4, device: torch.device | str | None = None
) -> FoldReport:
    """`deep-nmt fold IN OUT`: load IN, fold it, check it, and write the stock model, tokenizer and generation
    config to OUT (written to a temporary sibling directory first, then renamed: never half-written), with
    ``custom_generate/`` where the generation config asks for a search stock `generate` does not run
    (`needs_custom_generate`). `device`: where to fold and check (default: the CPU)."""
    from transformers import AutoModelForSeq2SeqLM

    from ..model.tokenization_paired import load_folder_tokenizer

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    check_model_dir(model_dir)
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} exists already; choose a new output directory")
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    if device is not None:
        model = model.to(device)
    tokenizer = load_folder_tokenizer(model_dir) if _has_tokenizer(model_dir) else None
    stock, report = fold_to_stock(model, atol=atol)
    with atomic_directory(out_dir) as tmp:  # the umask's modes, renamed into place when complete
        stock.save_pretrained(tmp)
        if needs_custom_generate(stock.generation_config):  # the converted search, by trust_remote_code=True
            write_custom_generate(tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        (tmp / "fold_report.json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    return report


def check_model_dir(model_dir: str | Path) -> Path:
    """`model_dir` as a Path if it is a saved model directory, else FileNotFoundError saying what is missing."""
    model_dir = Path(model_dir)
    if not model_dir.exists():
        raise FileNotFoundError(
            f"{model_dir}: no such directory (expected a saved model directory, e.g. the --output-dir of "
            "deep-nmt train or the folder of save_pretrained)"
        )
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir}: not a saved model directory (no config.json)")
    return model_dir


def _has_tokenizer(model_dir: Path) -> bool:
    from ..model.tokenization_paired import TARGET_DIR

    files = ("tokenizer.json", "tokenizer_config.json")
    return any((model_dir / name).is_file() for name in files) or (model_dir / TARGET_DIR).is_dir()
