"""Device placement: nothing is created on the default device when the model lives elsewhere (issue #48, item 1).

This machine has no GPU, so the witness is a default device that is not the model's: `MetaDefaultDevice` makes
every tensor created without an explicit `device=` a meta tensor (as `torch.set_default_device("meta")` does),
while the model and its inputs live on the CPU. Code that names the model's device (or derives from its tensors)
works; code that relies on the default device gets meta tensors and fails (meta tensors have no data to copy,
compare or read). One third-party call site is exempt, listed in `DEFAULT_DEVICE_SITES`: Transformers' beam
search builds two small tensors on the default device and moves them to the inputs' device on the same line
(`generation/utils.py`, `_beam_search`), which no meta default can pass.

The bodies below take a device and are shared with tests/training/test_cuda.py, which runs them on a GPU (fp32, bf16 and
fp16 autocast); here they run on the CPU (fp32 and bf16 autocast) so that their logic is exercised everywhere.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from factories import TINY_SHAPE, VOCAB, counting_batch, padded_batch, randomise_omegas, variant_model
from torch.utils._device import DeviceContext, _device_constructors

import deep_nmt_hf
from deep_nmt_hf.model.modeling_deep_nmt import SinusoidalPositions, sinusoidal_table
from deep_nmt_hf.publish.folding import fold_to_stock, probe_batch
from deep_nmt_hf.training.admin_profiling import admin_profile, broadcast_omegas, current_omegas, set_omegas

VARIANTS = list(deep_nmt_hf.VARIANTS)
# every variant that folds into a stock class: name -> (variant, config fields)
FOLDABLE: dict[str, tuple[str, dict[str, Any]]] = {
    "post_ln": ("base", {"layer_norm_position": "post"}),
    "pre_ln": ("base", {"layer_norm_position": "pre"}),
    "admin_trainable": ("admin", {"admin_omega": "trainable"}),
    "admin_fixed": ("admin", {"admin_omega": "fixed"}),
    "deepnorm": ("deepnorm", {}),
    "ds_init": ("base", {"init_method": "ds_init"}),
    "shared_layers": ("shared_layers", {"encoder_reinject_input": False, "decoder_reinject_input": False}),
    "deep_decoder_cad": ("deep_decoder", {"decoder_layers": 3, "cross_attention_drop_layers": 1}),
}
NO_DROPOUT = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
# autocast dtypes by name (None: plain fp32)
PRECISIONS: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}

# (file suffix, function) of third-party code allowed to create tensors on the default device (see the docstring)
DEFAULT_DEVICE_SITES = {(os.path.join("transformers", "generation", "utils.py"), "_beam_search")}
_TORCH_DIR = os.path.dirname(torch.__file__)


def _calling_site() -> tuple[str, str]:
    """(file, function) of the first frame outside torch and this module: who asked for the tensor."""
    frame = sys._getframe(2)
    while frame is not None and (
        frame.f_code.co_filename.startswith(_TORCH_DIR) or frame.f_code.co_filename == __file__
    ):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_code.co_name) if frame is not None else ("", "")


class MetaDefaultDevice(DeviceContext):
    """`torch.set_default_device("meta")` as a context, except at `DEFAULT_DEVICE_SITES` (which get the CPU)."""

    def __init__(self) -> None:
        super().__init__("meta")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _device_constructors() and kwargs.get("device") is None:
            filename, function = _calling_site()
            exempt = any(filename.endswith(s) and function == f for s, f in DEFAULT_DEVICE_SITES)
            if not exempt:
                kwargs["device"] = self.device
        return func(*args, **kwargs)


def test_the_witness_turns_default_device_tensors_into_meta_tensors() -> None:
    with MetaDefaultDevice():
        assert torch.zeros(2).device.type == "meta"
        assert torch.zeros(2, device="cpu").device.type == "cpu"
        assert torch.ones(3).new_zeros(2).device.type == "meta"
        with pytest.raises(NotImplementedError):  # what code relying on the default device then meets
            torch.tensor([1.0]).to("cpu")
    assert torch.zeros(2).device.type == "cpu"


# ---------------------------------------------------------------------------------------------------------------
# bodies shared with tests/training/test_cuda.py (each takes the device it runs on)


def autocast(device: torch.device, precision: str):
    """torch.autocast for `precision` on `device` ("fp32": no autocast)."""
    dtype = PRECISIONS[precision]
    return contextlib.nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


def on(device: torch.device | str, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.to(device) for t in tensors)


def train_step_check(
    variant: str,
    device: torch.device | str,
    precision: str = "fp32",
    seed: int = 0,
    guard=contextlib.nullcontext,
) -> float:
    """One training step of a tiny `variant` on `device` under `precision`'s autocast (fp16: with a GradScaler):
    the loss (with the deep decoder's DDR / ALD losses) and every gradient are finite and on `device`. `guard`:
    a context around the forward, backward and step (the model and batch are made before it)."""
    device = torch.device(device)
    model = variant_model(variant, seed=seed).to(device).train()
    ids, mask, labels = on(device, *counting_batch([7, 5, 4], seed=seed))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    with guard():
        with autocast(device, precision):
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
        (scaler.scale(out.loss) if scaler is not None else out.loss).backward()
        if scaler is not None:
            scaler.unscale_(optimizer)
    loss = out.loss
    assert loss.device.type == device.type and torch.isfinite(loss), (variant, precision, loss)
    if model.config.ddr_loss_weight > 0:
        assert torch.isfinite(out.ddr_loss) and torch.isfinite(out.ald_loss), (out.ddr_loss, out.ald_loss)
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert len(grads) > len(list(model.parameters())) // 2, (variant, sorted(grads))
    for name, grad in grads.items():
        assert grad.device.type == device.type and torch.isfinite(grad).all(), (variant, precision, name)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return loss.item()


def generate_cache_check(
    model: torch.nn.Module,
    device: torch.device | str,
    num_beams: int,
    gnmt: bool = False,
    atol: float = 1e-5,
    precision: str = "fp32",
    guard=contextlib.nullcontext,
) -> torch.Tensor:
    """`generate` with and without the cache on `device` (greedy or beam; `gnmt`: GNMT's length penalty) gives
    equal sequences and scores within `atol` (beam: `sequences_scores`; greedy: every step's scores). Returns the
    sequences. `guard`: a context around the `generate` calls."""
    device = torch.device(device)
    ids, mask = on(device, *padded_batch([7, 5, 3], seed=1))
    settings = dict(
        max_new_tokens=8,
        num_beams=num_beams,
        do_sample=False,
        return_dict_in_generate=True,
        output_scores=True,
    )
    saved = model.generation_config
    if gnmt:  # the model's generate applies the form its generation config names
        settings.update(length_penalty=0.6)
        model.generation_config = copy.deepcopy(saved)
        model.generation_config.length_penalty_form = "gnmt"
    outputs = {}
    try:
        for use_cache in (True, False):
            with guard(), torch.no_grad(), autocast(device, precision):
                outputs[use_cache] = model.generate(
                    input_ids=ids, attention_mask=mask, use_cache=use_cache, **settings
                )
    finally:
        model.generation_config = saved
    cached, uncached = outputs[True], outputs[False]
    assert cached.sequences.device.type == device.type
    assert torch.equal(cached.sequences, uncached.sequences), (cached.sequences, uncached.sequences)
    if num_beams > 1:
        torch.testing.assert_close(cached.sequences_scores, uncached.sequences_scores, atol=atol, rtol=0)
    else:
        torch.testing.assert_close(
            torch.stack(cached.scores), torch.stack(uncached.scores), atol=atol, rtol=0
        )
    return cached.sequences


def admin_profile_check(
    device: torch.device | str, seed: int = 3, guard=contextlib.nullcontext
) -> dict[str, list[float]]:
    """ADMIN profiling of a tiny model on `device`: ω written into the model, read back by `current_omegas`,
    rewritten by `set_omegas`; `broadcast_omegas` is a no-op outside torch.distributed. Returns the ω. `guard`: a
    context around the calls of admin.py."""
    device = torch.device(device)
    model = variant_model("admin", seed=seed, **NO_DROPOUT).to(device)
    ids, mask, labels = on(device, *counting_batch([8, 6, 5, 3], seed=2))
    with guard():
        omegas = admin_profile(model, {"input_ids": ids, "attention_mask": mask, "labels": labels})
        current = current_omegas(model)
        set_omegas(model, {side: [1.5] * len(values) for side, values in omegas.items()})
        broadcast_omegas(model)
        read = current_omegas(model)
    assert all(len(values) > 1 and values[0] == 1.0 for values in omegas.values()), omegas
    assert current.keys() == omegas.keys()
    for side, values in omegas.items():  # pytest >= 9.1: approx takes no nested dict
        assert current[side] == pytest.approx(values, rel=1e-6), side
    assert all(v == pytest.approx(1.5) for values in read.values() for v in values[1:]), read
    return omegas


def foldable_model(name: str, seed: int = 0) -> torch.nn.Module:
    """A tiny model of FOLDABLE[name] (ADMIN ω randomised, so that folding them matters), on the CPU."""
    variant, fields = FOLDABLE[name]
    model = variant_model(variant, seed=seed, **NO_DROPOUT | fields)
    randomise_omegas(model, torch.Generator().manual_seed(seed))
    return model


def fold_check(
    model: torch.nn.Module,
    device: torch.device | str,
    dtype: torch.dtype = torch.float32,
    guard=contextlib.nullcontext,
):
    """Fold a copy of `model` moved to `device` and cast to `dtype`: the fold passes its own check, the stock
    model is float32 on `device`, and the copy passed in keeps its dtype, device and training mode. Returns the
    stock model. `guard`: a context around `fold_to_stock`."""
    device = torch.device(device)
    placed = copy.deepcopy(model).to(device=device, dtype=dtype).train()
    with guard():
        stock, report = fold_to_stock(placed)
    assert report.max_abs_logit_diff <= 1e-4 and report.beam_outputs_identical, report
    parameter = next(stock.parameters())
    assert parameter.device.type == device.type and parameter.dtype == torch.float32
    assert all(p.dtype == dtype and p.device.type == device.type for p in placed.parameters())
    assert placed.training
    return stock


def attention_backends_check(
    variant: str, device: torch.device | str, atol: float = 1e-5, precision: str = "fp32"
) -> float:
    """Logits of eager and SDPA attention agree within `atol` on the real target positions of a padded batch."""
    device = torch.device(device)
    model = variant_model(variant, seed=3, **NO_DROPOUT).to(device)
    ids, mask = on(device, *padded_batch([7, 5], seed=1))
    decoder_ids = torch.randint(2, 40, (2, 6), generator=torch.Generator().manual_seed(0)).to(device)
    decoder_mask = torch.ones_like(decoder_ids)
    decoder_mask[1, 4:] = 0
    logits = {}
    for implementation in ("eager", "sdpa"):
        model.set_attn_implementation(implementation)
        with torch.no_grad(), autocast(device, precision):
            logits[implementation] = model(
                input_ids=ids,
                attention_mask=mask,
                decoder_input_ids=decoder_ids,
                decoder_attention_mask=decoder_mask,
            ).logits.float()
    gap = (logits["sdpa"] - logits["eager"])[decoder_mask.bool()].abs().max().item()
    assert gap <= atol, (variant, gap)
    return gap


def length_limit_check(variant: str, device: torch.device | str, num_beams: int = 4) -> list[list[int]]:
    """The per-sentence limit (model/length_limit.py, max_len_a=1, max_len_b=2: binds on a random model) on
    `device`: each sentence's hypothesis holds at most n + 2 tokens and </s>, the limit binds for one at least,
    and each sentence decodes alone as in the batch. Returns the batch's outputs without padding."""
    device = torch.device(device)
    model = variant_model(variant, seed=2, **NO_DROPOUT).to(device)
    model.generation_config.max_len_a, model.generation_config.max_len_b = 1.0, 2
    lengths = [9, 2, 5, 3]
    ids, mask = on(device, *padded_batch(lengths, seed=5))
    pad, eos = model.config.pad_token_id, model.config.eos_token_id
    with torch.no_grad():
        batched = model.generate(input_ids=ids, attention_mask=mask, num_beams=num_beams)
        together = [[t for t in row.tolist() if t != pad] for row in batched]
        for row, n in enumerate(lengths):
            alone = model.generate(input_ids=ids[row : row + 1, :n], num_beams=num_beams)
            assert [t for t in alone[0].tolist() if t != pad] == together[row], (variant, row)
    assert all(len(row) <= n + 3 for row, n in zip(together, lengths, strict=True))
    assert any(len(row) == n + 3 and row[-1] == eos for row, n in zip(together, lengths, strict=True))
    return together


def converted_fields_check(
    device: torch.device | str, precision: str = "fp32", atol: float = 1e-5, guard=contextlib.nullcontext
) -> None:
    """The fields the converters brought in (zero's `embedding_bias`, `decoder_start_embedding="zero"` and a
    target vocabulary of its own, `decoder_vocab_size`) on `device`: greedy and beam-4 `generate` with and without
    the cache agree (generate_cache_check), and the logits equal the CPU's (fp32: `atol`; autocast: only the
    sequences' shape is compared, the CPU being fp32)."""
    fields = dict(
        NO_DROPOUT,
        embedding_bias=True,
        decoder_start_embedding="zero",
        tie_word_embeddings=False,
        share_encoder_decoder_embeddings=False,
    )
    model = variant_model("dsinit_matt", seed=4, vocab_size=VOCAB + 8, decoder_vocab_size=VOCAB, **fields)
    with torch.no_grad():  # the biases start at zero: make them matter
        for name, parameter in model.named_parameters():
            if "embed_bias" in name:
                parameter.normal_(0, 0.5)
    reference = copy.deepcopy(model)
    model = model.to(device)
    for beams in (1, 4):
        sequences = generate_cache_check(model, device, beams, atol=atol, precision=precision, guard=guard)
        assert int(sequences.max()) < VOCAB  # only the target vocabulary is generated
    ids, mask = padded_batch([6, 4], seed=7)
    decoder = torch.full((2, 3), 5)
    with guard(), torch.no_grad(), autocast(torch.device(device), precision):
        logits = model(*on(device, ids, mask), decoder_input_ids=on(device, decoder)[0]).logits
    assert logits.shape[-1] == VOCAB
    if precision == "fp32":
        expected = reference(ids, mask, decoder_input_ids=decoder).logits
        torch.testing.assert_close(logits.float().cpu(), expected, atol=atol, rtol=0)


def converted_pipeline_check(device: torch.device | str, tmp_path: Path) -> list[str]:
    """The converters' tokenizers around a model on `device`: zero's two vocabularies (PairedTokenizerFast) and
    fairseq's Moses tokenizer (FairseqMosesTokenizer) in `pipeline("translation", device=...)` give the CPU's
    translations of the fixtures' raw text. Returns the device's translations."""
    import json

    from transformers import pipeline

    from deep_nmt_hf.cli import main

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    zero, moses = fixtures / "zero" / "fuse_separate", fixtures / "fairseq" / "moses"
    argv = {
        "zero": [
            "convert",
            "zero",
            str(zero),
            str(tmp_path / "zero"),
            "--bpe-codes",
            str(zero / "bpe.codes"),
        ],
        "moses": ["convert", "fairseq", str(moses / "moses_args.pt"), str(tmp_path / "moses")],
    }
    argv["moses"] += ["--bpe-codes", str(moses / "bpecodes")]
    raw = {
        "zero": json.loads((zero / "reference.json").read_text())["tokenizer"]["raw"],
        "moses": json.loads((moses / "moses_args.json").read_text())["text"]["sentences"],
    }
    if importlib.util.find_spec("sacremoses") is None:  # a device without the convert extra: zero's alone
        del argv["moses"]
    texts: list[str] = []
    for name, args in argv.items():
        assert main(args) == 0, name
        translations = {}
        for where in ("cpu", device):
            translate = pipeline(
                "translation", model=str(tmp_path / name), device=where, trust_remote_code=True
            )
            translations[str(where)] = [
                r[0]["translation_text"]
                for r in (translate(s, num_beams=2, max_new_tokens=8) for s in raw[name])
            ]
        assert translations["cpu"] == translations[str(device)] and all(translations["cpu"]), name
        texts += translations[str(device)]
    return texts


def export_check(name: str, device: torch.device | str, tmp_path: Path) -> Path:
    """CTranslate2 export (`export.export_model`, in memory) of a tiny FOLDABLE[name] model on `device`: the model
    is left on its device and the exported model translates (parity with Transformers: tests/publish/test_ctranslate2.py)."""
    import ctranslate2

    from deep_nmt_hf.data.synthetic import generate_pairs
    from deep_nmt_hf.data.tokenization import train_tokenizer
    from deep_nmt_hf.publish.export import export_model
    from deep_nmt_hf.training import build_config, resolve_variant

    pairs = generate_pairs(200, seed=0)
    tokenizer = train_tokenizer([t for pair in pairs for t in pair], vocab_size=120, model_max_length=64)
    variant, fields = FOLDABLE[name]
    config_class, model_class = resolve_variant(variant)
    shape = TINY_SHAPE | NO_DROPOUT | dict(max_position_embeddings=64) | fields
    config = build_config(tokenizer, config_class, max_source_length=64, max_target_length=64, **shape)
    torch.manual_seed(0)
    model = model_class(config).eval().to(device)
    out = export_model(model, tokenizer, tmp_path / "ct2")
    assert next(model.parameters()).device.type == torch.device(device).type
    sources = [source for source, _ in pairs[:4]]
    translator = ctranslate2.Translator(str(out), device="cpu")
    tokens = [tokenizer.convert_ids_to_tokens(row) for row in tokenizer(sources)["input_ids"]]
    results = translator.translate_batch(
        tokens, beam_size=4, max_decoding_length=10, min_decoding_length=0, return_end_token=True
    )
    assert len(results) == len(sources) and all(result.hypotheses[0] for result in results)
    return out


# ---------------------------------------------------------------------------------------------------------------
# the witness: nothing the package creates lands on the default device


@pytest.mark.parametrize("name", list(FOLDABLE))
def test_fold_builds_everything_on_the_models_device(name) -> None:
    """Old code: the stock model, the probe batch and the zero / unit tensors were default-device (meta here)."""
    model = foldable_model(name)
    stock = fold_check(model, "cpu", guard=MetaDefaultDevice)
    assert all(t.device.type == "cpu" for t in [*stock.parameters(), *stock.buffers()])


def test_fold_leaves_a_bf16_model_bf16_and_compares_in_fp32() -> None:
    """Old code: `compare_models(model.float(), ...)` converted the caller's model to fp32 in place."""
    model = foldable_model("admin_trainable", seed=1)
    placed = copy.deepcopy(model).to(torch.bfloat16).train()
    stock, report = fold_to_stock(placed)
    assert report.beam_outputs_identical and report.max_abs_logit_diff <= 1e-4
    assert {p.dtype for p in placed.parameters()} == {torch.bfloat16} and placed.training
    assert next(stock.parameters()).dtype == torch.float32
    # the fold is that of the exact fp32 upcast of the bf16 weights (the fixed position table recomputed in fp32)
    upcast = copy.deepcopy(placed).float()
    with torch.no_grad():
        for module in upcast.modules():
            if isinstance(module, SinusoidalPositions):
                module.weight.copy_(sinusoidal_table(*module.weight.shape))
    upcast, _ = fold_to_stock(upcast)
    for (key, a), b in zip(stock.state_dict().items(), upcast.state_dict().values(), strict=True):
        assert torch.equal(a, b), key


def test_fold_does_not_change_its_argument() -> None:
    """Old code: the model came back in eval mode, and a bf16 model came back fp32 (even with a loose check)."""
    model = foldable_model("admin_fixed", seed=2).train()
    fold_to_stock(model)
    assert model.training
    half = copy.deepcopy(model).to(torch.bfloat16)
    fold_to_stock(half, atol=1.0)
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16} and half.training


def test_probe_batch_is_made_where_asked_and_the_same_everywhere() -> None:
    config = foldable_model("post_ln").config
    with MetaDefaultDevice():
        batch = probe_batch(config, device="cpu")
    assert all(t.device.type == "cpu" for t in batch.values())
    assert all(torch.equal(batch[k], v) for k, v in probe_batch(config).items())


def test_unroll_builds_on_the_models_device() -> None:
    from deep_nmt_hf.model.layer_sharing import unroll

    model = variant_model("shared_layers", **NO_DROPOUT)
    with MetaDefaultDevice():
        unrolled = unroll(model)
    assert {p.device.type for p in unrolled.parameters()} == {"cpu"}
    ids, mask = padded_batch([6, 4])
    with torch.no_grad():
        torch.testing.assert_close(
            unrolled(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits,
            model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits,
        )


@pytest.mark.parametrize("variant", VARIANTS)
def test_training_forward_and_backward_create_nothing_on_the_default_device(variant) -> None:
    """Every variant, the deep decoder with its CAD / DDR / ALD losses: forward, losses and backward."""
    train_step_check(variant, "cpu", guard=MetaDefaultDevice)


@pytest.mark.parametrize("variant", VARIANTS)
def test_generation_creates_nothing_on_the_default_device(variant) -> None:
    """Greedy and beam-4, with and without the cache (cache slots, MAtt's running average, CAD's empty cross slot,
    DLCL's history), and GNMT's length-penalty beam search."""
    model = variant_model(variant, **NO_DROPOUT)
    for beams in (1, 4):
        generate_cache_check(model, "cpu", beams, guard=MetaDefaultDevice)
    generate_cache_check(model, "cpu", 4, gnmt=True, guard=MetaDefaultDevice)


def test_admin_profiling_creates_nothing_on_the_default_device() -> None:
    admin_profile_check("cpu", guard=MetaDefaultDevice)


def test_current_omegas_of_a_deepnorm_model_reads_alpha_without_the_default_device() -> None:
    """Old code: DeepNorm's α was read through a tensor made on the default device (meta here: no `.item()`)."""
    model = variant_model("deepnorm")
    with MetaDefaultDevice():
        omegas = current_omegas(model)
    assert omegas["encoder"][0] == pytest.approx(model.model.encoder.sublayers()[0].residual_scale.alpha)


def test_averaging_works_whatever_the_default_device_and_keeps_bf16(tmp_path) -> None:
    from safetensors.torch import load_file

    from deep_nmt_hf.training.averaging import average_checkpoints, average_into

    for step, seed in ((1, 0), (2, 1)):
        variant_model("base", seed=seed).to(torch.bfloat16).save_pretrained(tmp_path / f"checkpoint-{step}")
    model = variant_model("base", seed=5)
    with MetaDefaultDevice():
        out = average_checkpoints(tmp_path, last=2)
        assert average_into(model, tmp_path, last=2, epochs=False) == ["checkpoint-1", "checkpoint-2"]
    weights = load_file(out / "model.safetensors")
    assert {w.dtype for w in weights.values() if w.is_floating_point()} == {torch.bfloat16}
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    key = "model.shared.weight"
    first = load_file(tmp_path / "checkpoint-1" / "model.safetensors")[key].double()
    second = load_file(tmp_path / "checkpoint-2" / "model.safetensors")[key].double()
    torch.testing.assert_close(weights[key], ((first + second) / 2).to(torch.bfloat16), atol=0, rtol=0)


# ---------------------------------------------------------------------------------------------------------------
# the tests/training/test_cuda.py bodies on the CPU (fp32 and bf16 autocast)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_cuda_bodies_train_on_the_cpu(precision) -> None:
    for variant in ("admin", "deep_decoder"):
        train_step_check(variant, "cpu", precision)


def test_cuda_bodies_generate_fold_profile_and_attention_on_the_cpu() -> None:
    model = variant_model("dsinit_matt", **NO_DROPOUT)
    generate_cache_check(model, "cpu", 4, precision="bf16", atol=1e-2)
    first, second = admin_profile_check("cpu"), admin_profile_check("cpu")
    assert first.keys() == second.keys()
    for side in first:
        assert first[side] == pytest.approx(second[side]), side
    fold_check(foldable_model("deepnorm"), "cpu", torch.bfloat16)
    attention_backends_check("dlcl", "cpu")
    length_limit_check("deep_decoder", "cpu")


def test_converted_fields_create_nothing_on_the_default_device() -> None:
    """zero's fields (embedding bias, zero-vector decoder start, a target vocabulary of its own) build their
    tensors on the model's device."""
    converted_fields_check("cpu", guard=MetaDefaultDevice)


def test_cuda_bodies_of_the_converters_on_the_cpu(tmp_path) -> None:
    # bf16 autocast: cached and uncached steps differ by a bf16 ulp of the logits (measured 0.0156 at |logit| < 4)
    converted_fields_check("cpu", precision="bf16", atol=5e-2)
    assert converted_pipeline_check("cpu", tmp_path)


def test_cuda_bodies_export_on_the_cpu(tmp_path) -> None:
    pytest.importorskip("ctranslate2", reason="the ctranslate2 extra is not installed")
    export_check("pre_ln", "cpu", tmp_path)
