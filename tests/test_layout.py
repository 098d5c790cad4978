"""The house by stage: no import cycle in the package, and every stage imports only earlier ones.

Read from the source with ``ast`` (every import, at any depth, ``TYPE_CHECKING`` ones too), so a
lazy import inside a function counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_llmbench"
#: The contributors' page that names every stage and module of the package.
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
#: The stages in the order a record flows: each may import only the ones before it.
#: ``config`` reads profiles and judge dimensions, and the engine on reads the run's config.
STAGES = (
    "models", "agent", "scoring", "judging", "spec", "config", "engine", "results", "telemetry",
    "render", "report", "view",
)  # fmt: skip
#: Modules on top that any stage may import, and that import no stage: the results folder's
#: files and utilities.
SHARED = (
    "fingerprint", "provenance", "redact", "results_folder", "shard", "userimport", "yamlguard"
)  # fmt: skip
#: The pytest shell's modules on top and its packages: they may import any stage.
SHELL_MODULES = ("collect", "fixtures", "item", "plugin", "workers")
SHELL_PACKAGES = ("cli",)
#: The most modules directly in the package (``__init__.py`` aside): a new one joins a stage,
#: the shell's packages or a shared module before the top grows into a second house.
MAX_TOP_LEVEL_MODULES = 12


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py") if "scaffold" not in p.parts}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported = _imported(ast.parse(path.read_text()), package, set(paths))
        graph[name] = {target for target in imported if target in paths and target != name}
    return graph


def _imported(tree: ast.AST, package: str, modules: set[str]) -> Iterator[str]:
    """The modules ``tree`` names: ``from .a import b`` names ``a.b`` when that is a module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module is not None and node.module.startswith("pytest_llmbench"):
                module = node.module.removeprefix("pytest_llmbench").lstrip(".")
            else:
                continue
            for alias in node.names:
                submodule = f"{module}.{alias.name}".lstrip(".")
                yield submodule if submodule in modules else module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pytest_llmbench."):
                    yield alias.name.removeprefix("pytest_llmbench.")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def stage_of(module: str) -> str:
    if not module:  # the package's own __init__: imported before any of its modules anyway
        return "root"
    top = module.split(".")[0]
    return top if top in STAGES or top in SHARED else "shell"


def backward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``a -> b`` for each import of a stage from a later stage or from the pytest shell."""
    wrong = []
    for module, targets in sorted(graph.items()):
        stage = stage_of(module)
        for target in sorted(targets):
            to = stage_of(target)
            if stage in STAGES and to in STAGES and STAGES.index(to) > STAGES.index(stage):
                wrong.append(f"{module} -> {target}")
            elif stage in (*STAGES, *SHARED) and to == "shell":
                wrong.append(f"{module} -> {target}")
            elif stage in SHARED and to in STAGES:
                wrong.append(f"{module} -> {target}")
    return wrong


def face_names(stage: str) -> set[str]:
    """What a stage's ``__init__`` offers other stages: its ``__all__``, read from the source."""
    tree = ast.parse((PACKAGE / stage / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return set()


def around_faces() -> list[str]:
    """``module: line: what`` for each import of another stage that does not go through its face
    (``from ..engine import CallPlan``, a name of its ``__all__``): one reaching into a module of
    the stage (``from ..engine.plan import CallPlan``), or naming what the face does not offer."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py") if "scaffold" not in p.parts}
    faces = {stage: face_names(stage) for stage in STAGES}
    wrong = []
    for name, path in sorted(paths.items()):
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target, names in _import_targets(node, package):
                stage = target.split(".")[0]
                if stage not in STAGES or stage == stage_of(name):
                    continue
                if target != stage:
                    wrong.append(f"{name}: {node.lineno}: reaches into {target}")
                wrong += [
                    f"{name}: {node.lineno}: {stage} has no face name {n!r}"
                    for n in names
                    if target == stage and n not in faces[stage]
                ]
    return wrong


def _import_targets(node: ast.AST, package: str) -> Iterator[tuple[str, list[str]]]:
    """The module of the package ``node`` imports from, and the names it takes from it."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".") if package else []
            base = base[: len(base) - node.level + 1]
            yield (
                ".".join([*base, *([node.module] if node.module else [])]),
                [alias.name for alias in node.names],
            )
        elif node.module is not None and node.module.startswith("pytest_llmbench"):
            module = node.module.removeprefix("pytest_llmbench").lstrip(".")
            yield module, [alias.name for alias in node.names]
    elif isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.startswith("pytest_llmbench."):
                yield alias.name.removeprefix("pytest_llmbench."), []


def package_modules() -> list[str]:
    """Every module of the package as its path in it (``engine/plan.py``), scaffold left out."""
    paths = (p for p in PACKAGE.rglob("*.py") if "scaffold" not in p.parts)
    return sorted(path.relative_to(PACKAGE).as_posix() for path in paths)


def named_modules(page: str) -> set[str]:
    """The modules a page's tables name: the first cell of each row, as `` `engine/plan.py` ``."""
    return set(re.findall(r"^\| `((?:\w+/)*\w+\.py)` \|", page, re.M))


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_stages_import_only_earlier_stages() -> None:
    assert backward_imports(import_graph()) == []


def test_other_stages_and_the_shell_import_a_stage_through_its_face() -> None:
    assert around_faces() == []


def test_around_faces_names_an_import_reaching_into_a_stage(tmp_path: Path) -> None:
    tree = ast.parse("from ..engine.plan import CallPlan\nfrom ..engine import CallPlan\n")
    found = [list(_import_targets(node, "results")) for node in tree.body]
    assert found == [[("engine.plan", ["CallPlan"])], [("engine", ["CallPlan"])]]
    assert "CallPlan" in face_names("engine")


def test_every_package_folder_is_a_stage_or_known() -> None:
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")} | {"scaffold"}
    # the scaffold is data: files `llmbench init` copies
    assert folders == {*STAGES, *SHELL_PACKAGES, "scaffold"}


def top_level_modules() -> list[str]:
    """The modules directly in the package, ``__init__.py`` left out."""
    return sorted(p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py")


def test_the_package_has_at_most_twelve_top_level_modules() -> None:
    assert len(top_level_modules()) <= MAX_TOP_LEVEL_MODULES, top_level_modules()


def test_every_top_level_module_is_shared_or_the_shell() -> None:
    assert set(top_level_modules()) == {*SHARED, *SHELL_MODULES}


def repeated_basenames(modules: list[str]) -> dict[str, list[str]]:
    """Each file name that more than one of ``modules`` (paths in the package) has, ``__init__.py``
    aside, with the modules that have it."""
    by_name: dict[str, list[str]] = {}
    for module in modules:
        name = module.rpartition("/")[2]
        if name != "__init__.py":
            by_name.setdefault(name, []).append(module)
    return {name: paths for name, paths in sorted(by_name.items()) if len(paths) > 1}


def test_every_module_of_the_package_has_its_own_file_name() -> None:
    """A module's file name says its concern across the stages: two ``retry.py`` (a call's
    transport retries, ``--retry-errors``) read as one concept in a traceback or an import."""
    modules = sorted(path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py"))
    assert repeated_basenames(modules) == {}


def test_repeated_basenames_names_each_repeat_and_its_modules() -> None:
    modules = ["a/__init__.py", "b/__init__.py", "a/load.py", "b/c/load.py", "b/run.py"]
    assert repeated_basenames(modules) == {"load.py": ["a/load.py", "b/c/load.py"]}


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_cycles_finds_a_cycle_and_only_one(
    graph: dict[str, set[str]], expected: list[list[str]]
) -> None:
    assert cycles(graph) == expected


def test_backward_imports_names_a_stage_importing_a_later_one_or_the_shell() -> None:
    graph = {"engine.x": {"results.y", "models.z", "item"}, "results.y": set(), "models.z": set()}
    assert backward_imports({**graph, "item": set()}) == [
        "engine.x -> item",
        "engine.x -> results.y",
    ]


def test_the_architecture_page_names_every_stage_and_module() -> None:
    page = ARCHITECTURE.read_text(encoding="utf-8")
    assert [stage for stage in STAGES if f"`{stage}/`" not in page] == []
    assert [module for module in package_modules() if module not in named_modules(page)] == []


def test_the_architecture_page_names_no_module_that_is_gone() -> None:
    named = named_modules(ARCHITECTURE.read_text(encoding="utf-8"))
    assert sorted(named - set(package_modules())) == []


def test_named_modules_reads_the_first_cell_of_each_table_row() -> None:
    page = "| `engine/plan.py` | plans |\n| `cli.py` | the command |\nSee `item.py` in prose.\n"
    assert named_modules(page) == {"engine/plan.py", "cli.py"}


def file_name_literals(source: str, names: tuple[str, ...]) -> list[str]:
    """``line: text`` of each string in ``source`` (f-string parts too, docstrings left out) that
    holds one of ``names``: a results folder's file named outside its owner."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        f"{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and any(name in node.value for name in names)
    ]


def test_the_results_folder_files_are_named_by_their_owner_only() -> None:
    from pytest_llmbench.results_folder import FILE_NAMES

    owner = PACKAGE / "results_folder.py"
    found = [
        f"{path.relative_to(PACKAGE)}:{hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != owner and "scaffold" not in path.parts
        for hit in file_name_literals(path.read_text(encoding="utf-8"), FILE_NAMES)
    ]
    assert found == []


def test_file_name_literals_finds_names_in_strings_not_in_docstrings() -> None:
    source = '"""Writes run.json."""\nX = "run.json"\ndef f():\n    """run.json"""\n    return f"{d}/run.json"\n'
    assert file_name_literals(source, ("run.json",)) == ["2: 'run.json'", "5: '/run.json'"]
