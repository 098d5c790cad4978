"""The options page of the docs, generated from the plugin's own option registration.

An MkDocs hook (``hooks:`` in mkdocs.yml): ``docs/options.md`` holds a marker, and each build
replaces it with a table of every command-line option and ini key that ``pytest_addoption``
registers, with the help text pytest shows in ``pytest --help``. The option table in
``pytest_llmbench/config/options.py`` stays the one copy: nothing here restates an option.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: What docs/options.md holds where the generated tables go.
MARKER = "<!-- llmbench-options -->"
#: The option group ``pytest --help`` shows ours under.
GROUP = "llmbench"


@dataclass(frozen=True)
class Option:
    """One command-line option as registered: its flags, argparse settings and help."""

    flags: tuple[str, ...]
    dest: str
    help: str
    metavar: str | None


@dataclass(frozen=True)
class IniKey:
    """One ini key as registered: its name, type and help."""

    name: str
    type: str
    help: str


@dataclass
class Registration:
    """A stand-in for pytest's parser that keeps what is registered on it."""

    options: list[Option] = field(default_factory=list)
    ini: list[IniKey] = field(default_factory=list)
    groups: set[str] = field(default_factory=set)

    def getgroup(self, name: str, description: str = "", after: str | None = None) -> Registration:
        self.groups.add(name)
        return self

    def addoption(self, *flags: str, **attrs: Any) -> None:
        action = attrs.get("action", "store")
        dest = attrs.get("dest") or flags[0].lstrip("-").replace("-", "_")
        metavar = attrs.get("metavar") or dest.removeprefix("llmbench_").upper()
        takes_value = action not in ("store_true", "store_false", "count")
        help_text = attrs.get("help", "")
        self.options.append(Option(flags, dest, help_text, metavar if takes_value else None))

    def addini(self, name: str, help: str, type: str | None = None, default: Any = None) -> None:
        self.ini.append(IniKey(name, type or "string", help))


def registration() -> Registration:
    """Every option and ini key the plugin registers, in the order it registers them."""
    from pytest_llmbench import plugin

    recorded = Registration()
    plugin.pytest_addoption(recorded)  # type: ignore[arg-type]  # the parser's two methods
    return recorded


#: Characters Markdown would read as markup: escaped, so that a cell shows the help text as
#: pytest --help prints it.
_MARKUP = str.maketrans({c: "\\" + c for c in "\\`*_[]|"} | {"<": "&lt;", "&": "&amp;"})


def _cell(text: str) -> str:
    return " ".join(text.split()).translate(_MARKUP)


def _flag(option: Option) -> str:
    names = ", ".join(f"`{flag}`" for flag in option.flags)
    return f"{names}&nbsp;*{option.metavar}*" if option.metavar else names


def options_markdown() -> str:
    """The two tables of the options page: options (with their ini key), then ini-only keys."""
    recorded = registration()
    ini_by_name = {key.name: key for key in recorded.ini}
    rows = ["## Command-line options", "", "| option | ini key | what it does |", "|---|---|---|"]
    paired: set[str] = set()
    for option in recorded.options:
        key = ini_by_name.get(option.dest)
        if key is not None:
            paired.add(key.name)
        ini = f"`{key.name}` ({key.type})" if key else ""
        rows.append(f"| {_flag(option)} | {ini} | {_cell(option.help)} |")
    rest = [key for key in recorded.ini if key.name not in paired]
    rows += [
        "",
        "## ini keys without an option",
        "",
        "| ini key | type | what it does |",
        "|---|---|---|",
    ]
    rows += [f"| `{key.name}` | {key.type} | {_cell(key.help)} |" for key in rest]
    return "\n".join(rows) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: fill the marker of the options page; any other page is left as it is."""
    if page.file.src_uri != "options.md":
        return markdown
    if MARKER not in markdown:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"docs/options.md lost its marker {MARKER}")
    return markdown.replace(MARKER, options_markdown())
