"""zero's vocabulary file read as zero reads it (bzhangGo/zero vocab.py `load_vocab`, Python 2: `open(path, 'r')`
iterates byte lines split on b"\\n", `token.strip()` strips ASCII whitespace only, `insert` skips a token seen
before)."""

from __future__ import annotations

from pathlib import Path

from deep_nmt_hf.publish.convert_zero import read_vocab


def test_unicode_line_breaks_and_spaces_inside_tokens_keep_every_id(tmp_path: Path) -> None:
    tokens = [
        "a\u2028b",
        "c\u0085",
        "\u00a0d\u00a0",
        "e\u2029f",
        "g",
    ]  # str.splitlines / str.strip would split or trim
    path = tmp_path / "vocab.zero"
    path.write_bytes(b" \t" + "\n".join(tokens).encode("utf-8") + b" \r\ng\n\n")
    assert read_vocab(path) == [
        "<pad>",
        "<unk>",
        "<eos>",
        *tokens,
        "",
    ]  # g again: skipped; the empty line: a token
