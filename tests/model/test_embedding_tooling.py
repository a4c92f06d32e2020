"""The shared embedding as a registered submodule (issue 25): the stacks' `embed_tokens` are DeepNMTModel's
`shared` (or `decoder_embed_tokens`) module itself, so PEFT, ONNX export, torch.export and accelerate's device
maps see it, while checkpoints keep their layout (each tensor once, old checkpoints load unchanged)."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import pytest
import torch
from factories import counting_batch, padded_batch, variant_model
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModel, AutoModelForSeq2SeqLM

import deep_nmt_hf

VARIANTS = list(deep_nmt_hf.VARIANTS)
# (share_encoder_decoder_embeddings, tie_word_embeddings) beyond the default (True, True)
UNTIED = [(False, True), (True, False), (False, False)]


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.data_ptr() == b.data_ptr()


def logits(model, seed: int = 0) -> torch.Tensor:
    ids, mask = padded_batch([6, 4], seed=seed)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits


def assert_ties(model) -> None:
    """Encoder reads `shared`, the decoder its target embedding, a tied head shares the target's weight."""
    base = model.model
    target = base.shared if base.decoder_embed_tokens is None else base.decoder_embed_tokens
    assert base.encoder.embed_tokens is base.shared and base.decoder.embed_tokens is target
    assert same(model.lm_head.weight, target.weight) is model.config.tie_word_embeddings


def old_layout(model) -> dict[str, torch.Tensor]:
    """The state dict as checkpoints held it before the stacks registered their embedding: `model.shared.weight`
    (plus `model.decoder_embed_tokens.weight` when untied), `lm_head.weight` only when not tied."""
    dropped = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    if model.config.tie_word_embeddings:
        dropped.add("lm_head.weight")
    return {k: v.contiguous() for k, v in model.state_dict().items() if k not in dropped}


def saved_keys(directory: Path) -> set[str]:
    with safe_open(str(directory / "model.safetensors"), "pt") as handle:
        return set(handle.keys())


# ---- structure and checkpoints --------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_stacks_register_the_shared_embedding_itself(variant: str) -> None:
    model = variant_model(variant)
    assert_ties(model)
    names = [name for name, _ in model.named_modules(remove_duplicate=False) if name.endswith("embed_tokens")]
    assert names == ["model.encoder.embed_tokens", "model.decoder.embed_tokens"]
    assert sum(p is model.model.shared.weight for p in model.parameters()) == 1  # trained once
    assert {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"} <= set(
        model.state_dict()
    )


@pytest.mark.parametrize(
    ("variant", "share", "tie"), [(v, True, True) for v in VARIANTS] + [("base", *st) for st in UNTIED]
)
def test_checkpoints_store_each_tensor_once_and_old_ones_load(
    tmp_path: Path, variant: str, share: bool, tie: bool
) -> None:
    """save_pretrained writes the old layout (the stacks' and a tied head's duplicates dropped); a checkpoint
    written with the old layout by hand loads without missing keys and with the ties restored."""
    model = variant_model(variant, seed=3, share_encoder_decoder_embeddings=share, tie_word_embeddings=tie)
    old = old_layout(model)
    model.save_pretrained(tmp_path / "new")
    assert saved_keys(tmp_path / "new") == set(old)
    model.config.save_pretrained(tmp_path / "old")
    save_file(old, str(tmp_path / "old" / "model.safetensors"), metadata={"format": "pt"})
    for directory in ("new", "old"):
        loaded, info = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / directory, output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"]
        assert_ties(loaded.eval())
        torch.testing.assert_close(logits(loaded), logits(model), rtol=0, atol=0)


def test_bf16_load_and_the_base_model_keep_the_ties(tmp_path: Path) -> None:
    """A bf16 load ties as a float32 one; DeepNMTModel alone (AutoModel) saves `shared` once and ties on load."""
    model = variant_model("base", seed=4)
    model.save_pretrained(tmp_path / "lm")
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "lm", dtype=torch.bfloat16)
    assert_ties(loaded)
    assert loaded.model.shared.weight.dtype == torch.bfloat16
    model.model.save_pretrained(tmp_path / "base")
    assert not any("embed_tokens" in key for key in saved_keys(tmp_path / "base"))
    base = AutoModel.from_pretrained(tmp_path / "base")
    assert base.encoder.embed_tokens is base.shared and base.decoder.embed_tokens is base.shared
    assert torch.equal(base.shared.weight, model.model.shared.weight)


@pytest.mark.parametrize("tie", [True, False])
def test_resuming_from_a_checkpoint_ties_without_missing_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tie: bool
) -> None:
    """The Trainer resumes with load_state_dict(strict=False), where the stacks' `embed_tokens` (and a tied head)
    are missing by design: DeepNMTTrainer ties them and logs no "missing keys" warning."""
    import transformers.trainer
    from transformers import Seq2SeqTrainingArguments

    from deep_nmt_hf.training.trainer import DeepNMTTrainer

    warned: list[str] = []
    monkeypatch.setattr(
        transformers.trainer.logger, "warning", lambda message, *a, **k: warned.append(message)
    )
    model = variant_model("base", seed=5, tie_word_embeddings=tie)
    model.save_pretrained(tmp_path / "checkpoint")
    fresh = variant_model("base", seed=6, tie_word_embeddings=tie)
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none")
    DeepNMTTrainer(model=fresh, args=args)._load_from_checkpoint(str(tmp_path / "checkpoint"))
    assert not [message for message in warned if "missing keys" in message]
    assert_ties(fresh)
    torch.testing.assert_close(logits(fresh), logits(model), rtol=0, atol=0)


def test_set_input_embeddings_reaches_both_stacks() -> None:
    """Assigning `shared` / `decoder_embed_tokens` (as set_input_embeddings, resizing and PEFT do) rewires the
    stacks."""
    model = variant_model("base", share_encoder_decoder_embeddings=False)
    source, target = torch.nn.Embedding(48, 32), torch.nn.Embedding(48, 32)
    model.set_input_embeddings(source)
    model.model.decoder_embed_tokens = target
    assert model.model.encoder.embed_tokens is source and model.model.decoder.embed_tokens is target


# ---- PEFT ------------------------------------------------------------------------------------------------------

PEFT_SETUPS = {
    "lora_qkv": dict(target_modules=["q_proj", "k_proj", "v_proj"]),
    "lora_shared": dict(target_modules=["shared"]),
    "save_shared": dict(target_modules=["q_proj"], modules_to_save=["shared"]),
}


def peft_trained(model, steps: int = 3, **lora: object):
    """A LoRA PeftModel of a copy of `model` after `steps` AdamW steps on the counting task, in eval mode."""
    peft = pytest.importorskip("peft")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        tuned = peft.get_peft_model(copy.deepcopy(model), peft.LoraConfig(r=4, lora_alpha=8, **lora))
    ids, mask, labels = counting_batch([6, 4])
    optimizer = torch.optim.AdamW([p for p in tuned.parameters() if p.requires_grad], lr=1e-2)
    tuned.train()
    for _ in range(steps):
        tuned(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return tuned.eval()


@pytest.mark.parametrize("setup", PEFT_SETUPS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_peft_training_changes_the_logits_and_merge_reproduces_them(variant: str, setup: str) -> None:
    """LoRA on q/k/v, LoRA on `shared`, `shared` in modules_to_save: training moves the logits (before, the
    adapters of `shared` never reached the stacks) and merge_and_unload gives the PeftModel's logits. LoRA on
    `shared` untied from the head here: with a tied head see the next test."""
    model = variant_model(variant, tie_word_embeddings=setup != "lora_shared")
    tuned = peft_trained(model, **PEFT_SETUPS[setup])
    tuned_logits = logits(tuned)
    assert (tuned_logits - logits(model)).abs().max() > 1e-2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        merged = tuned.merge_and_unload()
    base = merged.model
    assert base.encoder.embed_tokens is base.shared and base.decoder.embed_tokens is base.shared
    assert type(base.shared) is torch.nn.Embedding
    torch.testing.assert_close(logits(merged), tuned_logits, rtol=0, atol=1e-5)


def test_lora_on_shared_with_a_tied_head_merges_after_untying_it() -> None:
    """With a tied head, LoRA on `shared` adapts the embedding lookups only, while merging adds the update to
    the one weight (the head included): untie the head first (PEFT's advice for tied embeddings)."""
    model = variant_model("dlcl")
    tuned = peft_trained(model, target_modules=["shared"])
    tuned_logits = logits(tuned)
    assert (tuned_logits - logits(model)).abs().max() > 1e-2
    head = tuned.get_base_model().lm_head
    head.weight = torch.nn.Parameter(head.weight.detach().clone())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        merged = tuned.merge_and_unload()
    torch.testing.assert_close(logits(merged), tuned_logits, rtol=0, atol=1e-5)


def test_lora_on_both_untied_embeddings_saves_and_reloads(tmp_path: Path) -> None:
    """share_encoder_decoder_embeddings=False: LoRA on `shared` and `decoder_embed_tokens` reaches the encoder
    and decoder; the adapter file holds each adapter once and reloads to the same logits. PEFT 0.21 warns of
    "missing adapter keys" on reload for the stacks' names of the same modules (`*.embed_tokens.lora_*`): they
    are loaded through `shared` / `decoder_embed_tokens`, and no other key may be reported."""
    peft = pytest.importorskip("peft")
    model = variant_model("base", share_encoder_decoder_embeddings=False, tie_word_embeddings=False)
    tuned = peft_trained(model, target_modules=["shared", "decoder_embed_tokens"])
    tuned_logits = logits(tuned)
    assert (tuned_logits - logits(model)).abs().max() > 1e-2
    tuned.save_pretrained(tmp_path)
    with safe_open(str(tmp_path / "adapter_model.safetensors"), "pt") as handle:
        assert not any(".embed_tokens." in key for key in handle.keys())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reloaded = peft.PeftModel.from_pretrained(copy.deepcopy(model), tmp_path).eval()
    reported = [str(w.message) for w in caught if "missing adapter keys" in str(w.message)]
    aliases = [
        f"model.{side}.embed_tokens.lora_embedding_{m}.default"
        for side in ("encoder", "decoder")
        for m in "AB"
    ]
    for message in reported:
        assert message.count("'") == 2 * len(aliases) and all(alias in message for alias in aliases)
    torch.testing.assert_close(logits(reloaded), tuned_logits, rtol=0, atol=0)


# ---- export and device maps -------------------------------------------------------------------------------------


class EncoderOutput(torch.nn.Module):
    """The encoder with tensor inputs and its last hidden state as the one output."""

    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


@pytest.mark.parametrize("variant", VARIANTS)
def test_torch_export_keeps_the_embedding_a_parameter(variant: str) -> None:
    encoder = variant_model(variant).get_encoder()
    ids, mask = padded_batch([6, 4])
    exported = torch.export.export(encoder, (), {"input_ids": ids, "attention_mask": mask})
    parameters = set(exported.graph_signature.inputs_to_parameters.values())
    assert "embed_tokens.weight" in parameters
    assert parameters == {name for name, _ in encoder.named_parameters()}
    torch.testing.assert_close(
        exported.module()(input_ids=ids, attention_mask=mask).last_hidden_state,
        encoder(input_ids=ids, attention_mask=mask).last_hidden_state,
    )


def onnx_matches_the_encoder(variant: str, path: Path, dynamo: bool) -> None:
    """Export the encoder with dynamic batch and source length, run it with onnxruntime on two shapes."""
    pytest.importorskip("onnx")
    if dynamo:
        pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    encoder = EncoderOutput(variant_model(variant).get_encoder()).eval()
    axes = {0: "batch", 1: "source"}
    shapes = (
        {"dynamic_shapes": {"input_ids": axes, "attention_mask": axes}}
        if dynamo
        else {"dynamic_axes": {"input_ids": axes, "attention_mask": axes, "last_hidden_state": axes}}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            encoder,
            padded_batch([6, 4]),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"],
            dynamo=dynamo,
            verbose=False,
            **shapes,
        )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for lengths in ([6, 4], [9, 3, 5]):
        ids, mask = padded_batch(lengths, seed=len(lengths))
        (hidden,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        with torch.no_grad():
            expected = encoder(ids, mask)
        torch.testing.assert_close(torch.from_numpy(hidden), expected, rtol=0, atol=1e-4)


@pytest.mark.parametrize("variant", VARIANTS)
def test_legacy_onnx_export_of_the_encoder(tmp_path: Path, variant: str) -> None:
    """Before: "Cannot insert a Tensor that requires grad as a constant" (the embedding was not a parameter)."""
    onnx_matches_the_encoder(variant, tmp_path / "encoder.onnx", dynamo=False)


@pytest.mark.parametrize("variant", ["base", "dlcl"])
def test_dynamo_onnx_export_of_the_encoder(tmp_path: Path, variant: str) -> None:
    onnx_matches_the_encoder(variant, tmp_path / "encoder.onnx", dynamo=True)


def device_of(device_map: dict, name: str) -> object:
    """The device `infer_auto_device_map` gave the module or parameter `name` (its longest listed prefix)."""
    owners = [key for key in device_map if key == "" or name == key or name.startswith(key + ".")]
    return device_map[max(owners, key=len)]


@pytest.mark.parametrize(
    ("variant", "share", "tie"), [(v, True, True) for v in VARIANTS] + [("base", *st) for st in UNTIED]
)
def test_device_map_keeps_tied_embeddings_together(
    monkeypatch: pytest.MonkeyPatch, variant: str, share: bool, tie: bool
) -> None:
    """Two fake accelerators with ~45% of the model each: the model is split, and the embedding's every name
    (`shared`, both stacks' `embed_tokens`, a tied `lm_head`) is on one device."""
    from accelerate import infer_auto_device_map
    from accelerate.utils import compute_module_sizes, find_tied_parameters

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # accelerate drops devices it cannot see
    model = variant_model(variant, share_encoder_decoder_embeddings=share, tie_word_embeddings=tie)
    groups = find_tied_parameters(model)
    source = ["model.shared.weight", "model.encoder.embed_tokens.weight"]
    target = ["model.decoder.embed_tokens.weight"] + (["lm_head.weight"] if tie else [])
    expected = [source + target] if share else [source, target + ["model.decoder_embed_tokens.weight"]]
    assert sorted(sorted(group) for group in groups) == sorted(sorted(group) for group in expected)
    total = compute_module_sizes(model)[""]
    device_map = infer_auto_device_map(
        model,
        max_memory={0: int(0.45 * total), 1: int(0.45 * total), "cpu": 4 * total},
        no_split_module_classes=model._no_split_modules,
    )
    assert len(set(device_map.values())) > 1
    for group in expected:
        assert len({device_of(device_map, name) for name in group}) == 1, (group, device_map)
