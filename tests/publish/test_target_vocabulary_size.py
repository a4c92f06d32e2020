"""A target vocabulary of its own size (`decoder_vocab_size`, MarianConfig's rule): the model, its fold into
MarianMTModel, and fairseq checkpoints whose source and target dictionaries differ in size.

A checkpoint written by fairseq itself with dictionaries of different sizes (tests/fixtures/fairseq_vocabularies,
tests/fixtures/make_vocabulary_fixture.py) is checked against fairseq's numbers; a second check is on the MODEL PATH — a copy of the `preln_tied_cfg` fixture whose target dictionary and decoder
embedding lose their last rows. Removing output rows leaves the decoder's hidden states unchanged (targets use kept
rows only), so the shortened model's log-probs must be the log-softmax of the full model's logits over the kept rows.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from fairseq_reference import FLOAT32_TOLERANCE, check_against_fairseq
from transformers import AutoModelForSeq2SeqLM, MarianMTModel

from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration
from deep_nmt_hf.cli import main
from deep_nmt_hf.publish.convert_fairseq import fairseq_model
from deep_nmt_hf.publish.folding import fold_to_stock

FAIRSEQ = Path(__file__).parents[1] / "fixtures" / "fairseq"
TINY = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_ffn_dim=64, decoder_ffn_dim=64)
TINY |= dict(encoder_attention_heads=4, decoder_attention_heads=4)


def two_vocabularies(**fields) -> DeepNMTConfig:
    return DeepNMTConfig(
        vocab_size=40,
        decoder_vocab_size=30,
        share_encoder_decoder_embeddings=False,
        pad_token_id=29,
        **TINY,
        **fields,
    )


def test_decoder_has_the_target_vocabulary_size_and_survives_save_load(tmp_path: Path) -> None:
    model = DeepNMTForConditionalGeneration(two_vocabularies()).eval()
    assert model.model.shared.num_embeddings == 40
    assert model.model.decoder.embed_tokens.num_embeddings == model.lm_head.out_features == 30
    source, target = torch.randint(0, 39, (2, 6)), torch.randint(0, 29, (2, 5))
    with torch.no_grad():
        logits = model(input_ids=source, decoder_input_ids=target).logits
    assert logits.shape == (2, 5, 30)
    model.save_pretrained(tmp_path)
    loaded = DeepNMTForConditionalGeneration.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=source, decoder_input_ids=target).logits, logits)
    with pytest.raises(ValueError, match="decoder_vocab_size=30 != vocab_size=40"):
        model.resize_token_embeddings(50)


def test_rules_of_the_field() -> None:
    with pytest.raises(ValueError, match="share_encoder_decoder_embeddings=False"):
        DeepNMTConfig(vocab_size=40, decoder_vocab_size=30, pad_token_id=29, **TINY)
    with pytest.raises(ValueError, match="pad_token_id=39 is outside the vocabulary"):
        DeepNMTConfig(vocab_size=40, decoder_vocab_size=30, share_encoder_decoder_embeddings=False, **TINY)
    assert DeepNMTConfig(**TINY).decoder_vocab_size is None  # the default keeps every checkpoint as it was


def test_fold_into_marian_keeps_the_target_vocabulary(tmp_path: Path) -> None:
    model = DeepNMTForConditionalGeneration(two_vocabularies(tie_word_embeddings=False)).eval()
    stock, report = fold_to_stock(model)
    assert isinstance(stock, MarianMTModel) and stock.config.decoder_vocab_size == 30
    assert report.max_abs_logit_diff < 1e-4 and report.beam_outputs_identical
    stock.save_pretrained(tmp_path)
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    source, target = torch.randint(0, 39, (2, 6)), torch.randint(0, 29, (2, 5))
    with torch.no_grad():
        torch.testing.assert_close(
            reloaded(input_ids=source, decoder_input_ids=target).logits,
            model(input_ids=source, decoder_input_ids=target).logits,
            atol=1e-4,
            rtol=0,
        )


def test_fairseq_dictionaries_of_different_sizes_convert(tmp_path: Path) -> None:
    raw = torch.load(FAIRSEQ / "preln_tied_cfg.pt", weights_only=False)
    drop = 3
    for key in ("decoder.embed_tokens.weight", "decoder.output_projection.weight"):
        if key in raw["model"]:
            raw["model"][key] = raw["model"][key][:-drop].clone()
    torch.save(raw, tmp_path / "model.pt")
    shutil.copy(FAIRSEQ / "dict.src.txt", tmp_path / "dict.src.txt")
    lines = (FAIRSEQ / "dict.tgt.txt").read_text().splitlines()
    (tmp_path / "dict.tgt.txt").write_text("\n".join(lines[:-drop]) + "\n")
    full, _, _ = fairseq_model(FAIRSEQ / "preln_tied_cfg.pt")
    short, tokenizer, _ = fairseq_model(tmp_path / "model.pt")
    size = len(lines) + 4 - drop
    assert (short.config.vocab_size, short.config.decoder_vocab_size) == (len(lines) + 4, size)
    assert tokenizer is None  # BPE pieces, no --bpe-codes: no tokenizer (else a paired one)
    source = torch.tensor([[5, 9, 12, 7, 2]])
    target = torch.tensor([[2, 6, 11, 8, size - 1]])
    with torch.no_grad():
        expected = full(input_ids=source, decoder_input_ids=target).logits[..., :size].log_softmax(-1)
        ours = short(input_ids=source, decoder_input_ids=target).logits.log_softmax(-1)
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)


def test_a_fairseq_written_checkpoint_with_two_dictionaries_scores_as_fairseq(tmp_path: Path) -> None:
    """The checkpoint fairseq itself wrote with a 28-symbol source and a 16-symbol target dictionary
    (tests/fixtures/make_vocabulary_fixture.py): converted through the command line, saved and loaded, it scores as
    fairseq did (log-probs within 1e-4, greedy identical, fairseq's beams rescoring to its scores), and its fold
    keeps the two sizes and the numbers."""
    fixtures = Path(__file__).parents[1] / "fixtures" / "fairseq_vocabularies"
    manifest = json.loads((fixtures / "MANIFEST.json").read_text())
    sizes = manifest["dictionary_sizes"]
    assert sizes["source"] > sizes["target"]
    out = tmp_path / "converted"
    assert main(["convert", "fairseq", str(fixtures / "postln_two_dictionaries.pt"), str(out)]) == 0
    model = DeepNMTForConditionalGeneration.from_pretrained(out).eval()
    assert (model.config.vocab_size, model.config.decoder_vocab_size) == (sizes["source"], sizes["target"])
    reference = json.loads((fixtures / "postln_two_dictionaries.json").read_text())
    check_against_fairseq(model, reference)
    stock, report = fold_to_stock(model)
    assert report.max_abs_logit_diff < 1e-4 and report.beam_outputs_identical
    stock.save_pretrained(tmp_path / "folded")
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "folded").eval()
    # FSMT's masks do not build in float64 (Transformers' fill_with_neg_inf overflows float32): float32, the spread
    # measured in bench/results/parity_spread.md (this test's row)
    check_against_fairseq(reloaded, reference, FLOAT32_TOLERANCE, dtype=torch.float32)
