"""The WMT-size data path (issue #16): Arrow reading without Python lists, the fingerprinted caches (corpus,
tokenizer, tokenized split), truncation counts, tokenizer samples, streaming shards and `deep-nmt preprocess`."""

from __future__ import annotations

import gzip
import json
import sys
import tracemalloc
from pathlib import Path

import pytest

from deep_nmt_hf.cli import main
from deep_nmt_hf.data import (
    DataError,
    ReadReport,
    arrow,
    preprocessing,
    read_jsonl,
    read_parallel_dir,
    write_parallel_dir,
)
from deep_nmt_hf.data.preprocessing import cached_tokenizer, corpus_texts, tokenize_cached
from deep_nmt_hf.data.streaming import streaming_pairs, streaming_tokenized
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, iter_pairs
from deep_nmt_hf.data.tokenization import train_tokenizer

PAIRS = 3000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("corpus")
    pairs = list(iter_pairs(PAIRS, seed=5))
    pairs[10] = ("   ", pairs[10][1])  # one empty pair: dropped and counted
    write_parallel_dir(pairs, directory, "train", SRC_LANG, TGT_LANG)
    return directory


@pytest.fixture(scope="module")
def tokenizer(corpus: Path):
    dataset = read_parallel_dir(corpus, "train", SRC_LANG, TGT_LANG)
    return train_tokenizer(corpus_texts(dataset, SRC_LANG, TGT_LANG), vocab_size=300)


def _entries(cache: Path) -> list[str]:
    return sorted(path.name.split("-")[0] for path in cache.iterdir()) if cache.is_dir() else []


# ------------------------------------------------------------------------------------------------ reading
def test_reading_streams_batches_into_a_memory_mapped_arrow_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = list(iter_pairs(20_000, seed=3))
    write_parallel_dir(pairs, tmp_path / "d", "train", SRC_LANG, TGT_LANG)
    as_lists = sum(sys.getsizeof(s) + sys.getsizeof(t) + 72 for s, t in pairs)  # the old reader's two lists
    del pairs
    monkeypatch.setattr(arrow, "WRITE_BATCH_SIZE", 500)
    tracemalloc.start()
    try:
        dataset = read_parallel_dir(tmp_path / "d", "train", SRC_LANG, TGT_LANG, cache_dir=tmp_path / "cache")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(dataset) == 20_000
    assert peak < as_lists / 10, (peak, as_lists)  # a batch of 500 rows, not 20k
    assert (
        dataset.cache_files and Path(dataset.cache_files[0]["filename"]).parent.parent == tmp_path / "cache"
    )
    assert type(dataset._data).__name__ == "MemoryMappedTable"


def _batch_rows(dataset) -> list[int]:
    return [batch.num_rows for batch in dataset.data.to_batches()]


def test_arrow_files_are_written_in_large_record_batches(
    corpus: Path, tokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One record batch per write of WRITE_BATCH_SIZE rows, not the writer's 1,000: opening a memory-mapped file
    touches every batch header (and the kernel maps 64 KiB around each), so fewer batches keep the RSS flat."""
    monkeypatch.setattr(arrow, "WRITE_BATCH_SIZE", 2500)
    dataset = read_parallel_dir(corpus, "train", SRC_LANG, TGT_LANG, cache_dir=tmp_path / "read")
    assert _batch_rows(dataset) == [2500, PAIRS - 1 - 2500]  # one empty pair dropped
    monkeypatch.setattr(preprocessing, "WRITE_BATCH_SIZE", 2500)
    split = tokenize_cached(dataset, tokenizer, SRC_LANG, TGT_LANG, 12, 12, cache_dir=tmp_path / "tok")
    assert _batch_rows(split.dataset) == [2500, PAIRS - 1 - 2500]


def test_cached_read_reuses_the_entry_and_reports_the_same_counts(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = ReadReport(), ReadReport()
    dataset = read_parallel_dir(corpus, "train", SRC_LANG, TGT_LANG, report=first, cache_dir=tmp_path)
    assert (first.total, first.kept, first.dropped, first.first_dropped) == (PAIRS, PAIRS - 1, 1, 11)

    def fail(*args: object, **kwargs: object) -> int:
        raise AssertionError("the corpus was read again")

    monkeypatch.setattr("deep_nmt_hf.data.reading.build_translation_arrow", fail)
    again = read_parallel_dir(corpus, "train", SRC_LANG, TGT_LANG, report=second, cache_dir=tmp_path)
    assert again._fingerprint == dataset._fingerprint
    assert (second.total, second.kept, second.dropped, second.first_dropped) == (PAIRS, PAIRS - 1, 1, 11)
    assert again[:5] == dataset[:5]


def test_a_changed_file_builds_a_new_entry(tmp_path: Path) -> None:
    data = tmp_path / "d"
    write_parallel_dir([("a b", "c d"), ("e", "f")], data, "train", SRC_LANG, TGT_LANG)
    old = read_parallel_dir(data, "train", SRC_LANG, TGT_LANG, cache_dir=tmp_path / "cache")
    write_parallel_dir([("a b", "c d"), ("e", "g h")], data, "train", SRC_LANG, TGT_LANG)
    new = read_parallel_dir(data, "train", SRC_LANG, TGT_LANG, cache_dir=tmp_path / "cache")
    assert new[1]["translation"][TGT_LANG] == "g h" and old._fingerprint != new._fingerprint
    assert _entries(tmp_path / "cache") == ["parallel", "parallel"]


@pytest.mark.parametrize("gz", [False, True])
def test_errors_name_file_and_line_and_leave_no_cache_entry(tmp_path: Path, gz: bool) -> None:
    data = tmp_path / "d"
    data.mkdir()
    suffix = ".gz" if gz else ""
    opener = gzip.open if gz else open
    lines = [f"line {i}\n".encode() for i in range(1, 25_001)]  # beyond one write batch
    with opener(data / f"train.{SRC_LANG}{suffix}", "wb") as handle:
        handle.writelines(lines)
    with opener(data / f"train.{TGT_LANG}{suffix}", "wb") as handle:
        handle.writelines(lines[:12_345] + [b"caf\xe9\n"] + lines[12_346:])
    with pytest.raises(DataError, match=rf"train\.{TGT_LANG}{suffix}: line 12346 is not valid UTF-8"):
        read_parallel_dir(data, "train", SRC_LANG, TGT_LANG, cache_dir=tmp_path / "cache")
    with opener(data / f"train.{TGT_LANG}{suffix}", "wb") as handle:
        handle.writelines(lines[:-1])
    with pytest.raises(DataError, match="has 25000 lines but .* has 24999; line 25000 exists only in"):
        read_parallel_dir(data, "train", SRC_LANG, TGT_LANG, cache_dir=tmp_path / "cache")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"translation": {"sa": "a", "sb": "b"}}\n{"translation": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl: line 2 is not valid JSON"):
        read_jsonl(bad, SRC_LANG, TGT_LANG, cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []  # no entry, no temp dir


# ------------------------------------------------------------------------------------------------ tokenizer
def test_tokenizer_sample_is_deterministic_by_seed(corpus: Path, tmp_path: Path) -> None:
    dataset = read_parallel_dir(corpus, "train", SRC_LANG, TGT_LANG)
    first = list(corpus_texts(dataset, SRC_LANG, TGT_LANG, sample=200, seed=1))
    assert len(first) == 400 and first == list(corpus_texts(dataset, SRC_LANG, TGT_LANG, sample=200, seed=1))
    assert first != list(corpus_texts(dataset, SRC_LANG, TGT_LANG, sample=200, seed=2))
    sources = set(first[::2])
    assert sources <= {row["translation"][SRC_LANG] for row in dataset}
    settings = {"vocab_size": 200, "sample": 500, "seed": 3}
    one, _ = cached_tokenizer(dataset, SRC_LANG, TGT_LANG, **settings, cache_dir=tmp_path / "a")
    two, _ = cached_tokenizer(dataset, SRC_LANG, TGT_LANG, **settings, cache_dir=tmp_path / "b")
    assert one.backend_tokenizer.to_str() == two.backend_tokenizer.to_str()  # trained twice, identical
    with pytest.raises(ValueError, match="sample=0 must be a positive integer"):
        next(corpus_texts(dataset, SRC_LANG, TGT_LANG, sample=0))


def test_cached_tokenizer_is_reused(corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = read_parallel_dir(corpus, "train", SRC_LANG, TGT_LANG)
    tokenizer, path = cached_tokenizer(dataset, SRC_LANG, TGT_LANG, vocab_size=200, cache_dir=tmp_path)
    monkeypatch.setattr(preprocessing, "train_tokenizer", lambda *a, **k: pytest.fail("trained again"))
    again, same = cached_tokenizer(dataset, SRC_LANG, TGT_LANG, vocab_size=200, cache_dir=tmp_path)
    assert same == path and again.get_vocab() == tokenizer.get_vocab()


# ------------------------------------------------------------------------------------------------ tokenizing
def test_tokenized_cache_is_reused_and_counts_truncation(
    corpus: Path, tokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = read_parallel_dir(corpus, "train", SRC_LANG, TGT_LANG)
    first = tokenize_cached(dataset, tokenizer, SRC_LANG, TGT_LANG, 10, 9, cache_dir=tmp_path)
    assert not first.from_cache and set(first.dataset.column_names) == set(preprocessing.TOKENIZED_COLUMNS)
    full = tokenizer([row["translation"][SRC_LANG] for row in dataset])["input_ids"]
    full_tgt = tokenizer(text_target=[row["translation"][TGT_LANG] for row in dataset])["input_ids"]
    expected = sum(len(s) > 10 or len(t) > 9 for s, t in zip(full, full_tgt, strict=True))
    assert 0 < expected < len(dataset) and first.truncated_pairs == expected
    rows = first.dataset[:50]
    assert rows["src_len"] == [min(len(s), 10) for s in full[:50]]
    assert rows["tgt_len"] == [len(t) for t in rows["labels"]]

    monkeypatch.setattr(preprocessing, "pair_encoder", lambda *a: pytest.fail("tokenized again"))
    second = tokenize_cached(dataset, tokenizer, SRC_LANG, TGT_LANG, 10, 9, cache_dir=tmp_path)
    assert second.from_cache and second.fingerprint == first.fingerprint and second.path == first.path
    assert second.truncated_pairs == expected and second.dataset[:50] == rows


def test_num_proc_two_writes_the_same_rows(corpus: Path, tokenizer, tmp_path: Path) -> None:
    dataset = read_parallel_dir(corpus, "train", SRC_LANG, TGT_LANG)
    one = tokenize_cached(dataset, tokenizer, SRC_LANG, TGT_LANG, 12, 12, cache_dir=tmp_path / "a")
    two = tokenize_cached(
        dataset, tokenizer, SRC_LANG, TGT_LANG, 12, 12, num_proc=2, cache_dir=tmp_path / "b"
    )
    assert one.fingerprint == two.fingerprint and len(two.dataset.cache_files) == 2
    assert one.truncated_pairs == two.truncated_pairs
    assert one.dataset[:] == two.dataset[:]


# ------------------------------------------------------------------------------------------------ streaming
def test_streaming_two_ranks_get_disjoint_shards_of_the_whole_corpus(corpus: Path, tokenizer) -> None:
    shards = [
        [
            row["translation"][SRC_LANG]
            for row in streaming_pairs(corpus, "train", SRC_LANG, TGT_LANG, 0, 64, r, 2)
        ]
        for r in (0, 1)
    ]
    everything = [
        row["translation"][SRC_LANG] for row in read_parallel_dir(corpus, "train", SRC_LANG, TGT_LANG)
    ]
    assert abs(len(shards[0]) - len(shards[1])) <= 1
    assert sorted(shards[0] + shards[1]) == sorted(everything)  # disjoint, nothing lost or repeated
    alone = [
        row["translation"][SRC_LANG] for row in streaming_pairs(corpus, "train", SRC_LANG, TGT_LANG, 0, 64)
    ]
    assert alone != everything and sorted(alone) == sorted(everything)  # shuffled in the buffer
    stream = streaming_pairs(corpus, "train", SRC_LANG, TGT_LANG)
    tokenized = next(iter(streaming_tokenized(stream, tokenizer, SRC_LANG, TGT_LANG, 6, 128)))
    assert set(tokenized) == {"input_ids", "attention_mask", "labels", "src_len", "tgt_len"}
    assert tokenized["src_len"] == len(tokenized["input_ids"]) <= 6


def test_streaming_needs_max_steps_and_reports_bad_lines(tmp_path: Path) -> None:
    from deep_nmt_hf.training import TrainingOptions

    with pytest.raises(ValueError, match="streaming=True needs max_steps > 0"):
        TrainingOptions(output_dir="o", data_source="d", src_lang="sa", tgt_lang="sb", streaming=True)
    (tmp_path / "train.sa").write_bytes(b"a\nb\nc\n")
    (tmp_path / "train.sb").write_bytes(b"a\nb\n")
    with pytest.raises(DataError, match="line counts differ"):
        list(streaming_pairs(tmp_path, "train", "sa", "sb"))


# ------------------------------------------------------------------------------------------------------ CLI
def test_preprocess_prints_the_cache_and_train_picks_it_up(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["preprocess", "--data-dir", str(corpus), "--src-lang", SRC_LANG, "--tgt-lang", TGT_LANG]
    args += ["--vocab-size", "200", "--max-source-length", "16", "--cache-dir", str(tmp_path), "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert Path(summary["tokenized"]).parent == tmp_path and Path(summary["tokenized"], "meta.json").is_file()
    assert Path(summary["tokenizer"], "tokenizer.json").is_file()
    assert (summary["pairs_read"], summary["pairs_dropped_empty"], summary["pairs"]) == (PAIRS, 1, PAIRS - 1)
    assert not summary["tokenized_from_cache"] and summary["pairs_truncated"] > 0
    assert main(args[:-1]) == 0
    out = capsys.readouterr().out
    assert f"tokenized: {summary['tokenized']} ({PAIRS - 1} pairs" in out and "already cached" in out

    # train with the same flags finds every entry by fingerprint: nothing is read, trained or tokenized again
    from deep_nmt_hf.training import TrainingOptions, tokenize_dataset
    from deep_nmt_hf.training.inputs import _load_training_data

    monkeypatch.setattr("deep_nmt_hf.data.reading.build_translation_arrow", lambda *a: pytest.fail("read"))
    monkeypatch.setattr(preprocessing, "train_tokenizer", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.setattr(preprocessing, "pair_encoder", lambda *a: pytest.fail("tokenized"))
    options = TrainingOptions(
        output_dir=str(tmp_path / "out"), data_source=corpus, src_lang=SRC_LANG, tgt_lang=TGT_LANG,
        vocab_size=200, max_source_length=16, cache_dir=str(tmp_path),
    )  # fmt: skip
    train_set, _, _ = _load_training_data(options)
    tok, path = cached_tokenizer(train_set, SRC_LANG, TGT_LANG, vocab_size=200, model_max_length=256,
                                 cache_dir=tmp_path)  # fmt: skip
    assert str(path) == summary["tokenizer"]
    stats: dict[str, int] = {}
    tokenize_dataset(train_set, tok, SRC_LANG, TGT_LANG, 16, 128, stats=stats, cache_dir=tmp_path)
    assert stats["truncated_pairs"] == summary["pairs_truncated"]


def test_length_grouped_sampler_reads_the_src_len_column(tmp_path: Path) -> None:
    import datasets
    from factories import tiny_model
    from transformers import Seq2SeqTrainingArguments

    from deep_nmt_hf.training import DeepNMTTrainer

    lengths = [3, 9, 1, 7, 5, 2, 8, 4]
    rows = {
        "input_ids": [[1, 0]] * 8,
        "attention_mask": [[1, 1]] * 8,
        "labels": [[1, 0]] * 8,
        "src_len": lengths,
    }
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        use_cpu=True,
        report_to="none",
        train_sampling_strategy="group_by_length",
    )
    trainer = DeepNMTTrainer(model=tiny_model(), args=args, train_dataset=datasets.Dataset.from_dict(rows))
    sampler = trainer._get_train_sampler()
    assert sampler.lengths.tolist() == lengths  # from the column, not from the (all length-2) token lists
    assert sorted(sampler) == list(range(8))
