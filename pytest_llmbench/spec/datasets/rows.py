"""Rows: the records a reader yields, mapped to :class:`DatasetRow` values.

The checks and conversions of a row's scalar cells, and the unique-id check over all rows. Which
column is which (``prompt:``, ``expected:``, ``id:``, ... or their default names) is resolved in
:mod:`.columns`; multiple-choice and image cells are converted in :mod:`.cells`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...yamlguard import ValueLimitError, check_value
from ..functions import FunctionTools, row_expected_calls, row_function_tools
from . import cells
from .columns import check_keys, resolve_columns
from .source import DatasetError, DatasetSource, RowError

# Characters that split or confuse pytest node ids ("file::name[param]").
#: Characters that split or confuse pytest node ids ("file::name[param]"); case ids replace them.
UNSAFE_ID = re.compile(r"(?:::|[\[\]/\s])+")


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
    assertions: tuple[Any, ...] = ()  # the row's own `assert:` items, as written
    judge_metrics: tuple[str, ...] = ()  # `judge_metrics` (360-eval: `user_defined_metrics`)
    turns: tuple[Any, ...] | None = None  # the row's own `turns:` (a conversation), as written
    context: tuple[str, ...] | None = None  # the `context` column (or `columns: {context: ..}`)
    tools: FunctionTools | None = None  # the row's function definitions (`dataset.tools`)
    #: the calls the row expects (`dataset.tool_calls`), as ``args_match: allowed`` steps
    tool_calls: tuple[Any, ...] | None = None

    @property
    def where(self) -> str:
        """``line N`` for a text file's row, ``row N`` otherwise."""
        return f"line {self.line}" if self.line is not None else f"row {self.number}"


@dataclass(frozen=True)
class Record:
    """A parsed row before mapping, and where it starts."""

    number: int  # 1-based data row number, blank rows not counted
    line: int | None  # CSV/JSONL line; None for table rows and factory rows
    fields: dict[str, Any]  # CSV: the columns; else the keys but `vars`
    extra_vars: Any = None  # `vars`, still unchecked
    task: Any = None  # `task`, still unchecked


@dataclass(frozen=True)
class Origin:
    """What the records come from: names it in errors, anchors relative image paths."""

    path: Path | None  # the file or folder; None for a factory
    label: str  # how a table row is named in messages: "row", "factory row"
    folder: Path  # relative image paths start here
    #: rows are cases written by hand (JSONL): a key a small typo away from a case key
    #: (``asert``) is an error, not data that leaves the case without its assertions
    strict: bool = False
    #: the names the eval file's prompt and system templates use (never taken for a typo)
    used: frozenset[str] = frozenset()


def object_record(number: int, line: int | None, obj: Mapping[str, Any]) -> Record:
    """A JSONL-shaped mapping (JSONL line, table row, factory item) as a record."""
    fields = {str(key): value for key, value in obj.items() if key != "vars"}
    return Record(number, line, fields, obj.get("vars"), obj.get("task"))


def build_row(
    record: Record, source: DatasetSource, origin: Origin, needs_prompt: bool
) -> DatasetRow:
    try:
        _check_shape(record)
        get = record.fields.get
        turns = _turns(get("turns"))
        cols = resolve_columns(source, list(record.fields), needs_prompt and turns is None)
        choices, labels = cells.choices(cols.choices, record.fields)
        images = cells.images(get(cols.images) if cols.images else None, origin.folder)
        renamed = {var: get(column) for var, column in source.columns.items()}
        shown = {cols.images: list(images)} if cols.images else {}  # refs, not image bytes
        if origin.strict:
            check_keys(record.fields, source, origin.used)
        tools, tool_calls = _tool_cells(record.fields, source)
        variables = {**record.fields, **shown, **renamed, **_vars(record.extra_vars)}
        context, variables = _context(variables)
        return DatasetRow(
            id=_case_id(get(cols.id) if cols.id else None, record.number),
            prompt=_row_prompt(get(cols.prompt or ""), cols.prompt, needs_prompt, turns),
            expected=_text(get(cols.expected) if cols.expected else None),
            vars=variables,
            tags=_tags(get(cols.tags) if cols.tags else None),
            task=_task(record.task),
            expected_output_tokens=_positive_int(get("expected_output_tokens")),
            threshold=_threshold(get("threshold")),
            line=record.line,
            number=record.number,
            images=images,
            choices=choices,
            choice_labels=labels,
            answer=cells.answer(get(cols.answer)) if cols.answer and choices else None,
            assertions=_assertions(get("assert")),
            judge_metrics=_names(get("judge_metrics") or get("user_defined_metrics")),
            turns=turns,
            tools=tools,
            tool_calls=tool_calls,
            context=context,
        )
    except RowError as exc:
        if record.line is not None:
            raise DatasetError(str(exc), origin.path, record.line) from None
        raise DatasetError(f"{origin.label} {record.number}: {exc}", origin.path) from None


def _check_shape(record: Record) -> None:
    """A row that holds itself or nests too deep (a factory's, a JSON line's) is refused here,
    before templates, pydantic or JSON walk it."""
    try:
        check_value(record.fields)
        check_value(record.extra_vars, within=("vars",))
    except ValueLimitError as exc:
        raise RowError(exc.message) from None


def _assertions(value: Any) -> tuple[Any, ...]:
    """A row's ``assert:``: a list of assertion items (a name or a mapping), checked now."""
    if value is None:
        return ()
    from ...scoring import parse_assertion

    items = value if isinstance(value, list) else [value]
    for index, item in enumerate(items):
        try:
            parse_assertion(item)
        except (TypeError, ValueError) as exc:  # AssertionSpecError is a ValueError
            raise RowError(f"assert[{index}]: {exc}") from None
    return tuple(items)


def _names(value: Any) -> tuple[str, ...]:
    """``judge_metrics`` as a list of names, or 360-eval's comma-separated string."""
    if value is None or value == "":
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not (isinstance(items, list) and all(map(is_str, items))):
        raise RowError("judge_metrics must be a list of names or a comma-separated string")
    return tuple(item.strip() for item in items if item.strip())


def _context(variables: dict[str, Any]) -> tuple[tuple[str, ...] | None, dict[str, Any]]:
    """The row's context chunks, and its vars with ``context`` as ``{{context}}`` renders it
    (a list-valued cell or a JSON-list string becomes the chunks joined by a blank line)."""
    from ..context import CONTEXT_VAR, ContextError, context_chunks, context_text

    try:
        chunks = context_chunks(variables.get(CONTEXT_VAR))
    except ContextError as exc:
        raise RowError(str(exc)) from None
    if chunks is None:
        return None, variables
    return chunks, {**variables, CONTEXT_VAR: context_text(chunks)}


def _turns(value: Any) -> tuple[Any, ...] | None:
    """A row's ``turns``: a list of turns (each checked when the case is made), or None."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise RowError(f"'turns' must be a list of turns, got {type(value).__name__}")
    return tuple(value)


def _row_prompt(
    value: Any, column: str | None, needs_prompt: bool, turns: tuple[Any, ...] | None
) -> str | None:
    """The row's prompt; a row with ``turns`` has none."""
    if column is None:
        return None
    if turns is None:
        return _prompt(value, column, needs_prompt)
    if value is not None and value != "":
        raise RowError(f"give either 'turns' or a prompt ({column!r}), not both")
    return None


def _tool_cells(
    fields: Mapping[str, Any], source: DatasetSource
) -> tuple[FunctionTools | None, tuple[Any, ...] | None]:
    """The row's function definitions and expected calls, from the mapped columns."""
    tools = calls = None
    try:
        if source.tools is not None:
            tools = row_function_tools(fields.get(source.tools.column), source.tools.dialect)
        if source.tool_calls is not None:
            mapped = source.tool_calls
            calls = row_expected_calls(fields.get(mapped.column), mapped.dialect, tools)
    except ValueError as exc:
        raise RowError(str(exc)) from None
    return tools, calls


def _prompt(value: Any, column: str, needs_prompt: bool) -> str | None:
    if not needs_prompt and (value is None or value == ""):
        return None
    if isinstance(value, list):
        value = _chat_prompt(value, column)
    if not isinstance(value, str):
        raise RowError(f"prompt {column!r} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise RowError(f"empty prompt in column {column!r}")
    return value


def _chat_prompt(value: list[Any], column: str) -> str:
    """A prompt cell written as chat messages (``[{role: user, content}]``, or BFCL's one turn
    of them, ``[[...]]``): its one user message's text."""
    if len(value) == 1 and isinstance(value[0], list):
        value = value[0]  # BFCL: a list of turns, each a list of messages
    roles = [item.get("role") if isinstance(item, dict) else None for item in value]
    if roles != ["user"] or not isinstance(value[0].get("content"), str):
        raise RowError(f"prompt {column!r}: a list of chat messages must be one user message "
                       f"{{role: user, content: text}} (roles here: {roles}); a conversation "
                       "goes in `turns`")  # fmt: skip
    return str(value[0]["content"])


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
        raise RowError(f"case id must be a string or an integer, got {type(value).__name__}")
    return UNSAFE_ID.sub("-", str(value).strip())


def _vars(value: Any) -> dict[str, Any]:
    if value is not None and not isinstance(value, dict):
        raise RowError(f"'vars' must be an object, got {type(value).__name__}")
    return value or {}


def _tags(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if items is not None and not (isinstance(items, list) and all(map(is_str, items))):
        raise RowError("tags must be a comma-separated string or a list of strings")
    return tuple(tag.strip() for tag in items or () if tag.strip())


def _task(value: Any) -> dict[str, str] | None:
    if value is not None and not (isinstance(value, dict) and all(map(is_str, value.values()))):
        raise RowError("'task' must be an object of strings (task_type, task_criteria)")
    return value


def _positive_int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RowError(f"expected_output_tokens must be a positive integer, got {value!r}")
    return value


def _threshold(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not 0.0 <= number <= 1.0:
        raise RowError(f"threshold must be a number from 0 to 1, got {value!r}")
    return number


def is_str(value: object) -> bool:
    return isinstance(value, str)


def check_unique_ids(rows: list[DatasetRow], origin: Origin) -> None:
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
