"""Eval cases loaded from CSV and JSONL dataset files.

An eval file may take its cases from a dataset instead of listing them inline::

    dataset: {path: data/qa.csv, prompt: question, expected: answer, id: qid}
    dataset: data/extraction.jsonl

:class:`DatasetSource` is the ``dataset:`` value; :func:`load_dataset` reads the file it names
into :class:`DatasetRow` values. Every problem is a :class:`DatasetError` that names the file
and, where it applies, the line in the dataset file.
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

__all__ = ["DatasetError", "DatasetRow", "DatasetSource", "load_dataset"]

_PROMPT_KEYS = ("text_prompt", "prompt", "question", "input")
_EXPECTED_KEYS = ("golden_answer", "expected", "answer", "output")
_Format = Literal["csv", "jsonl"]
_FORMATS: dict[str, _Format] = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
# Characters that split or confuse pytest node ids ("file::name[param]").
_UNSAFE_ID = re.compile(r"(?:::|[\[\]/\s])+")


class DatasetSource(BaseModel):
    """Where an eval's cases come from: a dataset file and how its columns map to case fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1, description="Dataset file, relative to the eval file's folder")
    format: _Format | None = Field(default=None, description="csv or jsonl; default: by extension")
    prompt: str | None = Field(
        default=None, description="Prompt column; default text_prompt, prompt, question or input"
    )
    expected: str | None = Field(
        default=None, description="Answer column; default golden_answer, expected, answer or output"
    )
    id: str | None = Field(default=None, description="Case id column; default id if present")
    tags: str | None = Field(default=None, description="Comma-separated tags column; default tags")
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


class DatasetError(Exception):
    """A dataset problem; ``str()`` is the message, starting with ``path:line:``.

    ``path`` is the resolved dataset file; ``line`` the 1-based line in it, or None when the
    problem is with the file as a whole.
    """

    def __init__(self, message: str, path: Path, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


@dataclass(frozen=True)
class DatasetRow:
    """One case read from a dataset file."""

    id: str  # the id column's value made node-id safe, else f"row-{n}" (n: 1-based data row)
    prompt: str  # never empty
    expected: str | None  # None when the column is absent or the cell empty
    vars: dict[str, Any]  # every column (CSV: strings; JSONL: top-level keys), JSONL `vars` over it
    tags: tuple[str, ...]  # from the tags column: comma-separated (CSV) or a list (JSONL)
    task: dict[str, str] | None  # JSONL `task`: 360-eval's {"task_type": ..., "task_criteria": ...}
    expected_output_tokens: int | None  # from the expected_output_tokens key or column
    threshold: float | None  # from the threshold key or column, 0..1
    line: int  # 1-based line in the dataset file where the row starts


class _RowError(ValueError):
    """A problem with one row's values; the caller adds the file and line."""


@dataclass(frozen=True)
class _Record:
    """A parsed row before mapping, and where it starts."""

    number: int  # 1-based data row number, blank rows not counted
    line: int
    fields: dict[str, Any]  # CSV: the columns; JSONL: the top-level keys but `vars`
    extra_vars: Any = None  # JSONL `vars`, still unchecked
    task: Any = None  # JSONL `task`, still unchecked


@dataclass(frozen=True)
class _Columns:
    """The keys a source's mapping resolves to, given the columns a row has."""

    prompt: str
    expected: str | None
    id: str | None
    tags: str | None


def load_dataset(source: DatasetSource, base_dir: Path) -> list[DatasetRow]:
    """Read the rows of ``source``, its path taken relative to ``base_dir``.

    Raises :class:`DatasetError` for any problem with the file or its rows.
    """
    path = _resolve_path(source, base_dir)
    text = _decode(path, source.encoding)
    records = _csv_records if _format_of(source, path) == "csv" else _jsonl_records
    first = itertools.islice(records(text, source, path), source.limit)
    rows = [_build_row(record, source, path) for record in first]
    if not rows:
        raise DatasetError("dataset has no data rows", path)
    _check_unique_ids(rows, path)
    return rows


def _resolve_path(source: DatasetSource, base_dir: Path) -> Path:
    path = (base_dir / source.path).resolve()
    if not path.is_file():
        raise DatasetError(f"dataset file not found ({source.path!r} from {base_dir})", path)
    return path


def _format_of(source: DatasetSource, path: Path) -> _Format:
    if source.format is not None:
        return source.format
    if path.suffix.lower() not in _FORMATS:
        known = ", ".join(_FORMATS)
        message = f"unknown dataset extension {path.suffix!r} (known: {known})"
        raise DatasetError(f"{message}; set format: csv or jsonl", path)
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


def _csv_records(text: str, source: DatasetSource, path: Path) -> Iterator[_Record]:
    # strict: an unterminated quote is an error instead of swallowing the rest of the file.
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header = _csv_header(reader, source, path)
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


def _csv_header(reader: Iterator[list[str]], source: DatasetSource, path: Path) -> list[str]:
    try:
        header: list[str] = next(reader)
        duplicates = sorted({name for name in header if header.count(name) > 1})
        if duplicates:
            raise _RowError(f"duplicate column names: {', '.join(duplicates)}")
        _resolve_columns(source, header)  # report a bad mapping once, at the header
    except (StopIteration, csv.Error):
        raise DatasetError("CSV file has no header row", path, 1) from None
    except _RowError as exc:
        raise DatasetError(str(exc), path, 1) from None
    return header


def _jsonl_records(text: str, source: DatasetSource, path: Path) -> Iterator[_Record]:
    lines = ((n, content) for n, content in enumerate(text.split("\n"), 1) if content.strip())
    for number, (line, content) in enumerate(lines, start=1):
        try:
            obj = json.loads(content)
        except json.JSONDecodeError as exc:
            message = f"invalid JSON: {exc.msg} (column {exc.colno})"
            raise DatasetError(message, path, line) from None
        if not isinstance(obj, dict):
            raise DatasetError(f"line is a JSON {type(obj).__name__}, not an object", path, line)
        fields = {key: value for key, value in obj.items() if key != "vars"}
        yield _Record(number, line, fields, obj.get("vars"), obj.get("task"))


def _build_row(record: _Record, source: DatasetSource, path: Path) -> DatasetRow:
    try:
        cols = _resolve_columns(source, list(record.fields))
        get = record.fields.get
        return DatasetRow(
            id=_case_id(get(cols.id) if cols.id else None, record.number),
            prompt=_prompt(get(cols.prompt), cols.prompt),
            expected=_text(get(cols.expected) if cols.expected else None),
            vars={**record.fields, **_vars(record.extra_vars)},
            tags=_tags(get(cols.tags) if cols.tags else None),
            task=_task(record.task),
            expected_output_tokens=_positive_int(get("expected_output_tokens")),
            threshold=_threshold(get("threshold")),
            line=record.line,
        )
    except _RowError as exc:
        raise DatasetError(str(exc), path, record.line) from None


def _resolve_columns(source: DatasetSource, available: list[str]) -> _Columns:
    def pick(key: str, column: str | None, defaults: tuple[str, ...]) -> str | None:
        if column is not None and column not in available:
            names = ", ".join(map(repr, available)) or "(none)"
            raise _RowError(f"column {column!r} (dataset.{key}) not found; available: {names}")
        return column or next((name for name in defaults if name in available), None)

    prompt = pick("prompt", source.prompt, _PROMPT_KEYS)
    if prompt is None:
        names = ", ".join(map(repr, available)) or "(none)"
        raise _RowError(
            f"no prompt column (looked for {', '.join(_PROMPT_KEYS)}); available: {names}; "
            "set dataset.prompt to the column holding the prompt"
        )
    expected = pick("expected", source.expected, _EXPECTED_KEYS)
    case_id, tags = pick("id", source.id, ("id",)), pick("tags", source.tags, ("tags",))
    return _Columns(prompt, expected, case_id, tags)


def _prompt(value: Any, column: str) -> str:
    if not isinstance(value, str):
        raise _RowError(f"prompt {column!r} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise _RowError(f"empty prompt in column {column!r}")
    return value


def _text(value: Any) -> str | None:
    """An expected answer as text: "" means none; structured JSONL values become JSON."""
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


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


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _check_unique_ids(rows: list[DatasetRow], path: Path) -> None:
    first_line: dict[str, int] = {}
    for row in rows:
        if row.id in first_line:
            raise DatasetError(
                f"duplicate case id {row.id!r} at lines {first_line[row.id]} and {row.line} "
                "(ids are compared after '[', ']', '::', '/' and whitespace become '-')",
                path,
                row.line,
            )
        first_line[row.id] = row.line
