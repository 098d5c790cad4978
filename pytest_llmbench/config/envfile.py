"""The ``.env`` file of a run (``--env-file``, else ``.env`` in the rootdir), loaded into the
environment before the profiles read their keys; the real environment wins over the file."""

from __future__ import annotations

import io
import os
import re
from collections import ChainMap
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from .options import setting

if TYPE_CHECKING:
    from dotenv.parser import Binding


def load_env_file(config: pytest.Config) -> Path | None:
    raw = setting(config, "env_file")
    if raw:
        path = config.invocation_params.dir / raw
        if not path.is_file():
            raise pytest.UsageError(f"llmbench: --env-file not found: {path}")
    else:
        path = config.rootpath / ".env"
        if not path.is_file():
            return None
    text = _env_text(path)
    # The real environment wins over the file, as with most tools that read .env.
    for name, value in env_text_values(text, os.environ).items():
        if value is not None and name not in os.environ:
            try:
                os.environ[name] = value
            except ValueError:  # a name with '=' or an empty one: the OS refuses it
                message = f"llmbench: {path}: {name!r} is not a valid variable name"
                raise pytest.UsageError(message) from None
    return path


def _env_text(path: Path) -> str:
    """The text of an env file: UTF-8 (BOM tolerated), without NUL, which no variable can hold."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise pytest.UsageError(f"llmbench: {path}:{line}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise pytest.UsageError(f"llmbench: {path}: cannot read: {exc.strerror}") from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise pytest.UsageError(f"llmbench: {path}:{line}: a NUL character (binary file?)")
    return text


# -- .env files ---------------------------------------------------------------------------------
# python-dotenv's ``dotenv_values`` expands ``${VAR}`` in each value against a new dict holding
# a copy of the whole environment and of every value read before it: a file of n lines costs n
# copies of up to n values (quadratic: 50,000 lines took minutes, benchmarks/envfile.py). Its
# parser is linear, at some 10 to 25 us a line. The file reads the same, faster:
# - a line of the common shapes, NAME=value, NAME="value" or NAME='value' (``export`` and a
#   comment allowed) with no backslash nor line break in the quotes, no space nor '#' in a bare
#   value, or a comment line, is read by one match of _PLAIN at the start of that line:
#   python-dotenv reads such a line into the same name and value, having nothing to unescape;
# - any other statement (quotes, escapes, comments, multi-line values, a line it cannot parse,
#   with its warning) is read by python-dotenv's own parser, from the same place: a quoted value
#   spanning lines is read whole before the next line is looked at;
# - each value's ${NAME} and ${NAME:-default} are expanded by python-dotenv's own expansion,
#   against one view of the values read so far over the environment, looked up in place: one
#   lookup per reference, no copy.

#: A statement python-dotenv reads verbatim, at a line's start: a comment line, or an optional
#: ``export``, a plain name, ``=`` and a value that is double- or single-quoted without a
#: backslash or line break, or unquoted without space, quote, ``#`` or backslash; then spaces
#: and a comment, if any, and the end of the line (any of python-dotenv's line ends) or text.
_PLAIN = re.compile(
    r"""
    (?:
        \#[^\r\n]*
    |
        (?:export[ \t]+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)=
        (?:
            "(?P<double>[^"\\\r\n]*)"[ \t]*(?:\#[^\r\n]*)?
        |
            '(?P<single>[^'\\\r\n]*)'[ \t]*(?:\#[^\r\n]*)?
        |
            (?P<bare>[^\s'"\#\\]*)(?:[ \t]+(?:\#[^\r\n]*)?)?
        )
    )
    (?P<end>\r\n|\n|\r|\Z)
    """,
    re.VERBOSE,
)


def env_text_values(text: str, environ: Mapping[str, str]) -> dict[str, str | None]:
    """The variables a ``.env`` text sets, as ``dotenv_values(stream=...)`` gives them:
    ``${NAME}`` and ``${NAME:-default}`` expand to the value the file gave ``NAME`` on an
    earlier line, else ``environ``'s, else the default or ``""``; a later line of the same
    name replaces the value (lines after it see the new one); a name without ``=`` is None.
    """
    from dotenv.variables import parse_variables

    values: dict[str, str | None] = {}
    # python-dotenv merges both into a new dict for every line; a view reads them in place
    # (only read: nothing is written through it, so the environment needs no copy).
    earlier_then_environ = ChainMap(values, cast("MutableMapping[str, str | None]", environ))
    for name, value in _env_statements(text):
        if value is not None and "${" in value:
            value = "".join(atom.resolve(earlier_then_environ) for atom in parse_variables(value))
        values[name] = value
    return values


def _env_statements(text: str) -> Iterator[tuple[str, str | None]]:
    """The (name, value) statements of a ``.env`` text in order, as python-dotenv's parser
    gives them: a common line read by one match, anything else by that parser."""
    from dotenv import parser

    reader = parser.Reader(io.StringIO(text))
    string, position, end = reader.string, reader.position, len(reader.string)
    while position.chars < end:
        plain = _PLAIN.match(string, position.chars)
        if plain is None:
            binding = _warned(parser.parse_binding(reader))
            if binding.key is not None:
                yield binding.key, binding.value
            continue
        name, double, single, bare, ending = plain.group("name", "double", "single", "bare", "end")
        position.chars = plain.end()
        position.line += 1 if ending else 0
        if name is not None:  # else a comment line
            yield name, double if double is not None else single if single is not None else bare


def _warned(binding: Binding) -> Binding:
    """``binding``, after python-dotenv's own warning when it could not be parsed."""
    from dotenv.main import with_warn_for_invalid_lines

    (checked,) = with_warn_for_invalid_lines(iter((binding,)))
    return checked
