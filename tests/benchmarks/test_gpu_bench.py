"""Issue #48: the training input pipeline (padding to a multiple of 8, loader settings, no device sync per step)
and `bench/gpu_training.py`'s smoke run. No timed assertions."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from bench import gpu_training
from bench.lib.gpu.models import ROW_FIELDS, build_model, synthetic_corpus, word_tokenizer
from bench.lib.gpu.syncs import SyncCounter
from bench.lib.gpu.trainer_phase import make_trainer, timed_trainer_steps
from deep_nmt_hf.data.batching import TokenBudgetBatchSampler
from deep_nmt_hf.training import loader

REPO = Path(__file__).resolve().parents[2]


def quick_args(**overrides):
    return gpu_training.parse(
        ["--quick", *sum((["--" + k.replace("_", "-"), v] for k, v in overrides.items()), [])]
    )


def features(corpus, indices):
    return [{k: corpus[k][i] for k in ("input_ids", "attention_mask", "labels")} for i in indices]


def test_training_collator_pads_to_a_multiple_of_8_without_changing_loss_or_gradients():
    args = quick_args()
    corpus = synthetic_corpus(12, args.vocab, seed=3)
    tokenizer = word_tokenizer(args.vocab)
    for name in ("base-6-6", "admin-18-6"):
        model = build_model(name, args).eval()  # no dropout: the two passes must agree
        results = []
        for pad in (None, 8):
            batch = loader.training_collator(tokenizer, model, pad_to_multiple_of=pad)(
                features(corpus, range(12))
            )
            if pad:
                assert all(batch[k].shape[1] % 8 == 0 for k in ("input_ids", "labels", "decoder_input_ids"))
            model.zero_grad()
            loss = model(**batch).loss
            loss.backward()
            results.append(
                (loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None])
            )
        (loss_a, grads_a), (loss_b, grads_b) = results
        assert torch.allclose(loss_a, loss_b, rtol=1e-5, atol=1e-6)
        for a, b in zip(grads_a, grads_b, strict=True):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_padding_multiple_follows_the_device(monkeypatch):
    tokenizer = word_tokenizer(64)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert loader.training_collator(tokenizer, None).pad_to_multiple_of is None
    assert loader.loader_arguments()["dataloader_num_workers"] == 0
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert loader.training_collator(tokenizer, None).pad_to_multiple_of == 8
    settings = loader.loader_arguments()
    assert settings["dataloader_num_workers"] == loader.CUDA_WORKERS
    assert settings["dataloader_persistent_workers"] and settings["dataloader_pin_memory"]
    assert loader.loader_arguments(0)["dataloader_num_workers"] == 0
    with pytest.raises(ValueError, match="dataloader_workers"):
        loader.loader_workers(-1)


def test_token_budget_holds_for_lengths_padded_to_a_multiple():
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(3, 40, (500,), generator=generator).tolist()
    tgt = torch.randint(3, 40, (500,), generator=generator).tolist()
    sampler = TokenBudgetBatchSampler(src, tgt, max_tokens=256, seed=2, pad_to_multiple_of=8)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(500))
    rounded = {len(b): None for b in batches}
    for batch in batches:
        for lengths in (src, tgt):
            longest = max(-(-lengths[i] // 8) * 8 for i in batch)
            assert len(batch) * longest <= 256 or len(batch) == 1
    assert rounded
    exact = list(TokenBudgetBatchSampler(src, tgt, max_tokens=256, seed=2))
    assert exact == list(TokenBudgetBatchSampler(src, tgt, max_tokens=256, seed=2, pad_to_multiple_of=1))
    with pytest.raises(ValueError, match="pad_to_multiple_of"):
        TokenBudgetBatchSampler(src, tgt, max_tokens=256, pad_to_multiple_of=0)


def test_trainer_step_reads_nothing_back_from_the_device_between_logging_steps():
    """The old DeepNMTTrainer read the tokens seen (the Trainer's ``.item()``) and every loss component
    (``float``) on each micro-batch: a device sync each on CUDA. Now only the model's own reads (Transformers'
    mask check) and the divergence guard's remain on a step that logs nothing."""
    args = quick_args()
    corpus = synthetic_corpus(200, args.vocab)
    counter = SyncCounter()
    from transformers import TrainerCallback

    class Label(TrainerCallback):
        def on_step_begin(self, a, state, control, **k):
            counter.label = state.global_step + 1

    steps = 4
    with tempfile.TemporaryDirectory() as staging:
        trainer = make_trainer(
            "deep-decoder-6-12",
            corpus,
            args,
            torch.device("cpu"),
            "fp32",
            steps,
            Path(staging),
            callbacks=[Label()],
        )
        with counter:
            trainer.train()
    quiet = [2, 3]  # step 1 logs (logging_first_step), step 4 ends training
    sites = counter.sites(quiet)
    ours = {
        s: n for s, n in sites.items() if s.startswith(("training/trainer.py", "transformers/trainer.py"))
    }
    assert ours == {}, sites
    # the deferred counts are still exact
    lengths = [sum(m) for m in corpus["attention_mask"]]
    assert trainer.state.num_input_tokens_seen > 0
    assert trainer.state.num_input_tokens_seen <= sum(lengths)
    logged = trainer.state.log_history[0]
    assert {"nll_loss", "ddr_loss", "ald_loss"} <= set(logged), logged


def test_trainer_rows_leave_the_end_of_training_checkpoint_out_of_the_step_time():
    """The first H200 run read `deep-nmt train` at 3× the raw loop: the clock's last step ended after the
    Trainer's end-of-training checkpoint. A fake clock that jumps by 1000 s when the checkpoint is saved must
    not reach the steady step time."""
    from transformers import TrainerCallback

    now = [0.0]

    def clock():
        now[0] += 0.01
        return now[0]

    class SlowSave(TrainerCallback):
        def on_save(self, a, state, control, **k):
            now[0] += 1000.0

    args = quick_args(steps="2", warmup="1")
    corpus = synthetic_corpus(200, args.vocab)
    steady, first = timed_trainer_steps(
        "base-6-6", corpus, args, torch.device("cpu"), "fp32", callbacks=[SlowSave()], clock=clock
    )
    assert 0 < steady < 1, steady
    assert len(first) == 3 and max(first) < 1, first


@pytest.mark.slow
def test_quick_bench_writes_every_row_with_its_fields(tmp_path):
    out = tmp_path / "smoke"
    command = [sys.executable, "-m", "bench.gpu_training", "--quick", "--out", str(out)]
    command += ["--variants", "base-6-6", "--precisions", "fp32", "--split-variant", "base-6-6"]
    command += ["--split-steps", "3", "--steps", "1", "--corpus", "200"]
    subprocess.run(command, check=True, cwd=REPO, capture_output=True, timeout=240)
    data = json.loads(out.with_suffix(".json").read_text())
    assert {"provenance", "device", "settings", "train", "trainer", "generate", "split"} <= set(data)
    for section, fields in ROW_FIELDS.items():
        assert data[section], section
        for row in data[section]:
            assert set(fields) <= set(row), (section, row)
            assert row["status"] == "ok" or row["status"].startswith(("refused", "skipped")), row
    models = {r["model"] for r in data["train"]}
    assert {"base-6-6", "marian-6-6", "torch-pre-ln-2-1"} <= models
    assert all(r["over_marian_6_6"] and r["over_nn_transformer"] for r in data["train"])
    split = data["split"]
    assert {"exact", "pad8"} <= set(split["loader"])
    assert split["trainer"]["old"]["syncs_per_quiet_step"] > split["trainer"]["new"]["syncs_per_quiet_step"]
    assert out.with_suffix(".md").read_text().startswith("# GPU training bench")


def test_cudnn_sdp_off_takes_cudnn_attention_out_of_sdpa_s_choice():
    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        gpu_training.apply_backend_settings(quick_args(cudnn_sdp="off"))
        assert torch.backends.cuda.cudnn_sdp_enabled() is False
        gpu_training.apply_backend_settings(quick_args())
        assert torch.backends.cuda.cudnn_sdp_enabled() is True
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)


@pytest.mark.slow
def test_gpu_check_script_parses():
    subprocess.run(["bash", "-n", str(REPO / "bench" / "gpu_check.sh")], check=True)


def test_generate_rows_add_bf16_fp16_and_int8_beside_fp32(tmp_path):
    """Issue #65 item 3: `--generate-precisions` adds eager bf16 / fp16 / int8 rows for every model, Marian's
    too (int8 on a CPU through oneDNN; on CUDA torchao's dynamic int8, or a "refused" row without torchao)."""
    pytest.importorskip("torchao")
    from bench.lib.gpu.generate_phase import generate_rows
    from bench.lib.gpu.results import Results

    args = gpu_training.parse(
        ["--quick", "--variants", "base-6-6", "--generate-precisions", "fp32", "bf16", "fp16", "int8"]
        + ["--generate-tokens", "2", "--compile-variants"]
    )
    results = Results(tmp_path / "rows.json", args)
    generate_rows(results, synthetic_corpus(16, args.vocab), args, torch.device("cpu"))
    rows = {(r["model"], r["mode"]): r["status"] for r in results.data["generate"]}
    modes = ("eager", "eager bf16", "eager fp16", "eager int8")
    assert rows == {(model, mode): "ok" for model in ("marian-6-6", "base-6-6") for mode in modes}, rows
