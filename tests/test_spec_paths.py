"""Paths in eval files lead inside the project, or into a folder the user allowed, and never to
a special file: every key that names a file or folder, refused at collection with ``path:line``."""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

# Imported before pytester's in-process runs, which drop the modules first imported inside them
# (a second import of yaml makes the nodes of the first one unknown to the loader).
import pytest_llmbench.collect
import pytest_llmbench.spec.load  # noqa: F401
from pytest_llmbench.cli import main
from pytest_llmbench.spec.paths import PathRefused, check_folder_entries, resolve_eval_path

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@dataclass(frozen=True)
class Kind:
    """A key that names a path: the eval file around it, the key as errors name it, the file
    (or folder) it names and that file's content."""

    name: str
    eval_text: str  #: ``{ref}`` is the path
    key: str
    target: str  #: a file name, or a folder name ending in /
    content: bytes = b""

    def make(self, folder: Path) -> Path:
        """Create the target inside ``folder``; return it."""
        if self.target.endswith("/"):
            made = folder / self.target.rstrip("/")
            made.mkdir(parents=True, exist_ok=True)
            (made / "seed.txt").write_text("seed")
            return made
        folder.mkdir(parents=True, exist_ok=True)
        (folder / self.target).write_bytes(self.content)
        return folder / self.target


KINDS = [
    Kind(
        "include_dirs",
        """\
        kind: agent
        tools: [read_file]
        include_dirs: ["{ref}"]
        cases: [{{id: a, prompt: hi}}]
        """,
        "include_dirs",
        "seed/",
    ),
    Kind(
        "prompts",
        """\
        prompts: ["file://{ref}"]
        cases: [{{id: a, vars: {{}}}}]
        """,
        "prompts[0]",
        "p.txt",
        b"Say hi",
    ),
    Kind(
        "dataset",
        """\
        assert: [contains]
        dataset: "{ref}"
        """,
        "dataset",
        "d.jsonl",
        json.dumps({"id": "r", "prompt": "hi", "expected": "hi"}).encode() + b"\n",
    ),
    Kind(
        "schema",
        """\
        cases:
          - id: a
            prompt: hi
            assert: [{{type: json-schema, value: "{ref}"}}]
        """,
        "json-schema",
        "s.json",
        b'{"type": "object"}',
    ),
    Kind(
        "image",
        """\
        cases:
          - id: a
            prompt: hi
            images: ["{ref}"]
        """,
        "images[0]",
        "i.png",
        PNG,
    ),
]
KIND_IDS = [kind.name for kind in KINDS]
#: The line of the key that names the path, per kind (what the error points at).
LINES = {"include_dirs": 3, "prompts": 1, "dataset": 2, "schema": 4, "image": 4}


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder beside the project, outside its rootdir."""
    return tmp_path_factory.mktemp("outside")


def write_eval(pytester: pytest.Pytester, kind: Kind, ref: str) -> Path:
    path = pytester.path / f"{kind.name}.eval.yaml"
    path.write_text(textwrap.dedent(kind.eval_text).format(ref=ref), encoding="utf-8")
    return path


def collect(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", *args)


def assert_refused(result: pytest.RunResult, kind: Kind, why: str) -> None:
    key = kind.key.replace("[", "[[]")  # fnmatch reads [0] as a character class
    result.stdout.fnmatch_lines([f"{kind.name}.eval.yaml:{LINES[kind.name]}: *{key}: *{why}*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


# --- each key: outside the project, `..`, a link out, special files -------------------------


@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_an_absolute_path_outside_the_project_is_refused(
    pytester: pytest.Pytester, outside: Path, kind: Kind
) -> None:
    target = kind.make(outside)
    write_eval(pytester, kind, str(target))
    result = collect(pytester)
    assert_refused(result, kind, f"'{target}' is outside the project*--allow-path DIR*")


@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_a_dotdot_escape_is_refused(pytester: pytest.Pytester, outside: Path, kind: Kind) -> None:
    target = kind.make(outside)
    ref = os.path.relpath(target, pytester.path)
    assert ref.startswith("..")
    write_eval(pytester, kind, ref)
    result = collect(pytester)
    assert_refused(result, kind, f"'{ref}' (resolves to {target}) is outside the project*")


@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_a_link_inside_the_project_pointing_outside_is_refused(
    pytester: pytest.Pytester, outside: Path, kind: Kind
) -> None:
    target = kind.make(outside)
    (pytester.path / "link").symlink_to(target)
    write_eval(pytester, kind, "link")
    result = collect(pytester)
    assert_refused(result, kind, f"'link' (resolves to {target}) is outside the project*")


@pytest.mark.parametrize("ref", ["/proc/self/environ", "/dev/zero", "/sys/kernel"])
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_kernel_files_are_refused_even_when_allowed(
    pytester: pytest.Pytester, kind: Kind, ref: str
) -> None:
    """``--allow-path /`` allows the whole disk, never /proc, /sys or /dev."""
    write_eval(pytester, kind, ref)
    result = collect(pytester, "--allow-path=/")
    top = "/" + ref.split("/")[1]
    assert_refused(result, kind, f"'{ref}' is under {top}: an eval file may name regular files*")


@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_a_fifo_in_the_project_is_refused(pytester: pytest.Pytester, kind: Kind) -> None:
    os.mkfifo(pytester.path / "pipe")
    write_eval(pytester, kind, "pipe")
    result = collect(pytester)  # reading it would block forever
    assert_refused(result, kind, "'pipe' is a FIFO*")


# --- what is allowed ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_a_path_inside_the_project_is_allowed(pytester: pytest.Pytester, kind: Kind) -> None:
    target = kind.make(pytester.path / "data")
    (pytester.path / "evals").mkdir()
    # From a sub-folder, `..` that stays inside the rootdir is fine, and so is a link inside.
    (pytester.path / "evals" / "link").symlink_to(target)
    path = write_eval(pytester, kind, os.path.relpath(target, pytester.path / "evals"))
    path.rename(pytester.path / "evals" / path.name)
    linked = pytester.path / "evals" / f"linked_{path.name}"
    linked.write_text(textwrap.dedent(kind.eval_text).format(ref="link"), encoding="utf-8")
    result = collect(pytester)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"evals/{kind.name}.eval.yaml::*", "2 tests collected*"])


@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("how", ["option", "ini"])
def test_an_allowed_folder_outside_the_project_is_allowed(
    pytester: pytest.Pytester, outside: Path, kind: Kind, how: str
) -> None:
    target = kind.make(outside / "shared")
    write_eval(pytester, kind, str(target))
    args: list[str] = []
    if how == "option":
        args = [f"--allow-path={outside / 'shared'}", "--allow-path=."]
    else:
        pytester.makeini(f"[pytest]\nllmbench_allowed_paths =\n    {outside / 'shared'}\n")
    result = collect(pytester, *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["1 test collected*"])


def test_an_allowed_folder_allows_only_itself(pytester: pytest.Pytester, outside: Path) -> None:
    kind = KINDS[1]
    target = kind.make(outside / "private")
    (outside / "shared").mkdir()
    write_eval(pytester, kind, str(target))
    result = collect(pytester, f"--allow-path={outside / 'shared'}")
    assert_refused(result, kind, "is outside the project*")


@pytest.mark.parametrize("how", ["option", "ini"])
def test_an_allowed_path_that_is_not_a_folder_is_a_usage_error(
    pytester: pytest.Pytester, how: str
) -> None:
    pytester.makefile(".eval.yaml", ok="cases: [{id: a, prompt: hi}]\n")
    args: list[str] = []
    if how == "option":
        args = ["--allow-path=nowhere"]
    else:
        pytester.makeini("[pytest]\nllmbench_allowed_paths = nowhere\n")
    result = collect(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    source = "--allow-path" if how == "option" else "llmbench_allowed_paths"
    result.stderr.fnmatch_lines([f"ERROR: llmbench: {source}: not a folder: *nowhere"])


# --- include_dirs: what the folder holds -------------------------------------------------------


def test_include_dirs_holding_a_fifo_is_refused(pytester: pytest.Pytester) -> None:
    seed = pytester.mkdir("seed")
    (seed / "deep").mkdir()
    os.mkfifo(seed / "deep" / "pipe")  # copytree would block reading it
    write_eval(pytester, KINDS[0], "seed")
    result = collect(pytester)
    assert_refused(result, KINDS[0], f"'deep/pipe' inside '{seed}' is a FIFO")


def test_include_dirs_keeps_links_inside_it(pytester: pytest.Pytester, outside: Path) -> None:
    """A link in the folder is copied as a link (the agent's tools refuse it), not followed."""
    seed = pytester.mkdir("seed")
    (seed / "out").symlink_to(outside)
    (seed / "dev").symlink_to("/dev/zero")
    write_eval(pytester, KINDS[0], "seed")
    assert collect(pytester).ret == pytest.ExitCode.OK


# --- datasets: the files a folder leads to -----------------------------------------------------


def test_a_dataset_folder_whose_files_lead_outside_is_refused(
    pytester: pytest.Pytester, outside: Path
) -> None:
    (outside / "train.parquet").write_bytes(b"PAR1")
    data = pytester.mkdir("data")
    (data / "train.parquet").symlink_to(outside / "train.parquet")
    pytester.makefile(".eval.yaml", rows="dataset: data\nassert: [contains]\n")
    result = collect(pytester)
    result.stdout.fnmatch_lines(
        [f"rows.eval.yaml:1: dataset: 'data/train.parquet' (resolves to {outside}/train.parquet)*"]
    )


def test_a_save_to_disk_folder_naming_files_outside_is_refused(pytester: pytest.Pytester) -> None:
    data = pytester.mkdir("data")
    state = {"_data_files": [{"filename": "../../../../etc/hostname"}]}
    (data / "state.json").write_text(json.dumps(state))
    pytester.makefile(".eval.yaml", rows="dataset: {path: data, format: hf}\nassert: [contains]\n")
    result = collect(pytester)
    result.stdout.fnmatch_lines(
        ["rows.eval.yaml:1: dataset: *etc/hostname* is outside the project*"]
    )


def test_a_dataset_image_column_leading_outside_is_refused(
    pytester: pytest.Pytester, outside: Path
) -> None:
    (outside / "i.png").write_bytes(PNG)
    rows = [{"id": "r", "prompt": "hi", "images": str(outside / "i.png")}]
    pytester.path.joinpath("rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    pytester.makefile(".eval.yaml", rows="dataset: rows.jsonl\nassert: [is-json]\n")
    result = collect(pytester)
    result.stdout.fnmatch_lines(
        [f"rows.eval.yaml:1: case 'r': images[[]0]: '{outside}/i.png' is outside the project*"]
    )
    assert collect(pytester, f"--allow-path={outside}").ret == pytest.ExitCode.OK


# --- llmbench validate -------------------------------------------------------------------------


def test_validate_refuses_outside_paths_unless_allowed(
    pytester: pytest.Pytester, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kind = KINDS[1]
    target = kind.make(outside)
    write_eval(pytester, kind, str(target))
    assert main(["validate", "prompts.eval.yaml"]) == 1
    out = capsys.readouterr().out
    assert f"prompts.eval.yaml:1: prompts[0]: '{target}' is outside the project" in out
    assert main(["validate", "--allow-path", str(outside), "prompts.eval.yaml"]) == 0
    assert "ok   prompts.eval.yaml (1 case x 1 prompt)" in capsys.readouterr().out
    assert main(["validate", "--allow-path", "nowhere", "prompts.eval.yaml"]) == 2
    assert "--allow-path: not a folder: nowhere" in capsys.readouterr().err


# --- resolve_eval_path and check_folder_entries ------------------------------------------------


def test_resolve_eval_path_returns_the_resolved_path_inside(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.txt").write_text("x")
    assert resolve_eval_path("a/../a/f.txt", tmp_path) == (tmp_path / "a" / "f.txt").resolve()
    # A missing path inside is returned: its caller says what missing means for its key.
    assert resolve_eval_path("gone.txt", tmp_path) == (tmp_path / "gone.txt").resolve()


def test_resolve_eval_path_accepts_the_roots_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(PathRefused, match="outside the project"):
        resolve_eval_path("../f.txt", tmp_path / "evals")
    assert resolve_eval_path("../f.txt", tmp_path / "evals", [tmp_path]) == tmp_path / "f.txt"


@pytest.mark.parametrize(
    ("name", "why"),
    [("a\x00b", "not a usable path"), ("x" * 5000, "not a usable path"), ("loop", "not a usable")],
)
def test_resolve_eval_path_refuses_names_the_os_cannot_take(
    tmp_path: Path, name: str, why: str
) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(PathRefused, match=why):
        resolve_eval_path(name, tmp_path)


def test_check_folder_entries_refuses_a_socket(tmp_path: Path) -> None:
    import socket

    (tmp_path / "ok.txt").write_text("x")
    check_folder_entries(tmp_path)  # regular files pass
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s"))
        with pytest.raises(PathRefused, match=r"'s' inside .* is a socket"):
            check_folder_entries(tmp_path)
