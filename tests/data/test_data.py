"""Tests for deep_nmt_hf.data: readers, writers, errors and the empty-line policy on tiny files."""

from __future__ import annotations

import gzip
import json
import logging
import os
import time
from pathlib import Path

import datasets
import pytest

from deep_nmt_hf.data import (
    DataError,
    ReadReport,
    available_splits,
    load_hub_dataset,
    load_parallel,
    read_jsonl,
    read_parallel_dir,
    write_jsonl,
    write_parallel_dir,
)

EN = ["a cat sits", "two dogs run", "the house is red"]
DE = ["eine Katze sitzt", "zwei Hunde rennen", "das Haus ist rot"]


def write_text(path: Path, lines: list[str], gz: bool = False, end: str = "\n") -> Path:
    data = "".join(line + end for line in lines).encode("utf-8")
    if gz:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)
    return path


def pairs_of(dataset: datasets.Dataset, src: str = "en", tgt: str = "de") -> list[tuple[str, str]]:
    return [(row[src], row[tgt]) for row in dataset["translation"]]


# ------------------------------------------------------------------------------------------ directory reader
@pytest.mark.parametrize("gz", [False, True])
def test_read_parallel_dir(tmp_path: Path, gz: bool) -> None:
    write_text(tmp_path / "train.en", EN, gz=gz)
    write_text(tmp_path / "train.de", DE, gz=gz)
    dataset = read_parallel_dir(tmp_path, "train", "en", "de")
    assert dataset.column_names == ["translation"]
    assert pairs_of(dataset) == list(zip(EN, DE, strict=True))
    assert dataset[0]["translation"] == {"en": EN[0], "de": DE[0]}


def test_mixed_plain_and_gz_and_crlf_whitespace(tmp_path: Path) -> None:
    write_text(tmp_path / "val.en", ["  a cat sits\t", "\ufefftwo"], end="\r\n")
    write_text(tmp_path / "val.de", ["eine Katze sitzt", "zwei"], gz=True)
    assert pairs_of(read_parallel_dir(tmp_path, "val", "en", "de")) == [
        ("a cat sits", "eine Katze sitzt"),
        ("\ufefftwo", "zwei"),  # a BOM only counts at the start of the file
    ]
    (tmp_path / "bom.en").write_bytes("\ufeffhello\n".encode())
    write_text(tmp_path / "bom.de", ["hallo"])
    assert pairs_of(read_parallel_dir(tmp_path, "bom", "en", "de")) == [("hello", "hallo")]


def test_last_line_without_newline(tmp_path: Path) -> None:
    (tmp_path / "t.en").write_text("one\ntwo", encoding="utf-8")
    (tmp_path / "t.de").write_text("eins\nzwei\n", encoding="utf-8")
    assert pairs_of(read_parallel_dir(tmp_path, "t", "en", "de")) == [("one", "eins"), ("two", "zwei")]


def test_reverse_direction(tmp_path: Path) -> None:
    write_text(tmp_path / "train.en", EN)
    write_text(tmp_path / "train.de", DE)
    dataset = read_parallel_dir(tmp_path, "train", "de", "en")
    assert pairs_of(dataset, "de", "en") == list(zip(DE, EN, strict=True))


def test_ambiguous_plain_and_gz(tmp_path: Path) -> None:
    write_text(tmp_path / "train.en", EN)
    write_text(tmp_path / "train.en", EN, gz=True)
    write_text(tmp_path / "train.de", DE)
    with pytest.raises(DataError, match="ambiguous") as info:
        read_parallel_dir(tmp_path, "train", "en", "de")
    assert str(tmp_path / "train.en") in str(info.value) and "train.en.gz" in str(info.value)


def test_missing_file_lists_existing(tmp_path: Path) -> None:
    write_text(tmp_path / "train.en", EN)
    write_text(tmp_path / "train.fr", EN)
    write_text(tmp_path / "val.de", DE, gz=True)
    with pytest.raises(DataError) as info:
        read_parallel_dir(tmp_path, "train", "en", "de")
    message = str(info.value)
    assert f"missing file {tmp_path / 'train.de'}" in message
    assert "train.en, train.fr" in message  # files of the split
    assert "val.de.gz" in message  # files of the language


def test_unknown_split_lists_available(tmp_path: Path) -> None:
    for split in ("train", "val"):
        write_text(tmp_path / f"{split}.en", EN)
        write_text(tmp_path / f"{split}.de", DE, gz=True)
    write_text(tmp_path / "extra.en", EN)  # only one language: not an available split
    with pytest.raises(DataError, match=r"unknown split 'dev'.*available splits for en-de: train, val"):
        read_parallel_dir(tmp_path, "dev", "en", "de")
    assert available_splits(tmp_path, "en", "de") == ["train", "val"]
    assert available_splits(tmp_path, "en", "fr") == []


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not a directory"):
        read_parallel_dir(tmp_path / "nope", "train", "en", "de")
    with pytest.raises(DataError, match="not a directory"):
        available_splits(tmp_path / "nope", "en", "de")


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("longer", ["en", "de"])
def test_unequal_line_counts(tmp_path: Path, gz: bool, longer: str) -> None:
    extra = ["one more", "and another"]
    en_path = write_text(tmp_path / "train.en", EN + (extra if longer == "en" else []), gz=gz)
    de_path = write_text(tmp_path / "train.de", DE + (extra if longer == "de" else []), gz=gz)
    with pytest.raises(DataError) as info:
        read_parallel_dir(tmp_path, "train", "en", "de")
    message = str(info.value)
    n_en, n_de = (5, 3) if longer == "en" else (3, 5)
    assert f"{en_path} has {n_en} lines" in message
    assert f"{de_path} has {n_de}" in message
    longer_path = en_path if longer == "en" else de_path
    assert f"line 4 exists only in {longer_path}" in message


@pytest.mark.parametrize("gz", [False, True])
def test_bad_utf8_names_line(tmp_path: Path, gz: bool) -> None:
    raw = b"fine\nalso fine\nbad \xff\xfe byte\nlast\n"
    path = tmp_path / ("train.de.gz" if gz else "train.de")
    if gz:
        with gzip.open(path, "wb") as handle:
            handle.write(raw)
    else:
        path.write_bytes(raw)
    write_text(tmp_path / "train.en", ["1", "2", "3", "4"])
    with pytest.raises(DataError, match=rf"{path}: line 3 is not valid UTF-8"):
        read_parallel_dir(tmp_path, "train", "en", "de")


@pytest.mark.parametrize("empty_side", ["en", "de"])
def test_empty_file(tmp_path: Path, empty_side: str) -> None:
    (tmp_path / f"train.{empty_side}").write_bytes(b"")
    other = "de" if empty_side == "en" else "en"
    write_text(tmp_path / f"train.{other}", EN)
    with pytest.raises(DataError, match=rf"{tmp_path / f'train.{empty_side}'}: file is empty"):
        read_parallel_dir(tmp_path, "train", "en", "de")


# --------------------------------------------------------------------------------------- empty-line policy
def test_empty_line_policy(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_text(tmp_path / "train.en", ["one", "", "three", "four", "  ", "six"])
    write_text(tmp_path / "train.de", ["eins", "zwei", " \t ", "vier", "", "sechs"])
    report = ReadReport()
    with caplog.at_level(logging.WARNING, logger="deep_nmt_hf.data"):
        dataset = read_parallel_dir(tmp_path, "train", "en", "de", report=report)
    assert pairs_of(dataset) == [("one", "eins"), ("four", "vier"), ("six", "sechs")]
    assert (report.total, report.kept, report.dropped, report.first_dropped) == (6, 3, 3, 2)
    assert report.sources == [str(tmp_path / "train.en"), str(tmp_path / "train.de")]
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "dropped 3 of 6" in warnings[0] and "first at line 2" in warnings[0]
    assert str(tmp_path / "train.en") in warnings[0]


def test_no_warning_when_nothing_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_text(tmp_path / "train.en", EN)
    write_text(tmp_path / "train.de", DE)
    report = ReadReport()
    with caplog.at_level(logging.WARNING, logger="deep_nmt_hf.data"):
        read_parallel_dir(tmp_path, "train", "en", "de", report=report)
    assert not caplog.records
    assert (report.total, report.kept, report.dropped, report.first_dropped) == (3, 3, 0, None)


def test_all_pairs_empty_is_an_error(tmp_path: Path) -> None:
    write_text(tmp_path / "train.en", ["", "x"])
    write_text(tmp_path / "train.de", ["y", " "])
    with pytest.raises(DataError, match="all 2 pairs are empty"):
        read_parallel_dir(tmp_path, "train", "en", "de")


# ---------------------------------------------------------------------------------------------- json lines
def write_jsonl_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def row(en: object, de: object) -> str:
    return json.dumps({"translation": {"en": en, "de": de}}, ensure_ascii=False)


def test_read_jsonl_with_policy(tmp_path: Path) -> None:
    path = write_jsonl_lines(
        tmp_path / "d.jsonl",
        [
            row("a cat", "eine Katze"),
            "",
            row(" ", "leer"),
            row(" two ", "zwei"),
            '{"translation": {"en": "x", "de": "y", "fr": "z"}, "id": 7}',
        ],
    )
    report = ReadReport()
    dataset = read_jsonl(path, "en", "de", report=report)
    assert pairs_of(dataset) == [("a cat", "eine Katze"), ("two", "zwei"), ("x", "y")]
    assert (report.total, report.kept, report.dropped, report.first_dropped) == (5, 3, 2, 2)


@pytest.mark.parametrize(
    ("bad_line", "pattern"),
    [
        ('{"translation": {"en": "a", "de": ', r"line 2 is not valid JSON"),
        ('{"en": "a", "de": "b"}', r"line 2 has no 'translation' key \(found keys \['de', 'en'\]\)"),
        ('["a", "b"]', r"line 2 has no 'translation' key \(found a JSON list\)"),
        ('{"translation": "a b"}', r"line 2: 'translation' is a str, not an object"),
        (
            '{"translation": {"en": "a", "fr": "b"}}',
            r"line 2: 'translation' has no 'de' key \(found languages \['en', 'fr'\]\)",
        ),
        ('{"translation": {"en": 3, "de": "b"}}', r"line 2: translation\['en'\] is 3, not a string"),
        ('{"translation": {"en": "a", "de": null}}', r"line 2: translation\['de'\] is None, not a string"),
    ],
)
def test_read_jsonl_errors(tmp_path: Path, bad_line: str, pattern: str) -> None:
    path = write_jsonl_lines(tmp_path / "d.jsonl", [row("ok", "gut"), bad_line, row("c", "d")])
    with pytest.raises(DataError, match=pattern) as info:
        read_jsonl(path, "en", "de")
    assert str(info.value).startswith(f"{path}: ")
    assert '{"translation": {"en": "...", "de": "..."}}' in str(info.value)


def test_read_jsonl_empty_missing_and_bad_utf8(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    with pytest.raises(DataError, match="empty.jsonl: file is empty"):
        read_jsonl(tmp_path / "empty.jsonl", "en", "de")
    with pytest.raises(DataError, match="missing file"):
        read_jsonl(tmp_path / "nope.jsonl", "en", "de")
    (tmp_path / "bad.jsonl").write_bytes(row("a", "b").encode() + b'\n{"translation": "\xc3"}\n')
    with pytest.raises(DataError, match="bad.jsonl: line 2 is not valid UTF-8"):
        read_jsonl(tmp_path / "bad.jsonl", "en", "de")


def test_write_read_jsonl_round_trip(tmp_path: Path) -> None:
    source = datasets.Dataset.from_dict(
        {
            "translation": [
                {"en": e, "de": d}
                for e, d in zip(EN + ['quote " and ü'], DE + ["Anführung „x“"], strict=True)
            ]
        }
    )
    path = tmp_path / "sub" / "train.jsonl"
    assert write_jsonl(source, path, "en", "de") == 4
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"translation": {"en": EN[0], "de": DE[0]}}
    assert "ü" in lines[3]  # written as UTF-8, not \u escapes
    again = read_jsonl(path, "en", "de")
    assert pairs_of(again) == pairs_of(source)
    assert sorted(os.listdir(path.parent)) == ["train.jsonl"]


def test_write_parallel_dir_round_trip(tmp_path: Path) -> None:
    pairs = list(zip(EN, DE, strict=True))
    assert write_parallel_dir(iter(pairs), tmp_path / "demo", "train", "en", "de") == 3
    assert sorted(os.listdir(tmp_path / "demo")) == ["train.de", "train.en"]
    assert (tmp_path / "demo" / "train.en").read_text(encoding="utf-8") == "".join(s + "\n" for s in EN)
    assert pairs_of(load_parallel(tmp_path / "demo", "train", "en", "de")) == pairs


# -------------------------------------------------------------------------------------------------- atomicity
def failing_rows(fail_at: int):
    for index, (en, de) in enumerate(zip(EN, DE, strict=True)):
        if index == fail_at:
            raise RuntimeError("source broke halfway")
        yield {"translation": {"en": en, "de": de}}


def test_write_jsonl_failure_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    with pytest.raises(RuntimeError, match="halfway"):
        write_jsonl(failing_rows(2), path, "en", "de")
    assert os.listdir(tmp_path) == []
    rows = [{"translation": {"en": "a", "de": "b"}}, {"translation": {"en": "a", "de": 5}}]
    with pytest.raises(DataError, match=r"row 1: translation\['de'\] is 5"):
        write_jsonl(rows, path, "en", "de")
    assert os.listdir(tmp_path) == []
    with pytest.raises(DataError, match="row 0 has no 'translation'"):
        write_jsonl([{"en": "a", "de": "b"}], path, "en", "de")
    assert os.listdir(tmp_path) == []


def test_write_jsonl_failure_keeps_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    write_jsonl([{"translation": {"en": "old", "de": "alt"}}], path, "en", "de")
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        write_jsonl(failing_rows(1), path, "en", "de")
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["out.jsonl"]


def test_write_parallel_dir_failure_leaves_nothing(tmp_path: Path) -> None:
    def pairs():
        yield ("a", "b")
        yield ("c", "d")
        raise RuntimeError("generator broke halfway")

    with pytest.raises(RuntimeError, match="halfway"):
        write_parallel_dir(pairs(), tmp_path, "train", "en", "de")
    assert os.listdir(tmp_path) == []
    with pytest.raises(DataError, match=r"train.de: line 2 is 7; expected a string"):
        write_parallel_dir([("a", "b"), ("c", 7)], tmp_path, "train", "en", "de")
    assert os.listdir(tmp_path) == []
    with pytest.raises(DataError, match=r"train.en: line 1 contains a line break"):
        write_parallel_dir([("a\nb", "c")], tmp_path, "train", "en", "de")
    with pytest.raises(DataError, match=r"pair 1 is 'ab'"):
        write_parallel_dir(["ab"], tmp_path, "train", "en", "de")
    assert os.listdir(tmp_path) == []


def test_write_parallel_dir_refuses_gz_twin(tmp_path: Path) -> None:
    write_text(tmp_path / "train.en", EN, gz=True)
    with pytest.raises(DataError, match="train.en.gz exists"):
        write_parallel_dir([("a", "b")], tmp_path, "train", "en", "de")
    assert os.listdir(tmp_path) == ["train.en.gz"]


# ---------------------------------------------------------------------------------------------------- dispatch
def test_load_parallel_dispatch(tmp_path: Path) -> None:
    write_text(tmp_path / "train.en", EN)
    write_text(tmp_path / "train.de", DE)
    expected = list(zip(EN, DE, strict=True))
    assert pairs_of(load_parallel(tmp_path, "train", "en", "de")) == expected
    assert pairs_of(load_parallel(str(tmp_path), "train", "en", "de")) == expected

    jsonl_dir = tmp_path / "j"
    jsonl_dir.mkdir()
    write_jsonl_lines(jsonl_dir / "valid.jsonl", [row("x", "y")])
    assert pairs_of(load_parallel(jsonl_dir, "valid", "en", "de")) == [("x", "y")]
    # a file path: the split is ignored
    assert pairs_of(load_parallel(jsonl_dir / "valid.jsonl", "whatever", "en", "de")) == [("x", "y")]
    with pytest.raises(DataError, match=r"unknown split 'test'.*available splits for en-de: valid"):
        load_parallel(jsonl_dir, "test", "en", "de")

    write_jsonl_lines(tmp_path / "train.jsonl", [row("x", "y")])
    with pytest.raises(DataError, match="ambiguous input for split 'train'"):
        load_parallel(tmp_path, "train", "en", "de")

    (tmp_path / "notes.txt").write_text("hi", encoding="utf-8")
    with pytest.raises(DataError, match="unsupported file type"):
        load_parallel(tmp_path / "notes.txt", "train", "en", "de")
    with pytest.raises(DataError, match="no such file or directory"):
        load_parallel(tmp_path / "missing", "train", "en", "de")
    with pytest.raises(DataError, match="no such file or directory"):
        load_parallel("./missing/train.jsonl", "train", "en", "de")


def test_same_language_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must differ"):
        read_parallel_dir(tmp_path, "train", "en", "en")


# ------------------------------------------------------------------------------------------------------- hub
def test_load_hub_dataset_on_local_jsonl(tmp_path: Path) -> None:
    path = write_jsonl_lines(
        tmp_path / "train.jsonl", [row("a cat", "eine Katze"), row("", "leer"), row("b", "c")]
    )
    report = ReadReport()
    dataset = load_hub_dataset(
        "json", "en", "de", "train", data_files=str(path), cache_dir=str(tmp_path / "cache"), report=report
    )
    assert dataset.column_names == ["translation"]
    assert pairs_of(dataset) == [("a cat", "eine Katze"), ("b", "c")]
    assert (report.total, report.kept, report.dropped, report.first_dropped) == (3, 2, 1, 2)
    with pytest.raises(DataError, match=r"cannot load split 'validation'"):
        load_hub_dataset(
            "json", "en", "de", "validation", data_files=str(path), cache_dir=str(tmp_path / "cache")
        )
    with pytest.raises(DataError, match=r"the 'translation' column .* expected a mapping with 'en' and 'fr'"):
        load_hub_dataset("json", "en", "fr", "train", data_files=str(path), cache_dir=str(tmp_path / "cache"))


def test_load_hub_dataset_flat_columns(tmp_path: Path) -> None:
    path = tmp_path / "flat.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"en": e, "de": d, "id": i}) for i, (e, d) in enumerate(zip(EN, DE, strict=True))
        ),
        encoding="utf-8",
    )
    cache = str(tmp_path / "cache")
    dataset = load_hub_dataset("json", "de", "en", "train", data_files=str(path), cache_dir=cache)
    assert dataset.column_names == ["translation"]
    assert pairs_of(dataset, "de", "en") == list(zip(DE, EN, strict=True))
    with pytest.raises(DataError, match=r"has columns \['en', 'de', 'id'\]; expected a 'translation' column"):
        load_hub_dataset("json", "en", "fr", "train", data_files=str(path), cache_dir=cache)


def test_load_hub_dataset_offline_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # force offline mode so that no network request (and no retry delay) happens
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    name = "deep-nmt-hf-tests/no-such-dataset"
    start = time.perf_counter()
    with pytest.raises(DataError) as info:
        load_parallel(name, "train", "en", "de", config_name="de-en")
    assert time.perf_counter() - start < 10
    message = str(info.value)
    assert name in message and "'de-en'" in message
    assert "Hub is unreachable" in message and "--data-dir" in message


# ------------------------------------------------------------------------------------------------ real data
@pytest.mark.shared_data
def test_multi30k(multi30k_dir: Path) -> None:
    assert available_splits(multi30k_dir, "en", "de") == ["test_2016_flickr", "train", "val"]
    expected = {"train": 29000, "val": 1014, "test_2016_flickr": 1000}
    start = time.perf_counter()
    for split, rows in expected.items():
        dataset = load_parallel(multi30k_dir, split, "en", "de")
        assert len(dataset) == rows, split
        first = dataset[0]["translation"]
        assert isinstance(first["en"], str) and isinstance(first["de"], str)
        assert first["en"].strip() and first["de"].strip()
        assert first["en"] != first["de"]
    assert time.perf_counter() - start < 5
