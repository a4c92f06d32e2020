"""Read a TensorFlow `tf.train.Saver` checkpoint (V2 format) without TensorFlow: name -> numpy array.

A V2 checkpoint is `PREFIX.index` plus `PREFIX.data-NNNNN-of-MMMMM` shards (tensorflow/core/util/tensor_bundle/
tensor_bundle.{h,cc}). The index is a LevelDB-style table (tensorflow/core/lib/io/table_builder.cc, block_builder.cc,
format.cc): a 48-byte footer (metaindex and index block handles, padding, the magic 0xdb4775248b80fb57), an index
block mapping keys to data-block handles, data blocks of prefix-compressed entries (varint shared / non-shared key
lengths, varint value length, key suffix, value) followed by restart offsets; each block is followed by a one-byte
compression type and a CRC. Entry "" holds the `BundleHeaderProto` (number of shards), every other entry a
`BundleEntryProto` (tensor_bundle.proto: dtype = 1, shape = 2, shard_id = 3, offset = 4, size = 5, crc32c = 6,
slices = 7): where in which shard the tensor's little-endian bytes lie.

TensorFlow writes bundles uncompressed (tensor_bundle.cc, `BundleWriter`: `options.compression =
table::kNoCompression`); a compressed block, a sliced (partitioned) variable or a string tensor is refused with
`UnsupportedCheckpoint`, and `read_checkpoint` then reads the file through TensorFlow when it is installed
(`pip install deep_nmt_hf[convert-tf]`).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np

from .protobuf_wire import read_fields, read_varint

MAGIC = 0xDB4775248B80FB57
FOOTER_LENGTH = 48
# tensorflow/core/framework/types.proto: DataType -> numpy dtype (little-endian)
DTYPES = {
    1: "<f4",
    2: "<f8",
    3: "<i4",
    4: "u1",
    5: "<i2",
    6: "i1",
    9: "<i8",
    10: "?",
    17: "<u2",
    19: "<f2",
    22: "<u4",
    23: "<u8",
}
BFLOAT16 = 14


class UnsupportedCheckpoint(ValueError):
    """A checkpoint feature this reader does not handle (TensorFlow may)."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    try:
        return read_varint(data, pos)
    except ValueError:
        raise UnsupportedCheckpoint("truncated varint in the checkpoint index") from None


def _fields(message: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of a protobuf message: varints, fixed32/64 as ints, length-delimited."""
    try:
        fields = read_fields(message)
    except ValueError as error:
        raise UnsupportedCheckpoint(f"{error} in the checkpoint index") from None
    fixed = {1: "<Q", 5: "<I"}
    return [(n, w, struct.unpack(fixed[w], v)[0] if w in fixed else v) for n, w, v in fields]


def _block(data: bytes, offset: int, size: int) -> list[tuple[bytes, bytes]]:
    """The (key, value) entries of the table block at `offset` (its `size` bytes, then type byte and CRC)."""
    if offset + size + 5 > len(data):
        raise UnsupportedCheckpoint("a block handle points past the end of the index file")
    if data[offset + size] != 0:
        raise UnsupportedCheckpoint(f"compressed index block (type {data[offset + size]})")
    contents = data[offset : offset + size]
    (restarts,) = struct.unpack_from("<I", contents, len(contents) - 4)
    end = len(contents) - 4 * (restarts + 1)
    entries, pos, key = [], 0, b""
    while pos < end:
        shared, pos = _varint(contents, pos)
        own, pos = _varint(contents, pos)
        length, pos = _varint(contents, pos)
        key = key[:shared] + contents[pos : pos + own]
        pos += own
        entries.append((key, contents[pos : pos + length]))
        pos += length
    return entries


def _handle(value: bytes) -> tuple[int, int]:
    offset, pos = _varint(value, 0)
    size, _ = _varint(value, pos)
    return offset, size


def _entry(name: str, value: bytes) -> dict:
    entry = {"dtype": 0, "shape": [], "shard_id": 0, "offset": 0, "size": 0}
    for number, _, field in _fields(value):
        if number == 1:
            entry["dtype"] = field
        elif number == 2:
            for dim_number, _, dim in _fields(field):
                if dim_number == 2:
                    size = next((v for n, _, v in _fields(dim) if n == 1), 0)
                    entry["shape"].append(size)
                elif dim_number == 3 and dim:
                    raise UnsupportedCheckpoint(f"{name}: a tensor of unknown rank")
        elif number == 3:
            entry["shard_id"] = field
        elif number == 4:
            entry["offset"] = field
        elif number == 5:
            entry["size"] = field
        elif number == 7:
            raise UnsupportedCheckpoint(f"{name}: a sliced (partitioned) variable")
    return entry


def checkpoint_prefix(path: str | Path) -> Path:
    """The checkpoint prefix `PATH` names: a prefix itself (PREFIX.index exists), its .index file, or a directory
    whose `checkpoint` file names the latest (`model_checkpoint_path`, read relative to the directory when the
    path it records, often the training machine's, does not exist here)."""
    path = Path(path)
    if path.suffix == ".index" and path.is_file():
        return path.with_suffix("")
    if Path(f"{path}.index").is_file():
        return path
    if path.is_dir():
        state = path / "checkpoint"
        if state.is_file():
            match = re.search(r'^model_checkpoint_path:\s*"(.*)"', state.read_text(encoding="utf-8"), re.M)
            if match:
                recorded = Path(match.group(1))
                # a relative path is relative to the directory (tf.train.get_checkpoint_state), never the cwd
                for candidate in (path / recorded, path / recorded.name):
                    if Path(f"{candidate}.index").is_file():
                        return candidate
        indexes = sorted(path.glob("*.index"))
        if len(indexes) == 1:
            return indexes[0].with_suffix("")
        if len(indexes) > 1:
            raise FileNotFoundError(
                f"{path} holds {len(indexes)} checkpoints ({indexes[0].name}, ...) and no `checkpoint` file naming "
                "one; give the prefix (e.g. DIR/model.ckpt-1000)"
            )
    raise FileNotFoundError(
        f"{path}: no TensorFlow checkpoint (no PREFIX.index, no `checkpoint` file naming one)"
    )


def read_index(prefix: str | Path) -> tuple[int, dict[str, dict]]:
    """(number of shards, tensor name -> its BundleEntryProto fields) of the checkpoint at `prefix`."""
    data = Path(f"{prefix}.index").read_bytes()
    if len(data) < FOOTER_LENGTH:
        raise UnsupportedCheckpoint(f"{prefix}.index is too short to be a checkpoint index")
    footer = data[-FOOTER_LENGTH:]
    (magic,) = struct.unpack_from("<Q", footer, FOOTER_LENGTH - 8)
    if magic != MAGIC:
        raise UnsupportedCheckpoint(f"{prefix}.index is not a TensorFlow V2 checkpoint index (bad magic)")
    _, pos = _varint(footer, 0)
    _, pos = _varint(footer, pos)  # the metaindex handle (empty in bundles)
    index_offset, pos = _varint(footer, pos)
    index_size, _ = _varint(footer, pos)
    shards, entries = 1, {}
    for _, handle in _block(data, index_offset, index_size):
        for key, value in _block(data, *_handle(handle)):
            if key == b"":  # BundleHeaderProto: num_shards = 1
                shards = next((v for n, _, v in _fields(value) if n == 1), 1)
                continue
            name = key.decode("utf-8")
            entries[name] = _entry(name, value)
    return shards, entries


def read_tensors(prefix: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of the V2 checkpoint at `prefix` (numeric dtypes; bfloat16 as float32)."""
    shards, entries = read_index(prefix)
    files: dict[int, bytes] = {}
    out = {}
    for name, entry in entries.items():
        dtype = entry["dtype"]
        if dtype not in DTYPES and dtype != BFLOAT16:
            raise UnsupportedCheckpoint(
                f"{name}: TensorFlow dtype {dtype} (a string or other non-numeric tensor)"
            )
        shard = entry["shard_id"]
        if shard not in files:
            files[shard] = Path(f"{prefix}.data-{shard:05d}-of-{shards:05d}").read_bytes()
        raw = files[shard][entry["offset"] : entry["offset"] + entry["size"]]
        count = int(np.prod(entry["shape"], dtype=np.int64)) if entry["shape"] else 1
        if dtype == BFLOAT16:
            values = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
            array = values.view(np.float32)
        else:
            array = np.frombuffer(raw, DTYPES[dtype])
        if array.size != count or len(raw) != entry["size"]:
            raise UnsupportedCheckpoint(
                f"{name}: {len(raw)} bytes for shape {entry['shape']} (a truncated shard?)"
            )
        out[name] = array.reshape(entry["shape"]).copy()
    return out


def read_checkpoint(path: str | Path) -> dict[str, np.ndarray]:
    """name -> array of the checkpoint at `path` (a prefix, its .index, or a directory with a `checkpoint` file):
    this module's reader; where it meets something it does not handle, TensorFlow's (the `[convert-tf]` extra)."""
    prefix = checkpoint_prefix(path)
    try:
        return read_tensors(prefix)
    except UnsupportedCheckpoint as err:
        try:
            import tensorflow as tf  # noqa: PLC0415  (optional: the [convert-tf] extra)
        except ImportError:
            raise UnsupportedCheckpoint(
                f"{prefix}: {err}; reading it needs TensorFlow: pip install deep_nmt_hf[convert-tf]"
            ) from None
        try:
            reader = tf.train.load_checkpoint(str(prefix))
            return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
        except Exception as tf_error:  # TensorFlow's own errors are many lines: one line naming both
            first = (
                str(tf_error).strip().splitlines()[0] if str(tf_error).strip() else type(tf_error).__name__
            )
            raise UnsupportedCheckpoint(
                f"{prefix}: {err}; TensorFlow cannot read it either: {first}"
            ) from None


__all__ = ["UnsupportedCheckpoint", "checkpoint_prefix", "read_checkpoint", "read_index", "read_tensors"]
