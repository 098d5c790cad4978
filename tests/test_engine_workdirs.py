"""Items' workdirs made ahead of their items (engine/workdirs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmbench.engine.workdirs import prepare, seed, take_prepared


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
