"""The ``dataset:`` value of an eval file, and the errors of reading what it names.

:class:`DatasetSource` validates the mapping (or the ``path`` shorthand) on its own; every
problem found while reading is a :class:`DatasetError`, and a problem with one row's values is a
:class:`RowError` until the reader adds where the row is.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

Format = Literal["csv", "jsonl", "parquet", "hf"]


class _DialectColumn(BaseModel):
    """A column whose cells are written in a dialect: ``{column, dialect}``, or the column's
    name alone (the default dialect)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    column: str = Field(min_length=1, description="The column")

    @model_validator(mode="before")
    @classmethod
    def _name_shorthand(cls, data: Any) -> Any:
        return {"column": data} if isinstance(data, str) else data


class ToolsColumn(_DialectColumn):
    """A column of function definitions offered to the model with the row's case."""

    dialect: Literal["openai", "bfcl"] = Field(
        "openai", description="openai (as tools: takes them) or bfcl (BFCL's type words)"
    )


class ToolCallsColumn(_DialectColumn):
    """A column of the calls the row expects (the ``tool-calls`` assertion checks them)."""

    dialect: Literal["bfcl"] = Field(
        "bfcl", description="bfcl: [{tool: {argument: [allowed values]}}], '' = may be left out"
    )


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
    format: Format | None = Field(
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
    tools: ToolsColumn | None = Field(
        default=None,
        description="Column of function definitions offered to the model per row: "
        "{column, dialect: openai | bfcl}",
    )
    tool_calls: ToolCallsColumn | None = Field(
        default=None,
        description="Column of the calls each row expects (tool-calls checks them): "
        "{column, dialect: bfcl}",
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


class RowError(ValueError):
    """A problem with one row's values; the caller adds where it is."""
