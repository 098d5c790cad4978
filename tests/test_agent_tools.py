"""The agent's built-in and custom tools: confined to the workdir, errors as results."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_llmbench.agent import tools
from pytest_llmbench.agent.limits import SandboxLimits
from pytest_llmbench.agent.sandbox import Sandbox
from pytest_llmbench.agent.tools import (
    BUILTIN_TOOLS,
    Toolbox,
    ToolRefusal,
    list_dir,
    load_custom_tool,
    read_file,
    resolve_inside,
    write_file,
)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    wd = tmp_path / "work"
    wd.mkdir()
    (wd / "notes.txt").write_text("hello\n")
    return wd


def make_toolbox(workdir: Path, names: list[str], base_dir: Path | None = None) -> Toolbox:
    sandbox = Sandbox(workdir, SandboxLimits(timeout_s=10), mode="auto")
    return Toolbox(workdir, names, sandbox, base_dir or workdir.parent)


# --- resolve_inside ---------------------------------------------------------------------------


def test_resolve_inside_returns_the_path_inside(workdir: Path) -> None:
    assert resolve_inside(workdir, "notes.txt") == workdir.resolve() / "notes.txt"
    assert resolve_inside(workdir, "sub/../notes.txt") == workdir.resolve() / "notes.txt"
    assert resolve_inside(workdir, "new/file.py") == workdir.resolve() / "new/file.py"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("../x", "leads out of the workdir through '..'"),
        ("a/../../x", "leads out of the workdir"),
        ("/etc/passwd", "'/etc/passwd' is absolute: tools only reach files inside the workdir"),
        ("notes\x00.txt", "NUL byte"),
        ("", "the path is empty"),
        ("   ", "the path is empty"),
    ],
)
def test_resolve_inside_refuses(workdir: Path, raw: str, message: str) -> None:
    with pytest.raises(ToolRefusal, match=re.escape(message)):
        resolve_inside(workdir, raw)


def test_symlink_to_etc_is_refused_for_read_and_write(workdir: Path) -> None:
    (workdir / "etc").symlink_to("/etc")
    (workdir / "passwd").symlink_to("/etc/passwd")
    with pytest.raises(ToolRefusal, match="symlink that points outside"):
        read_file(workdir, "etc/passwd")
    with pytest.raises(ToolRefusal, match="symlink that points outside"):
        read_file(workdir, "passwd")
    with pytest.raises(ToolRefusal, match="symlink that points outside"):
        write_file(workdir, "etc/llmbench-escape", "x")
    with pytest.raises(ToolRefusal, match="symlink that points outside"):
        write_file(workdir, "passwd", "x")
    assert not Path("/etc/llmbench-escape").exists()


def test_symlinked_parent_dir_outside_is_refused(workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (workdir / "a").mkdir()
    (workdir / "a" / "b").symlink_to(outside)
    with pytest.raises(ToolRefusal, match="symlink"):
        read_file(workdir, "a/b/secret.txt")
    with pytest.raises(ToolRefusal, match="symlink"):
        write_file(workdir, "a/b/new.txt", "x")
    with pytest.raises(ToolRefusal, match="symlink"):
        list_dir(workdir, "a/b")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_symlink_inside_reads_but_is_not_written_through(workdir: Path) -> None:
    (workdir / "alias.txt").symlink_to(workdir / "notes.txt")
    (workdir / "same").symlink_to(workdir)
    assert read_file(workdir, "alias.txt") == "hello\n"
    assert read_file(workdir, "same/notes.txt") == "hello\n"
    with pytest.raises(ToolRefusal, match="does not write through symlinks"):
        write_file(workdir, "alias.txt", "changed")
    assert (workdir / "notes.txt").read_text() == "hello\n"


# --- the built-ins ----------------------------------------------------------------------------


def test_write_file_creates_parent_dirs(workdir: Path) -> None:
    assert write_file(workdir, "pkg/sub/mod.py", "x = 1\n") == "wrote 6 bytes to pkg/sub/mod.py"
    assert (workdir / "pkg/sub/mod.py").read_text() == "x = 1\n"


def test_write_file_caps_the_size(workdir: Path) -> None:
    with pytest.raises(ToolRefusal, match="at most 1000000"):
        write_file(workdir, "big.txt", "x" * (tools.WRITE_CAP_BYTES + 1))
    assert not (workdir / "big.txt").exists()


def test_read_file_truncates_big_files_and_replaces_bad_utf8(workdir: Path) -> None:
    (workdir / "big.txt").write_bytes(b"a" * (tools.READ_CAP_BYTES + 10))
    text = read_file(workdir, "big.txt")
    assert text.startswith("a" * tools.READ_CAP_BYTES)
    assert text.endswith(f"[... file truncated at {tools.READ_CAP_BYTES} bytes of 200010]")
    (workdir / "bad.txt").write_bytes(b"ok \xff\xfe end")
    assert read_file(workdir, "bad.txt") == "ok \ufffd\ufffd end"


def test_read_file_missing_or_directory(workdir: Path) -> None:
    with pytest.raises(ToolRefusal, match=re.escape("no such file: 'nope.txt'")):
        read_file(workdir, "nope.txt")
    with pytest.raises(ToolRefusal, match="is a directory: use list_dir"):
        read_file(workdir, ".")


def test_list_dir_sorted_with_dir_suffix_and_cap(workdir: Path) -> None:
    (workdir / "b_dir").mkdir()
    (workdir / "a.txt").write_text("")
    assert list_dir(workdir) == "a.txt\nb_dir/\nnotes.txt"
    (workdir / "b_dir" / "many").mkdir()
    many = workdir / "b_dir" / "many"
    for i in range(tools.LIST_CAP_ENTRIES + 3):
        (many / f"f{i:04}").write_text("")
    listing = list_dir(workdir, "b_dir/many").splitlines()
    assert len(listing) == tools.LIST_CAP_ENTRIES + 1
    assert listing[0] == "f0000" and listing[-1] == "[... and 3 more entries]"
    (workdir / "empty").mkdir()
    assert list_dir(workdir, "empty") == "(empty directory)"


# --- the toolbox ------------------------------------------------------------------------------


def test_schemas_are_openai_function_tools(workdir: Path) -> None:
    box = make_toolbox(workdir, ["read_file", "write_file", "list_dir", "run_command"])
    schemas = box.schemas()
    assert [s["function"]["name"] for s in schemas] == list(BUILTIN_TOOLS)
    write = schemas[1]
    assert write["type"] == "function"
    assert write["function"]["parameters"]["required"] == ["path", "content"]
    assert write["function"]["parameters"]["properties"]["content"]["type"] == "string"
    json.dumps(schemas)  # goes to the provider as JSON


def test_call_with_json_string_and_mapping_arguments(workdir: Path) -> None:
    box = make_toolbox(workdir, ["read_file", "write_file", "list_dir"])
    assert box.call("write_file", '{"path": "out/a.txt", "content": "hi"}') == (
        "wrote 2 bytes to out/a.txt"
    )
    assert box.call("read_file", {"path": "out/a.txt"}) == "hi"
    assert box.call("list_dir", "") == "notes.txt\nout/"


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("delete_all", {}, "error: unknown tool 'delete_all'; the tools are read_file, write_file"),
        ("read_file", {}, "error: read_file is missing the required argument 'path'"),
        ("read_file", {"path": "a", "mode": "r"}, "error: read_file got an unexpected argument"),
        ("read_file", {"path": 3}, "error: read_file: argument 'path' must be a string"),
        ("read_file", "{not json", "error: the arguments are not valid JSON"),
        ("read_file", "[1, 2]", "error: the arguments must be a JSON object"),
        ("read_file", {"path": "../x"}, "error: path '../x' leads out of the workdir"),
        ("read_file", {"path": "/etc/passwd"}, "error: path '/etc/passwd' is absolute"),
        ("write_file", {"path": "../x", "content": "x"}, "error: path '../x' leads out"),
    ],
)
def test_call_errors_are_results(
    workdir: Path, name: str, arguments: dict[str, object] | str, expected: str
) -> None:
    box = make_toolbox(workdir, ["read_file", "write_file"])
    assert box.call(name, arguments).startswith(expected)


def test_run_command_reports_exit_code_and_output(workdir: Path) -> None:
    box = make_toolbox(workdir, ["run_command"])
    result = box.call("run_command", {"command": "cat notes.txt; echo oops >&2; exit 3"})
    assert result == "exit code: 3\nstdout:\nhello\nstderr:\noops"
    assert box.call("run_command", {"command": "true"}) == "exit code: 0\n(no output)"


def test_run_command_reports_limits_as_errors(workdir: Path) -> None:
    sandbox = Sandbox(workdir, SandboxLimits(timeout_s=0.5, max_output_bytes=100), mode="auto")
    assert tools.run_command(sandbox, "sleep 5").startswith(
        "error: the command timed out after 0.5 s and was killed\nexit code: none"
    )
    endless = tools.run_command(sandbox, "yes")
    assert endless.startswith("error: the command printed more than 100 bytes and was killed")
    assert "[... output truncated at 100 bytes]" in endless


def test_unknown_tool_name_at_construction(workdir: Path) -> None:
    with pytest.raises(ValueError, match="unknown tool 'rm_rf'"):
        make_toolbox(workdir, ["rm_rf"])
    with pytest.raises(ValueError, match="listed twice"):
        make_toolbox(workdir, ["read_file", "read_file"])


# --- custom tools -----------------------------------------------------------------------------

CUSTOM_MODULE = '''
def word_count(text: str, min_length: int = 1) -> int:
    """Count the words of at least min_length characters."""
    return len([w for w in text.split() if len(w) >= min_length])


def scale(x: float, negate: bool) -> str:
    """Multiply x by ten, negated if asked."""
    return str(-10 * x if negate else 10 * x)


def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


def undocumented(x: str) -> str:
    return x


def untyped(x) -> str:
    """No annotation."""
    return x


def star(*args: str) -> str:
    """Varargs."""
    return ""
'''


@pytest.fixture
def custom_dir(tmp_path: Path) -> Path:
    base = tmp_path / "evals"
    base.mkdir()
    module = f"agent_tools_{tmp_path.name}"  # unique: sys.modules outlives a test
    (base / f"{module}.py").write_text(CUSTOM_MODULE)
    return base / f"{module}.py"


def test_custom_tool_spec_from_signature_and_docstring(custom_dir: Path) -> None:
    module = custom_dir.stem
    tool = load_custom_tool(f"{module}:word_count", custom_dir.parent)
    assert tool.spec.name == "word_count"
    assert tool.spec.description == "Count the words of at least min_length characters."
    assert tool.spec.parameters == {
        "type": "object",
        "properties": {"text": {"type": "string"}, "min_length": {"type": "integer"}},
        "required": ["text"],
    }
    scale = load_custom_tool(f"{module}:scale", custom_dir.parent).spec.parameters
    assert scale["properties"] == {"x": {"type": "number"}, "negate": {"type": "boolean"}}


def test_custom_tool_calls(workdir: Path, custom_dir: Path) -> None:
    module = custom_dir.stem
    names = [f"{module}:word_count", f"{module}:scale", f"{module}:explode", "read_file"]
    box = make_toolbox(workdir, names, custom_dir.parent)
    assert box.names == ["word_count", "scale", "explode", "read_file"]
    assert box.call("word_count", '{"text": "a bb ccc", "min_length": 2}') == "2"
    assert box.call("word_count", {"text": "a bb ccc"}) == "3"
    assert box.call("scale", {"x": 2, "negate": True}) == "-20"
    assert box.call("scale", {"x": 2, "negate": "yes"}).startswith(
        "error: scale: argument 'negate' must be a boolean"
    )
    assert box.call("word_count", {"text": "x", "min_length": 1.5}).startswith("error: ")
    assert box.call("explode", {"reason": "no disk"}) == "error: RuntimeError: no disk"
    assert box.call("word_count", {}) == (
        "error: word_count is missing the required argument 'text'"
    )


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("undocumented", "needs a docstring"),
        ("untyped", "parameter 'x' needs str/int/float/bool"),
        ("star", "parameter 'args' cannot be a keyword"),
        ("missing", "cannot load: AttributeError"),
    ],
)
def test_bad_custom_tools_raise_naming_the_ref(
    custom_dir: Path, function: str, message: str
) -> None:
    ref = f"{custom_dir.stem}:{function}"
    with pytest.raises(ValueError, match=f"custom tool {ref}: {message}"):
        load_custom_tool(ref, custom_dir.parent)


def test_bad_custom_refs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected module:function"):
        load_custom_tool("no_function:", tmp_path)
    with pytest.raises(ValueError, match="cannot load: ModuleNotFoundError"):
        load_custom_tool("no_such_module_xyz:f", tmp_path)
