"""Load a dataset: pick the reader for the source, then shuffle, limit and map its records.

:func:`load_dataset` detects the format from the path (or takes ``format:``), opens the file,
folder or factory, and builds one :class:`DatasetRow` per selected record.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..paths import PathRefused, check_folder_entries, resolve_eval_path
from .arrow import hf_files, parquet_files, parquet_splits, table_records
from .csv_jsonl import csv_records, decode, jsonl_records
from .factory import factory_records
from .rows import DatasetRow, Origin, Record, build_row, check_unique_ids
from .source import DatasetError, DatasetSource, Format

_FORMATS: dict[str, Format] = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
}


def load_dataset(
    source: DatasetSource,
    base_dir: Path,
    *,
    needs_prompt: bool = True,
    roots: Sequence[Path] = (),
    used: frozenset[str] = frozenset(),
) -> list[DatasetRow]:
    """Read the rows of ``source``, its path (or factory module) taken relative to ``base_dir``.

    The file, or every file read from a folder, must be inside ``base_dir`` or ``roots`` (the
    rootdir and the allowed folders) and be no special file (:mod:`..paths`). With
    ``needs_prompt`` false (the eval file has a prompt template) a row may lack a prompt.
    Every column of a row, and every key of a JSONL row, is data (a template variable); a
    JSONL key a typo away from a case key (``asert``) is an error unless it is mapped or one
    of ``used``, the names the eval file's templates use.
    Raises :class:`DatasetError` for any problem with the source or its rows.
    """
    if source.factory is not None:
        origin = Origin(None, "factory row", base_dir)
        records = factory_records(source.factory, source.args, base_dir)
    else:
        path = _resolve_path(source, base_dir, roots)
        origin, records = _open(source, path, needs_prompt, (base_dir, roots))
        if origin.label == "row" and _format_of(source, path) == "jsonl":
            origin = dataclasses.replace(origin, strict=True, used=used)
    rows = [build_row(record, source, origin, needs_prompt) for record in _select(records, source)]
    if not rows:
        empty = (
            f"factory {source.factory} gave no rows"
            if source.factory
            else "dataset has no data rows"
        )
        raise DatasetError(empty, origin.path)
    check_unique_ids(rows, origin)
    return rows


def dataset_files(
    source: DatasetSource, base_dir: Path, roots: Sequence[Path] = ()
) -> tuple[Path, ...]:
    """The files :func:`load_dataset` reads for ``source``: the CSV or JSONL file, or a folder's
    parquet or Arrow files; none for a factory. Call it on a source that loaded."""
    if source.factory is not None:
        return ()
    path = _resolve_path(source, base_dir, roots)
    form = _format_of(source, path)
    if form in ("csv", "jsonl"):
        return (path,)
    files = parquet_files(source, path) if form == "parquet" else hf_files(source, path)
    return tuple(files)


def _select(records: Iterator[Record], source: DatasetSource) -> Iterator[Record]:
    """The records to load: all, or shuffled, then the first ``limit`` (reading no further)."""
    if source.shuffle:
        shuffled = list(records)
        random.Random(source.seed).shuffle(shuffled)
        records = iter(shuffled)
    return itertools.islice(records, source.limit)


def _resolve_path(source: DatasetSource, base_dir: Path, roots: Sequence[Path]) -> Path:
    assert source.path is not None
    try:
        path = resolve_eval_path(source.path, base_dir, roots)
    except PathRefused as exc:  # outside the project, special, or a name the OS refuses
        raise DatasetError(str(exc), None) from None
    if not path.exists():
        raise DatasetError(f"dataset file not found ({source.path!r} from {base_dir})", path)
    return path


def _inside(file: Path, project: tuple[Path, Sequence[Path]]) -> Path:
    """A file that a dataset folder leads to (a link, a ``state.json`` file name), checked as
    the dataset path is: ``project`` is the eval file's folder and the other roots."""
    try:
        # Named from the eval file's folder, as the dataset path is written.
        return resolve_eval_path(os.path.relpath(file, project[0]), *project)
    except PathRefused as exc:
        raise DatasetError(str(exc), None) from None


def _open(
    source: DatasetSource, path: Path, needs_prompt: bool, project: tuple[Path, Sequence[Path]]
) -> tuple[Origin, Iterator[Record]]:
    """The origin and the (lazy) records of the file or folder at ``path``."""
    form = _format_of(source, path)
    if form in ("csv", "jsonl"):
        if path.is_dir():
            raise DatasetError(f"format {form} needs a file, not a folder", path)
        if source.split is not None:
            raise DatasetError("dataset.split needs a folder with splits, not a single file", path)
        text = decode(path, source.encoding)
        if form == "csv":
            return Origin(path, "row", path.parent), csv_records(text, source, path, needs_prompt)
        return Origin(path, "row", path.parent), jsonl_records(text, path)
    folder = path if path.is_dir() else path.parent
    try:
        if path.is_dir():  # a FIFO among a table's files would block its reader
            check_folder_entries(path)
    except PathRefused as exc:
        raise DatasetError(str(exc), None) from None
    files = parquet_files(source, path) if form == "parquet" else hf_files(source, path)
    files = [_inside(file, project) for file in files]
    return Origin(path, "row", folder), table_records(files, form)


def _format_of(source: DatasetSource, path: Path) -> Format:
    if source.format is not None:
        return source.format
    if path.is_dir():
        if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
            return "hf"
        if parquet_splits(path):
            return "parquet"
        raise DatasetError(
            "folder is neither a Hugging Face save_to_disk folder (dataset_dict.json or "
            "state.json) nor a folder of parquet files",
            path,
        )
    if path.suffix.lower() not in _FORMATS:
        known = ", ".join(_FORMATS)
        message = f"unknown dataset extension {path.suffix!r} (known: {known})"
        raise DatasetError(f"{message}; set format: csv, jsonl or parquet", path)
    return _FORMATS[path.suffix.lower()]
