"""Eval cases loaded from dataset files, Hugging Face folders and Python factories.

An eval file may take its cases from a dataset instead of listing them inline::

    dataset: {path: data/qa.csv, prompt: question, expected: answer, id: qid}
    dataset: data/extraction.jsonl
    dataset: {path: hellaswag, split: validation, prompt: ctx, choices: endings, answer: label}
    dataset: {factory: "gen:addition", args: {n: 20}, shuffle: true, seed: 3}

Sources: CSV, JSONL, parquet files, folders of parquet files (one file or shard set per split),
Hugging Face ``save_to_disk`` folders (a ``Dataset`` or a ``DatasetDict``, Arrow IPC streams),
and a ``module:function`` factory that returns or yields JSONL-shaped mappings. pyarrow is
imported only when a parquet or Arrow source is read.

:class:`DatasetSource` is the ``dataset:`` value; :func:`load_dataset` reads what it names into
:class:`DatasetRow` values. Every problem is a :class:`DatasetError` naming the file (or the
factory) and the line of a CSV/JSONL file or the row of a table.
"""

from __future__ import annotations

import base64
import codecs
import csv
import io
import itertools
import json
import math
import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from .userimport import UserImportError, load_callable

__all__ = ["DatasetError", "DatasetRow", "DatasetSource", "load_dataset"]

_PROMPT_KEYS = ("text_prompt", "prompt", "question", "input")
_EXPECTED_KEYS = ("golden_answer", "expected", "answer", "output")
_CHOICES_KEYS = ("choices",)
_ANSWER_KEYS = ("answer",)
_IMAGE_KEYS = ("images", "image")
_Format = Literal["csv", "jsonl", "parquet", "hf"]
_FORMATS: dict[str, _Format] = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
}
# Characters that split or confuse pytest node ids ("file::name[param]").
_UNSAFE_ID = re.compile(r"(?:::|[\[\]/\s])+")
# A shard suffix of a split's file name: "train-00000-of-00002.parquet" is split "train".
_SHARD = re.compile(r"-\d+-of-\d+.*$")
_URL = re.compile(r"^(?:https?|data):", re.IGNORECASE)
_T = TypeVar("_T")


class DatasetSource(BaseModel):
    """Where an eval's cases come from, and how its columns map to case fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str | None = Field(
        default=None,
        min_length=1,
        description="Dataset file or folder, relative to the eval file's folder",
    )
    factory: str | None = Field(
        default=None,
        pattern=r"^[\w.]+:\w+$",
        description="module:function returning or yielding rows (instead of path)",
    )
    args: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments for the factory"
    )
    format: _Format | None = Field(
        default=None, description="csv, jsonl, parquet or hf; default: detected from the path"
    )
    split: str | None = Field(
        default=None, min_length=1, description="Split of a folder with several (train, test)"
    )
    shuffle: bool = Field(default=False, description="Shuffle the rows (before limit)")
    seed: int = Field(default=0, description="Seed of the shuffle")
    prompt: str | None = Field(
        default=None, description="Prompt column; default text_prompt, prompt, question or input"
    )
    expected: str | None = Field(
        default=None, description="Answer column; default golden_answer, expected, answer or output"
    )
    id: str | None = Field(default=None, description="Case id column; default id if present")
    tags: str | None = Field(default=None, description="Comma-separated tags column; default tags")
    columns: dict[str, str] = Field(
        default_factory=dict, description="Extra case vars copied from columns: {var: column}"
    )
    choices: str | tuple[str, ...] | None = Field(
        default=None,
        description="Choices: a list (or {text, label}) column, or a list of columns; "
        "default choices",
    )
    answer: str | None = Field(
        default=None, description="Column of the right choice; default answer (with choices)"
    )
    images: str | None = Field(
        default=None, description="Image column (paths, URLs, image structs); default images, image"
    )
    limit: PositiveInt | None = Field(default=None, description="Load only the first N rows")
    encoding: str = Field(default="utf-8-sig", description="Text encoding; default tolerates a BOM")

    @model_validator(mode="before")
    @classmethod
    def _path_shorthand(cls, data: Any) -> Any:
        """Accept ``dataset: data/qa.csv`` as ``dataset: {path: data/qa.csv}``."""
        return {"path": data} if isinstance(data, str) else data

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str) -> str:
        try:
            codecs.lookup(value)
        except LookupError:
            raise ValueError(f"unknown encoding {value!r}") from None
        return value

    @field_validator("choices")
    @classmethod
    def _some_choice_columns(cls, value: str | tuple[str, ...] | None) -> Any:
        if isinstance(value, tuple) and len(value) < 2:
            raise ValueError("a list of choice columns needs at least two")
        return value

    @model_validator(mode="after")
    def _one_origin(self) -> DatasetSource:
        if (self.path is None) == (self.factory is None):
            raise ValueError("give exactly one of path and factory")
        if self.factory is None and self.args:
            raise ValueError("args is for a factory")
        if self.factory is not None and (self.split or self.format):
            raise ValueError("split and format are for a path, not a factory")
        return self


class DatasetError(Exception):
    """A dataset problem; ``str()`` is the message, starting with ``path:line:`` or ``path:``.

    ``path`` is the resolved dataset file or folder (None for a factory, whose messages name
    it); ``line`` the 1-based line in a CSV/JSONL file, or None when the problem is with the file
    as a whole or with a table row (the message then says ``row N``).
    """

    def __init__(self, message: str, path: Path | None, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}" if path is not None else message)
        self.path = path
        self.line = line


@dataclass(frozen=True)
class DatasetRow:
    """One case read from a dataset."""

    id: str  # the id column's value made node-id safe, else f"row-{number}"
    prompt: str | None  # never empty; None only when the eval file has a prompt template
    expected: str | None  # None when the column is absent or the cell empty
    vars: dict[str, Any]  # every column (CSV: strings; else as stored), `columns:` and `vars` over
    tags: tuple[str, ...]  # from the tags column: comma-separated (CSV) or a list
    task: dict[str, str] | None  # `task`: 360-eval's {"task_type": ..., "task_criteria": ...}
    expected_output_tokens: int | None  # from the expected_output_tokens key or column
    threshold: float | None  # from the threshold key or column, 0..1
    line: int | None  # 1-based line where a CSV/JSONL row starts; None for tables and factories
    number: int  # 1-based row in the source, before any shuffle
    images: tuple[str, ...] = ()  # absolute paths, http(s) URLs or data: URLs
    choices: tuple[str, ...] | None = None  # the options of a multiple-choice row
    choice_labels: tuple[str, ...] | None = None  # their labels when the data gives them (ARC)
    answer: Any = None  # the right choice as stored (letter, index, label, text); None if unknown

    @property
    def where(self) -> str:
        """``line N`` for a text file's row, ``row N`` otherwise."""
        return f"line {self.line}" if self.line is not None else f"row {self.number}"


class _RowError(ValueError):
    """A problem with one row's values; the caller adds where it is."""


@dataclass(frozen=True)
class _Record:
    """A parsed row before mapping, and where it starts."""

    number: int  # 1-based data row number, blank rows not counted
    line: int | None  # CSV/JSONL line; None for table rows and factory rows
    fields: dict[str, Any]  # CSV: the columns; else the keys but `vars`
    extra_vars: Any = None  # `vars`, still unchecked
    task: Any = None  # `task`, still unchecked


@dataclass(frozen=True)
class _Origin:
    """What the records come from: names it in errors, anchors relative image paths."""

    path: Path | None  # the file or folder; None for a factory
    label: str  # how a table row is named in messages: "row", "factory row"
    folder: Path  # relative image paths start here


@dataclass(frozen=True)
class _Columns:
    """The keys a source's mapping resolves to, given the columns a row has."""

    prompt: str | None
    expected: str | None
    id: str | None
    tags: str | None
    choices: str | tuple[str, ...] | None
    answer: str | None
    images: str | None


def load_dataset(
    source: DatasetSource, base_dir: Path, *, needs_prompt: bool = True
) -> list[DatasetRow]:
    """Read the rows of ``source``, its path (or factory module) taken relative to ``base_dir``.

    With ``needs_prompt`` false (the eval file has a prompt template) a row may lack a prompt.
    Raises :class:`DatasetError` for any problem with the source or its rows.
    """
    if source.factory is not None:
        origin = _Origin(None, "factory row", base_dir)
        records = _factory_records(source.factory, source.args, base_dir)
    else:
        origin, records = _open(source, _resolve_path(source, base_dir), needs_prompt)
    rows = [_build_row(record, source, origin, needs_prompt) for record in _select(records, source)]
    if not rows:
        empty = (
            f"factory {source.factory} gave no rows"
            if source.factory
            else "dataset has no data rows"
        )
        raise DatasetError(empty, origin.path)
    _check_unique_ids(rows, origin)
    return rows


def _select(records: Iterator[_Record], source: DatasetSource) -> Iterator[_Record]:
    """The records to load: all, or shuffled, then the first ``limit`` (reading no further)."""
    if source.shuffle:
        shuffled = list(records)
        random.Random(source.seed).shuffle(shuffled)
        records = iter(shuffled)
    return itertools.islice(records, source.limit)


def _resolve_path(source: DatasetSource, base_dir: Path) -> Path:
    assert source.path is not None
    path = (base_dir / source.path).resolve()
    if not path.exists():
        raise DatasetError(f"dataset file not found ({source.path!r} from {base_dir})", path)
    return path


def _open(
    source: DatasetSource, path: Path, needs_prompt: bool
) -> tuple[_Origin, Iterator[_Record]]:
    """The origin and the (lazy) records of the file or folder at ``path``."""
    form = _format_of(source, path)
    if form in ("csv", "jsonl"):
        if path.is_dir():
            raise DatasetError(f"format {form} needs a file, not a folder", path)
        if source.split is not None:
            raise DatasetError("dataset.split needs a folder with splits, not a single file", path)
        text = _decode(path, source.encoding)
        if form == "csv":
            return _Origin(path, "row", path.parent), _csv_records(text, source, path, needs_prompt)
        return _Origin(path, "row", path.parent), _jsonl_records(text, path)
    folder = path if path.is_dir() else path.parent
    files = _parquet_files(source, path) if form == "parquet" else _hf_files(source, path)
    return _Origin(path, "row", folder), _table_records(files, form)


def _format_of(source: DatasetSource, path: Path) -> _Format:
    if source.format is not None:
        return source.format
    if path.is_dir():
        if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
            return "hf"
        if _parquet_splits(path):
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


def _decode(path: Path, encoding: str) -> str:
    # Decode the bytes ourselves: read_text() would translate newlines inside quoted CSV fields.
    data = path.read_bytes()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        message = f"cannot decode as {encoding}: {exc.reason}; set dataset.encoding"
        raise DatasetError(message, path, line) from None


# --- CSV and JSONL ---------------------------------------------------------------------------


def _csv_records(
    text: str, source: DatasetSource, path: Path, needs_prompt: bool
) -> Iterator[_Record]:
    # strict: an unterminated quote is an error instead of swallowing the rest of the file.
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header = _csv_header(reader, source, path, needs_prompt)
    number = 0
    while True:
        start = reader.line_num + 1  # line_num counts physical lines, so multi-line fields work
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DatasetError(f"malformed CSV row: {exc}", path, start) from None
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(header):
            message = f"row has {len(row)} fields but the header has {len(header)}"
            raise DatasetError(message, path, start)
        number += 1
        row += [""] * (len(header) - len(row))  # short rows: missing trailing cells are empty
        yield _Record(number, start, dict(zip(header, row, strict=True)))


def _csv_header(
    reader: Iterator[list[str]], source: DatasetSource, path: Path, needs_prompt: bool
) -> list[str]:
    try:
        header: list[str] = next(reader)
        duplicates = sorted({name for name in header if header.count(name) > 1})
        if duplicates:
            raise _RowError(f"duplicate column names: {', '.join(duplicates)}")
        _resolve_columns(source, header, needs_prompt)  # report a bad mapping once, at the header
    except (StopIteration, csv.Error):
        raise DatasetError("CSV file has no header row", path, 1) from None
    except _RowError as exc:
        raise DatasetError(str(exc), path, 1) from None
    return header


def _jsonl_records(text: str, path: Path) -> Iterator[_Record]:
    lines = ((n, content) for n, content in enumerate(text.split("\n"), 1) if content.strip())
    for number, (line, content) in enumerate(lines, start=1):
        try:
            obj = json.loads(content)
        except json.JSONDecodeError as exc:
            message = f"invalid JSON: {exc.msg} (column {exc.colno})"
            raise DatasetError(message, path, line) from None
        if not isinstance(obj, dict):
            raise DatasetError(f"line is a JSON {type(obj).__name__}, not an object", path, line)
        yield _object_record(number, line, obj)


def _object_record(number: int, line: int | None, obj: Mapping[str, Any]) -> _Record:
    """A JSONL-shaped mapping (JSONL line, table row, factory item) as a record."""
    fields = {str(key): value for key, value in obj.items() if key != "vars"}
    return _Record(number, line, fields, obj.get("vars"), obj.get("task"))


# --- parquet and Hugging Face folders -------------------------------------------------------


def _parquet_files(source: DatasetSource, path: Path) -> list[Path]:
    """The parquet files to read: the file itself, or the chosen split's files in the folder."""
    if path.is_file():
        if source.split is not None:
            raise DatasetError("dataset.split needs a folder with splits, not a single file", path)
        return [path]
    splits = _parquet_splits(path)
    if not splits:
        raise DatasetError("no parquet files in the folder (nor in data/ or its sub-folders)", path)
    return _pick_split(splits, source.split, path)


def _parquet_splits(folder: Path) -> dict[str, list[Path]]:
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


def _hf_files(source: DatasetSource, path: Path) -> list[Path]:
    """The Arrow files of a ``save_to_disk`` folder (the chosen split of a DatasetDict)."""
    if not path.is_dir():
        raise DatasetError("format hf needs a save_to_disk folder, not a file", path)
    if (path / "dataset_dict.json").is_file():
        names = _json_file(path / "dataset_dict.json").get("splits")
        if not (isinstance(names, list) and all(map(_is_str, names))):
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
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{path.name} not found", path.parent) from None
    except (OSError, ValueError) as exc:
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


def _table_records(files: list[Path], form: _Format) -> Iterator[_Record]:
    """The rows of parquet or Arrow-stream files in order, read a batch at a time."""
    import pyarrow as pa  # type: ignore[import-untyped]

    number = 0
    for file in files:
        try:
            for batch in _batches(file, form):
                for row in batch.to_pylist():
                    number += 1
                    yield _object_record(number, None, row)
        except (OSError, pa.ArrowException) as exc:
            what = "parquet" if form == "parquet" else "Arrow"
            detail = str(exc).strip().split("\n")[0]
            raise DatasetError(f"cannot read {what} file: {detail}", file) from None


def _batches(file: Path, form: _Format) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    if form == "parquet":
        yield from pq.ParquetFile(file).iter_batches(batch_size=1024)
        return
    with pa.memory_map(str(file)) as stream:
        yield from pa.ipc.open_stream(stream)


# --- factories -------------------------------------------------------------------------------


def _factory_records(ref: str, args: dict[str, Any], base_dir: Path) -> Iterator[_Record]:
    """The mappings the factory returns or yields, as records; its errors become ours."""
    try:
        function = load_callable(ref, base_dir)
    except UserImportError as exc:
        raise DatasetError(f"factory {exc}", None) from None
    result = _guarded(ref, lambda: function(**args))
    if isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
        kind = type(result).__name__
        raise DatasetError(f"factory {ref} returned {kind}, not an iterable of mappings", None)
    items = _guarded(ref, lambda: iter(result))
    for number in itertools.count(1):
        item = _guarded(ref, lambda: next(items, _END))
        if item is _END:
            return
        if not isinstance(item, Mapping):
            kind = type(item).__name__
            raise DatasetError(f"factory row {number}: expected a mapping, got {kind}", None)
        yield _object_record(number, None, item)


_END = object()


def _guarded(ref: str, step: Callable[[], _T]) -> _T:
    """``step()``, any exception of the user's code becoming a one-line DatasetError."""
    try:
        return step()
    except Exception as exc:
        raise DatasetError(f"factory {ref} raised {type(exc).__name__}: {exc}", None) from None


# --- rows ------------------------------------------------------------------------------------


def _build_row(
    record: _Record, source: DatasetSource, origin: _Origin, needs_prompt: bool
) -> DatasetRow:
    try:
        cols = _resolve_columns(source, list(record.fields), needs_prompt)
        get = record.fields.get
        choices, labels = _choices(cols.choices, record.fields)
        images = _images(get(cols.images) if cols.images else None, origin.folder)
        renamed = {var: get(column) for var, column in source.columns.items()}
        shown = {cols.images: list(images)} if cols.images else {}  # refs, not image bytes
        return DatasetRow(
            id=_case_id(get(cols.id) if cols.id else None, record.number),
            prompt=_prompt(get(cols.prompt), cols.prompt, needs_prompt) if cols.prompt else None,
            expected=_text(get(cols.expected) if cols.expected else None),
            vars={**record.fields, **shown, **renamed, **_vars(record.extra_vars)},
            tags=_tags(get(cols.tags) if cols.tags else None),
            task=_task(record.task),
            expected_output_tokens=_positive_int(get("expected_output_tokens")),
            threshold=_threshold(get("threshold")),
            line=record.line,
            number=record.number,
            images=images,
            choices=choices,
            choice_labels=labels,
            answer=_answer(get(cols.answer)) if cols.answer and choices else None,
        )
    except _RowError as exc:
        if record.line is not None:
            raise DatasetError(str(exc), origin.path, record.line) from None
        raise DatasetError(f"{origin.label} {record.number}: {exc}", origin.path) from None


def _resolve_columns(source: DatasetSource, available: list[str], needs_prompt: bool) -> _Columns:
    def pick(key: str, column: str | None, defaults: tuple[str, ...]) -> str | None:
        if column is not None and column not in available:
            raise _RowError(f"column {column!r} (dataset.{key}) not found; available: {names}")
        return column or next((name for name in defaults if name in available), None)

    names = ", ".join(map(repr, available)) or "(none)"
    prompt = pick("prompt", source.prompt, _PROMPT_KEYS)
    if prompt is None and needs_prompt:
        raise _RowError(
            f"no prompt column (looked for {', '.join(_PROMPT_KEYS)}); available: {names}; "
            "set dataset.prompt to the column holding the prompt"
        )
    for var, column in source.columns.items():
        pick(f"columns.{var}", column, ())
    if isinstance(source.choices, tuple):
        choices: str | tuple[str, ...] | None = source.choices
        for column in source.choices:
            pick("choices", column, ())
    else:
        choices = pick("choices", source.choices, _CHOICES_KEYS)
    if source.answer is not None and choices is None:
        raise _RowError("dataset.answer needs choices: set dataset.choices or add a choices column")
    answer = pick("answer", source.answer, _ANSWER_KEYS if choices else ())
    # With choices the answer column names the right choice; it is not the expected text.
    expected_defaults = tuple(name for name in _EXPECTED_KEYS if name != answer)
    return _Columns(
        prompt=prompt,
        expected=pick("expected", source.expected, expected_defaults),
        id=pick("id", source.id, ("id",)),
        tags=pick("tags", source.tags, ("tags",)),
        choices=choices,
        answer=answer,
        images=pick("images", source.images, _IMAGE_KEYS),
    )


def _prompt(value: Any, column: str, needs_prompt: bool) -> str | None:
    if not needs_prompt and (value is None or value == ""):
        return None
    if not isinstance(value, str):
        raise _RowError(f"prompt {column!r} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise _RowError(f"empty prompt in column {column!r}")
    return value


def _text(value: Any) -> str | None:
    """An expected answer as text: "" means none; structured values and numbers become JSON."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _case_id(value: Any, number: int) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        return f"row-{number}"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _RowError(f"case id must be a string or an integer, got {type(value).__name__}")
    return _UNSAFE_ID.sub("-", str(value).strip())


def _vars(value: Any) -> dict[str, Any]:
    if value is not None and not isinstance(value, dict):
        raise _RowError(f"'vars' must be an object, got {type(value).__name__}")
    return value or {}


def _tags(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if items is not None and not (isinstance(items, list) and all(map(_is_str, items))):
        raise _RowError("tags must be a comma-separated string or a list of strings")
    return tuple(tag.strip() for tag in items or () if tag.strip())


def _task(value: Any) -> dict[str, str] | None:
    if value is not None and not (isinstance(value, dict) and all(map(_is_str, value.values()))):
        raise _RowError("'task' must be an object of strings (task_type, task_criteria)")
    return value


def _positive_int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _RowError(f"expected_output_tokens must be a positive integer, got {value!r}")
    return value


def _threshold(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not 0.0 <= number <= 1.0:
        raise _RowError(f"threshold must be a number from 0 to 1, got {value!r}")
    return number


# --- multiple choice and images --------------------------------------------------------------


def _choices(
    columns: str | tuple[str, ...] | None, fields: dict[str, Any]
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """The row's choices and their labels, from a list or {text, label} column or columns."""
    if columns is None:
        return None, None
    if isinstance(columns, tuple):
        return tuple(_choice_text(fields[column], column) for column in columns), None
    value = _json_list(fields[columns])
    if value is None or value == "":
        return None, None
    labels = None
    if isinstance(value, dict) and "text" in value:  # ARC: {"text": [...], "label": [...]}
        value, labels = value["text"], _choice_list(value.get("label"), columns, "labels")
    texts = _choice_list(value, columns, "choices")
    if labels is not None and len(labels) != len(texts or ()):
        raise _RowError(f"{columns!r} has {len(labels)} labels for {len(texts or ())} choices")
    return texts, labels


def _choice_list(value: Any, column: str, what: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise _RowError(f"{what} in {column!r} must be a non-empty list, got {value!r:.60}")
    return tuple(_choice_text(item, column) for item in value)


def _choice_text(value: Any, column: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise _RowError(f"a choice in {column!r} must be a non-empty string, got {value!r:.60}")
    return value


def _answer(value: Any) -> Any:
    return None if value is None or value == "" else value


def _images(value: Any, folder: Path) -> tuple[str, ...]:
    """Image refs from a path, URL, image struct ``{bytes, path}`` or a list of them."""
    value = _json_list(value)
    items = value if isinstance(value, list) else [value]
    return tuple(ref for item in items if (ref := _image_ref(item, folder)) is not None)


def _image_ref(item: Any, folder: Path) -> str | None:
    if isinstance(item, dict) and {"bytes", "path"} >= item.keys():  # a Hugging Face Image
        item = item.get("bytes") or item.get("path")
    if item is None or item == "":
        return None
    if isinstance(item, (bytes, bytearray)):
        return _data_url(bytes(item))
    if not isinstance(item, str):
        raise _RowError(f"an image must be a path, a URL or image bytes, got {item!r:.60}")
    return item if _URL.match(item) else str((folder / item).resolve())


def _data_url(data: bytes) -> str:
    from .vision import sniff_image_type

    mime = sniff_image_type(data[:16])
    if mime is None:
        raise _RowError("image bytes are not a png, jpeg, gif or webp image")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _json_list(value: Any) -> Any:
    """A CSV cell holding a JSON list, parsed; any other value as it is."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise _RowError(f"cell {value!r:.60} starts with '[' but is not a JSON list") from None
    return value


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _check_unique_ids(rows: list[DatasetRow], origin: _Origin) -> None:
    first: dict[str, DatasetRow] = {}
    for row in rows:
        if row.id in first:
            unit = "lines" if row.line is not None else f"{origin.label}s"
            earlier = first[row.id]
            places = f"{earlier.line or earlier.number} and {row.line or row.number}"
            raise DatasetError(
                f"duplicate case id {row.id!r} at {unit} {places} "
                "(ids are compared after '[', ']', '::', '/' and whitespace become '-')",
                origin.path,
                row.line,
            )
        first[row.id] = row
