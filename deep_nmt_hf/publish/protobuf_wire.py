"""Protobuf's wire format, the part the converters read without the protobuf package: sentencepiece's `.model` file
(sentencepiece_model.py) and TensorFlow's checkpoint index (tf_checkpoint.py). Varints and a message's fields;
fixed-width values stay bytes (each reader knows what they hold)."""

from __future__ import annotations


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The base-128 varint at `pos` and the position after it; ValueError where the data ends inside it."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def read_fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one message: varints as int, 64- / 32-bit values as their 8 / 4 bytes,
    length-delimited values as bytes. ValueError for an unknown wire type or a truncated message."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(data, pos)
        elif wire in (1, 2, 5):
            if wire == 2:
                length, pos = read_varint(data, pos)
            else:
                length = 8 if wire == 1 else 4
            value, pos = data[pos : pos + length], pos + length
        else:
            raise ValueError(f"unknown protobuf wire type {wire}")
        if pos > len(data):
            raise ValueError("truncated message")
        out.append((number, wire, value))
    return out
