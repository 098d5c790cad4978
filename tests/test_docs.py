"""The docs: a README that stays a front door, and a site that builds strictly.

The site is built for real with ``mkdocs build --strict`` (as ``make docs`` does); its options page
is generated from the plugin's own option registration and checked against ``pytest --help``.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
import options_page  # a tool of the docs build (tools/), not a package

DOCS = REPO_ROOT / "docs"
README = REPO_ROOT / "README.md"
#: The README is the front door: what it is, install, a first run, then links to the reference.
README_MAX_LINES = 250


@dataclass(frozen=True)
class Build:
    """A finished ``mkdocs build``: its exit status, its output and the site folder."""

    returncode: int
    output: str
    site: Path


def build_site(project: Path, site: Path) -> Build:
    """``mkdocs build --strict`` of ``project`` (its mkdocs.yml) into ``site``."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return Build(done.returncode, done.stdout + done.stderr, site)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Build]:
    yield build_site(REPO_ROOT, tmp_path_factory.mktemp("site"))


def _squeezed(text: str) -> str:
    """``text`` without whitespace: help texts compare whatever the line wrapping."""
    return re.sub(r"\s+", "", text)


def _cells(page: str) -> list[list[str]]:
    """The cells of every body row of the HTML tables of ``page``, as plain text."""
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    cells = [re.findall(r"<td>(.*?)</td>", row, re.S) for row in rows]
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in row] for row in cells if row]


def _pytest_help(tmp_path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def _llmbench_group(help_text: str) -> str:
    """The lines of ``pytest --help`` under our option group's title."""
    start = help_text.index("LLM evals (pytest-llmbench):")
    lines = help_text[start:].splitlines()[1:]
    end = next(i for i, line in enumerate(lines) if line and not line.startswith(" "))
    return "\n".join(lines[:end])


@pytest.mark.slow
def test_the_site_builds_strictly(site: Build) -> None:
    assert site.returncode == 0, site.output
    assert "WARNING" not in site.output, site.output
    pages = sorted(path.stem for path in DOCS.glob("*.md") if path.stem != "index")
    built = sorted(path.parent.name for path in site.site.glob("*/index.html"))
    assert [page for page in pages if page not in built] == []
    assert (site.site / "search" / "search_index.json").is_file()  # the site is searchable


@pytest.mark.slow
def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO_ROOT / "mkdocs.yml", project)
    shutil.copytree(DOCS, project / "docs")
    shutil.copytree(
        REPO_ROOT / "tools", project / "tools", ignore=shutil.ignore_patterns("node_modules")
    )
    with (project / "docs" / "engine.md").open("a", encoding="utf-8") as page:
        page.write("\nSee [the cache](outputs.md#no-such-section) and [more](gone.md).\n")
    broken = build_site(project, tmp_path / "site")
    assert broken.returncode != 0
    assert "outputs.md#no-such-section" in broken.output and "gone.md" in broken.output


@pytest.mark.slow
def test_the_options_page_lists_every_option_and_ini_key_pytest_shows(
    site: Build, tmp_path: Path
) -> None:
    assert site.returncode == 0, site.output
    shown = _pytest_help(tmp_path)
    group = _llmbench_group(shown)
    flags = set(re.findall(r"^  (--[a-z][\w-]*)", group, re.M))
    ini_keys = set(re.findall(r"^  (llmbench_\w+) \(", shown, re.M))
    assert "--request-timeout" in flags and "llmbench_pattern" in ini_keys  # the parsing works
    rows = _cells((site.site / "options" / "index.html").read_text(encoding="utf-8"))
    listed_flags = {flag for row in rows for flag in re.findall(r"--[a-z][\w-]*", row[0])}
    listed_ini = {
        key for row in rows for cell in row[:2] for key in re.findall(r"llmbench_\w+", cell)
    }
    assert listed_flags == flags
    assert listed_ini == ini_keys
    for row in rows:  # each help text is pytest's own, word for word
        assert _squeezed(row[-1]) in _squeezed(shown), row


def test_no_page_holds_a_second_copy_of_the_option_help() -> None:
    """The options page's source has the generator's marker, and no page copies a help text."""
    assert options_page.MARKER in (DOCS / "options.md").read_text(encoding="utf-8")
    sources = {path.name: _squeezed(path.read_text(encoding="utf-8")) for path in DOCS.glob("*.md")}
    registered = options_page.registration()
    helps = [option.help for option in registered.options] + [key.help for key in registered.ini]
    copies = [
        (name, text)
        for text in helps
        for name, source in sources.items()
        if _squeezed(text) in source
    ]
    assert copies == []


def test_the_options_table_holds_every_registered_option() -> None:
    table = options_page.options_markdown()
    registered = options_page.registration()
    assert [o.flags[0] for o in registered.options if f"`{o.flags[0]}`" not in table] == []
    assert [k.name for k in registered.ini if f"`{k.name}`" not in table] == []


def test_request_timeout_help_says_it_bounds_each_attempt() -> None:
    """transport_retry.py bounds each attempt (and each retry anew), not the whole call with its
    retries."""
    by_flag = {option.flags[0]: option.help for option in options_page.registration().options}
    assert "one attempt" in by_flag["--request-timeout"]
    assert "each retry" in by_flag["--request-timeout"]


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) < README_MAX_LINES
    first = {word: text.index(word) for word in ("make eval", "pytest evals/", "llmbench init")}
    assert first["make eval"] < first["pytest evals/"] < first["llmbench init"]
    assert text.index("## Documentation") > first["llmbench init"]


def test_every_readme_link_leads_to_a_file() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [target for target in targets if "://" not in target]
    assert "docs/getting-started.md" in local and any(t.endswith(".png") for t in local)
    assert [target for target in local if not (REPO_ROOT / target).is_file()] == []
    pages = {path.relative_to(REPO_ROOT).as_posix() for path in DOCS.glob("*.md")}
    assert sorted(pages - set(local)) == []  # the table of contents names every page
