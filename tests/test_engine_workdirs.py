"""Items' workdirs made ahead of their items (engine/workdirs.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import Bench, Rule

from pytest_llmbench.engine.workdirs import WorkdirError, prepare, seed, take_prepared


def test_seed_copies_folders_then_files(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "a.txt").write_text("from the folder")
    (source / "link").symlink_to("/etc/passwd")
    root = seed(tmp_path / "wd", {"sub/a.txt": "from files", "b/c.txt": "c"}, [source])
    assert (root / "sub" / "a.txt").read_text() == "from files"  # files win
    assert (root / "b" / "c.txt").read_text() == "c"
    assert (root / "link").is_symlink()  # copied as a link, not followed
    with pytest.raises(ValueError):
        seed(tmp_path / "wd2", {"../out.txt": "x"})
    assert not (tmp_path / "out.txt").exists()


def test_prepare_makes_one_folder_per_item_handed_out_once(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure()
    first = prepare(config, "a.eval.yaml::x[m-r0]", "x[m-r0]", {"f.txt": "1"}, [])
    assert prepare(config, "a.eval.yaml::x[m-r0]", "x[m-r0]", {}, []) == first
    other = prepare(config, "a.eval.yaml::y[m-r0]", "y[m-r0]", {}, [])
    assert first != other and first.name == other.name == "workdir"
    assert first.parent.name.startswith("x_m_r0_")  # named as pytest names tmp_path
    assert (first / "f.txt").read_text() == "1"
    assert take_prepared(config, "a.eval.yaml::x[m-r0]") == first
    assert take_prepared(config, "a.eval.yaml::x[m-r0]") is None


#: A ``files:`` name within the load-time limits (no part past NAME_MAX, the whole within
#: WORKDIR_PATH_MAX) that the OS refuses under a temporary folder of 1,200+ characters.
LONG_FILE = "/".join(["n" * 250] * 12)


def long_folder(tmp_path: Path) -> Path:
    folder = tmp_path.joinpath(*["b" * 200] * 6)
    folder.mkdir(parents=True)
    return folder


def test_a_file_the_os_refuses_is_a_workdir_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(WorkdirError) as info:
        seed(long_folder(tmp_path) / "wd", {"ok.txt": "x", LONG_FILE: "y"})
    message = str(info.value)
    assert message.startswith("cannot write workdir file 'nnnnnnnnnn")
    assert message.endswith("characters with the workdir's folder): File name too long")


def test_a_workdir_prepared_ahead_that_fails_is_the_items_error_when_taken(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """Prepared in the engine's prefetch, a failure raised there was an INTERNALERROR."""
    config = pytester.parseconfigure(f"--basetemp={long_folder(tmp_path) / 'base'}")
    root = prepare(config, "a.eval.yaml::x[m-r0]", "x[m-r0]", {LONG_FILE: "y"}, [])
    assert root.name == "workdir"
    with pytest.raises(WorkdirError, match="File name too long"):
        take_prepared(config, "a.eval.yaml::x[m-r0]")
    assert take_prepared(config, "a.eval.yaml::x[m-r0]") is None


AGENT_WITH_A_LONG_FILE = f"""
kind: agent
tools: [read_file]
cases:
  - id: long
    prompt: Read the file
    files:
      ? "{LONG_FILE}"
      : hello
    assert: [{{type: file-exists, value: out.txt}}]
"""


@pytest.mark.parametrize("kind", ["agent", "plain"])
def test_a_files_key_past_path_max_at_run_time_is_an_item_error(
    bench: Bench, tmp_path: Path, kind: str
) -> None:
    """The names pass the eval file's checks, but the whole path with a long --basetemp is
    past PATH_MAX: the item is an error naming the file; no INTERNALERROR, no traceback."""
    bench.server.add_rule(Rule(reply="done"))
    text = AGENT_WITH_A_LONG_FILE
    if kind == "plain":
        text = text.replace("kind: agent\ntools: [read_file]\n", "").replace(
            "{type: file-exists, value: out.txt}", "{type: contains, value: done}"
        )
    bench.eval_file("long", text)
    result = bench.run("--models=fake", f"--basetemp={long_folder(tmp_path) / 'base'}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["llmbench workdir error: cannot write workdir file 'nnnn*: File name too long"]
    )
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    assert not re.search(r"\.py:\d+: in ", text), text  # no frame of a traceback either
    (record,) = bench.records()
    assert (record["outcome"], record["error_kind"]) == ("error", "config")
    assert "File name too long" in record["error"]
