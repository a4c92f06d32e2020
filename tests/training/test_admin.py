"""ADMIN / DeepNorm residual scaling, profiling, the profiling callback (also under 2 processes)."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch
from factories import PAD, VOCAB, padded_batch, tiny_config, tiny_model
from launching import free_port
from transformers import AutoModelForSeq2SeqLM

from deep_nmt_hf import AdminConfig, AdminForConditionalGeneration
from deep_nmt_hf.model.residual import AdminOmega, DeepNormAlpha, analytic_omega, deepnorm_constants
from deep_nmt_hf.training.admin_profiling import (
    AdminProfilingCallback,
    admin_profile,
    broadcast_omegas,
    current_omegas,
    omega_recursion,
    warn_if_omega_below_one,
)


def assert_omegas_close(a: dict[str, list[float]], b: dict[str, list[float]], rel: float = 1e-6) -> None:
    assert a.keys() == b.keys()
    for side in a:
        assert a[side] == pytest.approx(b[side], rel=rel), side


def profiling_batch(seed: int = 0, rows: int = 6) -> dict[str, torch.Tensor]:
    ids, mask = padded_batch([9 - i % 5 for i in range(rows)], seed=seed)
    labels = ids.clone().masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def test_admin_sublayer_computes_ln_of_omega_x_plus_f() -> None:
    model = tiny_model(residual_scaling="admin")
    sublayer = model.model.encoder.sublayers()[1]  # the first FFN: has an ω
    with torch.no_grad():
        sublayer.residual_scale.omega.copy_(torch.linspace(0.5, 3.0, 32))
    x = torch.randn(2, 3, 32)
    expected = sublayer.layer_norm(x * torch.linspace(0.5, 3.0, 32) + sublayer.fn(x)[0])
    torch.testing.assert_close(sublayer(x)[0], expected)


@pytest.mark.parametrize(("mode", "shape", "trainable"), [("trainable", (32,), True), ("fixed", (1,), False)])
def test_omega_placement_first_sublayer_has_none(mode: str, shape: tuple, trainable: bool) -> None:
    model = tiny_model(residual_scaling="admin", admin_omega=mode)
    for stack in (model.model.encoder, model.model.decoder):
        sublayers = stack.sublayers()
        assert sublayers[0].residual_scale is None  # reads the embeddings: ω = 1, always
        for sublayer in sublayers[1:]:
            assert isinstance(sublayer.residual_scale, AdminOmega)
            assert sublayer.residual_scale.omega.shape == shape
    names = [n for n, _ in model.named_parameters() if "omega" in n]
    assert bool(names) == trainable
    assert len(model.model.decoder.sublayers()) == 6 and len(model.model.encoder.sublayers()) == 4


def test_analytic_omega_follows_admin_torch_rule() -> None:
    model = tiny_model(residual_scaling="admin", admin_init="analytic", encoder_layers=3, decoder_layers=2)
    enc, dec = current_omegas(model)["encoder"], current_omegas(model)["decoder"]
    assert enc[0] == 1.0 and dec[0] == 1.0
    assert enc[1:] == pytest.approx([math.sqrt(7 / math.log(7) - 1)] * 5, rel=1e-6)  # N = 6 encoder sublayers
    assert dec[1:] == pytest.approx([analytic_omega(6)] * 5, rel=1e-6)  # N = 6 decoder sublayers


def test_omega_recursion_by_hand() -> None:
    assert omega_recursion([1.0, 1.0, 1.0], [0.5, 0.25, 9.0]) == pytest.approx(
        [1.0, math.sqrt(1.5), math.sqrt(1.75)]
    )
    assert omega_recursion([2.0, 1.0], [1.0, 5.0]) == pytest.approx([1.0, math.sqrt(3.0)])


def test_profiling_is_deterministic_and_omega_grows_with_depth() -> None:
    model = tiny_model(seed=3, residual_scaling="admin", encoder_layers=12, decoder_layers=3, dropout=0.1)
    first = admin_profile(model, profiling_batch(), seed=5)
    again = admin_profile(model, profiling_batch(), seed=5)
    assert first == again
    enc = first["encoder"]
    assert len(enc) == 24 and enc[0] == 1.0
    assert all(w > 1.0 for w in enc[1:])
    assert all(b > a for a, b in zip(enc, enc[1:], strict=False))  # grows monotonically with depth
    assert enc[-1] > 3.0
    assert model.config.admin_profiled
    assert_omegas_close(current_omegas(model), first)  # written into the model


def test_profiling_warns_when_a_small_init_keeps_omega_below_one(caplog: pytest.LogCaptureFixture) -> None:
    """N(0, 0.02) embeddings and branches profile to ω < 1 (flat in depth): a warning names the init;
    fairseq's init profiles to ω ≥ 1 silently."""
    with caplog.at_level("WARNING", logger="deep_nmt_hf.training.admin_profiling"):
        fairseq = admin_profile(
            tiny_model(seed=3, residual_scaling="admin", encoder_layers=6), profiling_batch()
        )
    assert min(fairseq["encoder"]) >= 1.0 and not caplog.records
    normal = tiny_model(seed=3, residual_scaling="admin", encoder_layers=6, init_method="normal")
    with caplog.at_level("WARNING", logger="deep_nmt_hf.training.admin_profiling"):
        omegas = admin_profile(normal, profiling_batch())
    assert min(omegas["encoder"]) < 1.0
    assert "init_method='normal'" in caplog.text and "ω below 1" in caplog.text
    assert warn_if_omega_below_one({"encoder": [1.0, 1.5], "decoder": [1.0]}, normal.config) is False


def _stepwise_omegas(model, batch: dict[str, torch.Tensor], seed: int) -> dict[str, list[float]]:
    """Independent recomputation of progressive ADMIN profiling: one full seeded forward pass per sublayer, with
    ω_1..ω_i already set; x_{i-1} from a pre-hook on the sublayer, f_i = (LayerNorm input) − ω_i·x_{i-1}."""
    masks = {"encoder": batch["attention_mask"].bool(), "decoder": batch["labels"].ne(-100)}
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(batch["labels"])
    stacks = {"encoder": model.model.encoder, "decoder": model.model.decoder}
    for stack in stacks.values():
        for sublayer in stack.sublayers()[1:]:
            sublayer.residual_scale.set_(1.0)
    out: dict[str, list[float]] = {}
    model.train()
    for side, stack in stacks.items():  # encoder first: the decoder is profiled on the profiled encoder
        omegas, ratio = [], 1.0
        for sublayer in stack.sublayers():
            if sublayer.residual_scale is not None:
                sublayer.residual_scale.set_(ratio)
            omega = ratio if sublayer.residual_scale is not None else 1.0
            seen = {}
            hooks = [
                sublayer.register_forward_pre_hook(lambda m, a, seen=seen: seen.setdefault("x", a[0])),
                sublayer.layer_norm.register_forward_pre_hook(
                    lambda m, a, seen=seen: seen.setdefault("z", a[0])
                ),
            ]
            torch.manual_seed(seed)
            with torch.no_grad():
                model(
                    input_ids=batch["input_ids"],
                    attention_mask=batch["attention_mask"],
                    decoder_input_ids=decoder_input_ids,
                )
            for hook in hooks:
                hook.remove()
            x, f = seen["x"], seen["z"] - omega * seen["x"]
            mask = masks[side]
            ratio = math.sqrt(
                (omega * x)[mask].double().var(unbiased=False).item()
                + f[mask].double().var(unbiased=False).item()
            )
            omegas.append(omega)
        out[side] = omegas
    return out


@pytest.mark.parametrize("layers", [(4, 3), (2, 2)])
def test_profiling_is_progressive_like_a_step_by_step_recomputation(layers: tuple[int, int]) -> None:
    batch = profiling_batch(seed=2)
    model = tiny_model(
        seed=4, residual_scaling="admin", encoder_layers=layers[0], decoder_layers=layers[1], dropout=0.1
    )
    profiled = admin_profile(model, batch, seed=7, positions="non_pad")  # the helper below reads real tokens
    expected = _stepwise_omegas(model, batch, seed=7)
    assert_omegas_close(profiled, expected, rel=1e-4)
    # the one-pass reading (every ω = 1 while recording) gives different values: the test can tell them apart
    recorded = {"encoder": {}, "decoder": {}}

    def record(sublayer, inputs, output):
        mask = batch["attention_mask"].bool() if sublayer.side == "encoder" else batch["labels"].ne(-100)
        recorded[sublayer.side][sublayer.index] = (
            inputs[mask].var(unbiased=False).item(),
            output[mask].var(unbiased=False).item(),
        )

    stacks = {"encoder": model.model.encoder, "decoder": model.model.decoder}
    for stack in stacks.values():
        for sublayer in stack.sublayers():
            sublayer.recorder = record
            if sublayer.residual_scale is not None:
                sublayer.residual_scale.set_(1.0)
    torch.manual_seed(7)
    with torch.no_grad():
        model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=model.prepare_decoder_input_ids_from_labels(batch["labels"]),
        )
    for side, stack in stacks.items():
        stats = [recorded[side][s.index] for s in stack.sublayers()]
        one_pass = omega_recursion([v[0] for v in stats], [v[1] for v in stats])
        assert max(abs(a / b - 1) for a, b in zip(one_pass, profiled[side], strict=True)) > 1e-3, side
        for sublayer in stack.sublayers():
            sublayer.recorder = None


def test_non_pad_profiling_ignores_padding() -> None:
    model = tiny_model(seed=3, residual_scaling="admin")
    batch = profiling_batch()
    reference = admin_profile(model, batch, positions="non_pad")
    # change what sits in padded positions: the statistics must not move
    noisy = dict(batch)
    noisy["input_ids"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, 7)
    assert_omegas_close(admin_profile(model, noisy, positions="non_pad"), reference, rel=1e-5)


def test_default_profiling_counts_every_position_as_the_authors_code() -> None:
    """Transformer-Clinic takes np.var of the whole flattened tensor: padded positions count, so padding the same
    sentences further moves ω (and "non_pad" does not); an unknown reading is refused."""
    model = tiny_model(seed=3, residual_scaling="admin")
    batch = profiling_batch()
    extra = 6  # six more padded positions on both sides
    padded = {
        "input_ids": torch.nn.functional.pad(batch["input_ids"], (0, extra), value=PAD),
        "attention_mask": torch.nn.functional.pad(batch["attention_mask"], (0, extra), value=0),
        "labels": torch.nn.functional.pad(batch["labels"], (0, extra), value=-100),
    }
    every = admin_profile(model, batch)
    assert (
        max(
            abs(a / b - 1)
            for a, b in zip(admin_profile(model, padded)["encoder"], every["encoder"], strict=True)
        )
        > 1e-3
    )
    real = admin_profile(model, batch, positions="non_pad")
    assert_omegas_close(admin_profile(model, padded, positions="non_pad"), real, rel=1e-4)
    with pytest.raises(ValueError, match="positions='pad'; valid: all, non_pad"):
        admin_profile(model, batch, positions="pad")


def test_callback_profiles_one_token_budget_batch(tmp_path) -> None:
    """With max_tokens the profiling batch is the first batch of a TokenBudgetBatchSampler of that budget (the
    authors' one batch of 8k tokens), whatever the Trainer's batch size."""
    from deep_nmt_hf.data.batching import TokenBudgetBatchSampler, dataset_lengths

    rows = _rows(0)
    callback = AdminProfilingCallback(seed=5, max_tokens=40)
    indices = callback.budget_batch(rows)
    sampler = TokenBudgetBatchSampler(*dataset_lengths(rows), max_tokens=40, seed=5)
    assert indices == next(iter(sampler)) and len(indices) > 1
    assert len(indices) * max(len(rows[i]["input_ids"]) for i in indices) <= 40
    model = tiny_model(residual_scaling="admin", encoder_layers=3)
    callback.on_train_begin(
        _Args(str(tmp_path)), _State(True), None, model=model, train_dataloader=_Loader(rows, _collate)
    )
    expected = admin_profile(
        tiny_model(residual_scaling="admin", encoder_layers=3), _collate([rows[i] for i in indices]), seed=5
    )
    assert_omegas_close(callback.omegas, expected, rel=1e-5)


def test_profiled_omega_survives_save_and_load(tmp_path) -> None:
    model = AdminForConditionalGeneration(
        AdminConfig.from_preset("tiny", vocab_size=VOCAB, max_position_embeddings=64)
    )
    omegas = admin_profile(model, profiling_batch())
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    assert type(loaded) is AdminForConditionalGeneration
    assert loaded.config.admin_profiled is True
    assert_omegas_close(current_omegas(loaded), omegas)


def test_deepnorm_constants_and_placement() -> None:
    model = tiny_model(
        residual_scaling="deepnorm", init_method="deepnorm", encoder_layers=3, decoder_layers=2
    )
    enc_alpha, enc_beta = deepnorm_constants(model.config, "encoder")
    dec_alpha, dec_beta = deepnorm_constants(model.config, "decoder")
    assert enc_alpha == pytest.approx(0.81 * (3**4 * 2) ** (1 / 16))
    assert enc_beta == pytest.approx(0.87 * (3**4 * 2) ** (-1 / 16))
    assert (dec_alpha, dec_beta) == pytest.approx((6**0.25, 24**-0.25))
    for stack, alpha in ((model.model.encoder, enc_alpha), (model.model.decoder, dec_alpha)):
        assert all(isinstance(s.residual_scale, DeepNormAlpha) for s in stack.sublayers())
        assert all(s.residual_scale.alpha == pytest.approx(alpha) for s in stack.sublayers())


def test_deepnorm_init_scales_value_output_and_ffn_by_beta() -> None:
    torch.manual_seed(0)
    config = tiny_config(
        residual_scaling="deepnorm",
        init_method="deepnorm",
        d_model=256,
        encoder_ffn_dim=256,
        decoder_ffn_dim=256,
    )
    model = AdminForConditionalGeneration(config)
    beta = deepnorm_constants(config, "encoder")[1]
    attention = model.model.encoder.layers[0].self_attn.fn
    xavier_std = math.sqrt(2.0 / (256 + 256))
    assert attention.v_proj.weight.std().item() == pytest.approx(beta * xavier_std, rel=0.05)
    assert attention.q_proj.weight.std().item() == pytest.approx(xavier_std, rel=0.05)


# ---------------------------------------------------------------------------------------------- the callback
class _Loader:
    """What the callback reads from the Trainer's dataloader: the dataset and the collator."""

    def __init__(self, rows: list[dict], collate) -> None:
        self.dataset = rows
        self.collate_fn = collate


def _collate(rows: list[dict]) -> dict[str, torch.Tensor]:
    return {k: torch.stack([r[k] for r in rows]) for k in rows[0]}


def _rows(seed: int) -> list[dict]:
    batch = profiling_batch(seed=seed)
    return [{k: v[i] for k, v in batch.items()} for i in range(batch["input_ids"].shape[0])]


class _Args:
    per_device_train_batch_size = 4

    def __init__(self, output_dir: str) -> None:
        self.output_dir = output_dir


class _State:
    def __init__(self, zero: bool) -> None:
        self.is_world_process_zero = zero


def test_callback_profiles_once_and_writes_json_and_plot(tmp_path) -> None:
    model = tiny_model(residual_scaling="admin", encoder_layers=4)
    callback = AdminProfilingCallback()
    callback.on_train_begin(
        _Args(str(tmp_path)), _State(True), None, model=model, train_dataloader=_Loader(_rows(0), _collate)
    )
    assert model.config.admin_profiled
    saved = json.loads((tmp_path / "admin_omega.json").read_text())
    assert saved["encoder"][0] == 1.0 and saved["encoder"][-1] > 1.0
    assert (tmp_path / "admin_omega.png").read_bytes()[:4] == b"\x89PNG"
    with torch.no_grad():  # already profiled: a second call must leave ω alone
        model.model.encoder.sublayers()[1].residual_scale.omega.fill_(42.0)
    callback.on_train_begin(
        _Args(str(tmp_path)), _State(True), None, model=model, train_dataloader=_Loader(_rows(1), _collate)
    )
    assert current_omegas(model)["encoder"][1] == 42.0


def test_callback_runs_inside_seq2seq_trainer_before_the_first_step(tmp_path) -> None:
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, TrainerCallback

    model = tiny_model(residual_scaling="admin").train()
    seen = {}

    class Spy(TrainerCallback):
        def on_step_begin(self, args, state, control, model=None, **kwargs):
            seen.setdefault("profiled_at_first_step", model.config.admin_profiled)

    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=3,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = Seq2SeqTrainer(
        model=model,
        args=args,
        train_dataset=_rows(0),
        data_collator=_collate,
        callbacks=[AdminProfilingCallback(), Spy()],
    )
    trainer.train()
    assert seen["profiled_at_first_step"] is True
    assert (tmp_path / "admin_omega.json").exists()


def _rank_main(rank: int, world: int, out_dir: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model = tiny_model(
            seed=100 + rank, residual_scaling="admin", encoder_layers=3
        )  # ranks differ on purpose
        torch.manual_seed(rank)
        callback = AdminProfilingCallback()
        callback.on_train_begin(
            _Args(out_dir),
            _State(rank == 0),
            None,
            model=model,
            train_dataloader=_Loader(_rows(rank), _collate),
        )
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as handle:
            json.dump({"omegas": current_omegas(model), "profiled": model.config.admin_profiled}, handle)
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_two_process_profiling_gives_identical_omega_on_both_ranks(tmp_path) -> None:
    torch.multiprocessing.spawn(_rank_main, args=(2, str(tmp_path), free_port()), nprocs=2, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert ranks[0]["omegas"] == ranks[1]["omegas"]  # bitwise identical
    assert ranks[0]["profiled"] and ranks[1]["profiled"]
    assert ranks[0]["omegas"]["encoder"][-1] > 1.0
    # without the broadcast rank 1 would hold its own (different) profile
    alone = tiny_model(seed=101, residual_scaling="admin", encoder_layers=3)
    assert admin_profile(alone, profiling_batch(seed=1))["encoder"] != ranks[1]["omegas"]["encoder"]


def test_broadcast_is_a_no_op_in_one_process() -> None:
    model = tiny_model(residual_scaling="admin")
    before = current_omegas(model)
    broadcast_omegas(model)
    assert current_omegas(model) == before


def test_admin_with_pre_ln_is_rejected() -> None:
    with pytest.raises(ValueError, match="needs layer_norm_position='post'"):
        AdminConfig(layer_norm_position="pre")


def test_admin_model_trains_and_generates() -> None:
    model = tiny_model(residual_scaling="admin").train()
    batch = profiling_batch()
    admin_profile(model, batch)
    loss = model(**batch).loss
    loss.backward()
    omega = model.model.encoder.sublayers()[1].residual_scale.omega
    assert omega.grad is not None and omega.grad.abs().sum() > 0  # trainable ω learns
    model.eval()
    out = model.generate(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], max_new_tokens=5
    )
    assert (out[:, 0] == PAD).all()
