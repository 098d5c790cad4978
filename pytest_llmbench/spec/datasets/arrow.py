"""Parquet files, folders of parquet splits and Hugging Face ``save_to_disk`` folders.

A folder's splits are found by file name (``{split}.parquet``, shards, ``{split}/`` sub-folders)
or read from ``dataset_dict.json`` and ``state.json``; rows are read a batch at a time. pyarrow is
imported only here, and only when a table is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from .rows import Record, is_str, object_record
from .source import DatasetError, DatasetSource, Format

# A shard suffix of a split's file name: "train-00000-of-00002.parquet" is split "train".
_SHARD = re.compile(r"-\d+-of-\d+.*$")
_T = TypeVar("_T")


def parquet_files(source: DatasetSource, path: Path) -> list[Path]:
    """The parquet files to read: the file itself, or the chosen split's files in the folder."""
    if path.is_file():
        if source.split is not None:
            raise DatasetError("dataset.split needs a folder with splits, not a single file", path)
        return [path]
    splits = parquet_splits(path)
    if not splits:
        raise DatasetError("no parquet files in the folder (nor in data/ or its sub-folders)", path)
    return _pick_split(splits, source.split, path)


def parquet_splits(folder: Path) -> dict[str, list[Path]]:
    """Split name -> its files: ``{split}.parquet`` or shards ``{split}-00000-of-00002.parquet``
    in the folder or its ``data/``, else ``{split}/*.parquet`` sub-folders."""
    splits: dict[str, list[Path]] = {}
    files = sorted(folder.glob("*.parquet")) or sorted(folder.glob("data/*.parquet"))
    for file in files:
        splits.setdefault(_SHARD.sub("", file.stem), []).append(file)
    if not splits:
        for file in sorted(folder.glob("*/*.parquet")):
            splits.setdefault(file.parent.name, []).append(file)
    return splits


def hf_files(source: DatasetSource, path: Path) -> list[Path]:
    """The Arrow files of a ``save_to_disk`` folder (the chosen split of a DatasetDict)."""
    if not path.is_dir():
        raise DatasetError("format hf needs a save_to_disk folder, not a file", path)
    if (path / "dataset_dict.json").is_file():
        names = _json_file(path / "dataset_dict.json").get("splits")
        if not (isinstance(names, list) and all(map(is_str, names))):
            raise DatasetError("dataset_dict.json has no list of splits", path)
        folder = _pick_split({name: path / name for name in names}, source.split, path)
        return _hf_dataset_files(folder, None)
    return _hf_dataset_files(path, source.split)


def _hf_dataset_files(folder: Path, split: str | None) -> list[Path]:
    """The Arrow files a Dataset folder's state.json lists; ``split`` must be the one it holds."""
    state = _json_file(folder / "state.json")
    own = state.get("_split")
    if split is not None and split != own:
        held = f"only split {own!r}" if own else "no named splits"
        raise DatasetError(f"split {split!r} not found: this dataset has {held}", folder)
    entries = state.get("_data_files")
    if not isinstance(entries, list) or not entries:
        raise DatasetError("state.json lists no _data_files", folder)
    try:
        return [folder / entry["filename"] for entry in entries]
    except (TypeError, KeyError):
        raise DatasetError("state.json: each of _data_files needs a filename", folder) from None


def _json_file(path: Path) -> dict[str, Any]:
    if path.exists() and not path.is_file():  # a FIFO or a device would never end
        raise DatasetError(f"{path.name} is not a regular file", path.parent)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{path.name} not found", path.parent) from None
    except (OSError, ValueError, RecursionError) as exc:
        raise DatasetError(f"cannot read {path.name}: {exc}", path.parent) from None
    if not isinstance(data, dict):
        raise DatasetError(f"{path.name} is not a JSON object", path.parent)
    return data


def _pick_split(splits: dict[str, _T], wanted: str | None, path: Path) -> _T:
    names = ", ".join(splits)
    if wanted is not None:
        if wanted not in splits:
            raise DatasetError(f"split {wanted!r} not found; choose one of {names}", path)
        return splits[wanted]
    if len(splits) != 1:
        raise DatasetError(f"dataset.split: choose one of {names}", path)
    return next(iter(splits.values()))


def table_records(files: list[Path], form: Format) -> Iterator[Record]:
    """The rows of parquet or Arrow-stream files in order, read a batch at a time."""
    try:
        import pyarrow as pa  # type: ignore[import-untyped]
    except ImportError:
        what = "parquet" if form == "parquet" else "Hugging Face (Arrow)"
        message = f"{what} datasets need pyarrow: pip install 'pytest-llmbench[datasets]'"
        raise DatasetError(message, files[0] if files else None) from None

    number = 0
    for file in files:
        try:
            for batch in _batches(file, form):
                for row in batch.to_pylist():
                    number += 1
                    yield object_record(number, None, row)
        except (OSError, pa.ArrowException) as exc:
            what = "parquet" if form == "parquet" else "Arrow"
            detail = str(exc).strip().split("\n")[0]
            raise DatasetError(f"cannot read {what} file: {detail}", file) from None


def _batches(file: Path, form: Format) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    if form == "parquet":
        yield from pq.ParquetFile(file).iter_batches(batch_size=1024)
        return
    with pa.memory_map(str(file)) as stream:
        yield from pa.ipc.open_stream(stream)
