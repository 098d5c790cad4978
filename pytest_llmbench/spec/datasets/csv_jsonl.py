"""CSV and JSONL dataset files read as records, each with the line it starts on."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

from .columns import resolve_columns
from .rows import Record, object_record
from .source import DatasetError, DatasetSource, RowError


def decode(path: Path, encoding: str) -> str:
    # Decode the bytes ourselves: read_text() would translate newlines inside quoted CSV fields.
    data = path.read_bytes()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        message = f"cannot decode as {encoding}: {exc.reason}; set dataset.encoding"
        raise DatasetError(message, path, line) from None


def csv_records(
    text: str, source: DatasetSource, path: Path, needs_prompt: bool
) -> Iterator[Record]:
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
        yield Record(number, start, dict(zip(header, row, strict=True)))


def _csv_header(
    reader: Iterator[list[str]], source: DatasetSource, path: Path, needs_prompt: bool
) -> list[str]:
    try:
        header: list[str] = next(reader)
        duplicates = sorted({name for name in header if header.count(name) > 1})
        if duplicates:
            raise RowError(f"duplicate column names: {', '.join(duplicates)}")
        resolve_columns(source, header, needs_prompt)  # report a bad mapping once, at the header
    except (StopIteration, csv.Error):
        raise DatasetError("CSV file has no header row", path, 1) from None
    except RowError as exc:
        raise DatasetError(str(exc), path, 1) from None
    return header


def jsonl_records(text: str, path: Path) -> Iterator[Record]:
    lines = ((n, content) for n, content in enumerate(text.split("\n"), 1) if content.strip())
    for number, (line, content) in enumerate(lines, start=1):
        try:
            obj = json.loads(content)
        except json.JSONDecodeError as exc:
            message = f"invalid JSON: {exc.msg} (column {exc.colno})"
            raise DatasetError(message, path, line) from None
        except (ValueError, RecursionError) as exc:  # an int past 4,300 digits; deep nesting
            raise DatasetError(f"invalid JSON: {_json_limit(exc)}", path, line) from None
        if not isinstance(obj, dict):
            raise DatasetError(f"line is a JSON {type(obj).__name__}, not an object", path, line)
        yield object_record(number, line, obj)


def _json_limit(exc: ValueError | RecursionError) -> str:
    """What a JSON value past Python's limits is, in a line."""
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return str(exc).split(";")[0]
