"""The test suite's own layout (issue #57 item 8): tests mirror the package, one folder per package folder (plus
`benchmarks/` for bench/ and `project/` for what spans the repository), file names unique across the tree (pytest
imports them by basename), and every test that starts a process is marked `slow` so that `-m "not slow"` gives a
quick in-process loop."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
PACKAGE = TESTS.parent / "deep_nmt_hf"
EXTRA_FOLDERS = {"benchmarks": "bench/", "project": "the repository as a whole (layout, packaging, README)"}
# calls that start another Python process (directly or through our helper)
STARTERS = {
    "subprocess.run",
    "subprocess.Popen",
    "subprocess.check_call",
    "subprocess.check_output",
    "run_without_package",
    "run_with_package",
    "translate_folders_without_package",
    "generate_with_remote_code",
    "multiprocessing.spawn",
    "torch.multiprocessing.spawn",
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """Module-level functions and methods of module-level classes, by name (methods as Class.name)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    found[f"{node.name}.{item.name}"] = item
    return found


def process_tests(path: Path) -> dict[str, bool]:
    """The tests of PATH that start a process (directly, through a function of the module or through a fixture
    defined there), each with whether it is marked slow (by decorator or the module's `pytestmark`)."""
    tree = ast.parse(path.read_text())
    functions = _functions(tree)
    calls = {
        name: {_dotted(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
        for name, node in functions.items()
    }
    starting = {name for name, called in calls.items() if called & STARTERS}
    while True:  # through the module's own helpers and fixtures, to a fixed point
        more = {
            name
            for name, node in functions.items()
            if name not in starting
            and (
                calls[name] & starting
                or {a.arg for a in node.args.args} & {s.rsplit(".", 1)[-1] for s in starting}
            )
        }
        if not more:
            break
        starting |= more
    module_slow = any(
        isinstance(node, ast.Assign)
        and any(_dotted(t) == "pytestmark" for t in node.targets)
        and "pytest.mark.slow" in ast.unparse(node.value)
        for node in tree.body
    )
    return {
        name: module_slow or any("pytest.mark.slow" in ast.unparse(d) for d in functions[name].decorator_list)
        for name in sorted(starting)
        if name.rsplit(".", 1)[-1].startswith("test_")
    }


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_tests_mirror_the_package():
    assert not list(TESTS.glob("test_*.py")), (
        "test files live in a folder named after the package folder they test"
    )
    folders = {p.parent.relative_to(TESTS).parts[0] for p in _test_files()}
    package = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders - package - set(EXTRA_FOLDERS) == set(), (
        "a test folder without a package folder of that name"
    )
    assert package - folders == set(), "a package folder without tests"
    names = [p.name for p in _test_files()]
    assert len(names) == len(set(names)), "pytest imports test files by basename: they must be unique"
    assert not list(TESTS.rglob("__init__.py")), "test folders are not packages (rootdir-relative imports)"


@pytest.mark.parametrize("path", _test_files(), ids=lambda p: str(p.relative_to(TESTS)))
def test_tests_that_start_a_process_are_marked_slow(path):
    unmarked = [name for name, slow in process_tests(path).items() if not slow]
    assert unmarked == [], (
        f"{path.relative_to(TESTS)}: starts a process without @pytest.mark.slow: {unmarked}"
    )


def test_the_process_check_sees_helpers_and_fixtures(tmp_path):
    """The check itself: a test starting a process through a module helper or a fixture is found; an in-process
    test is not; a marked one passes."""
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import subprocess, pytest\n"
        "def helper():\n    return subprocess.run(['true'])\n"
        "@pytest.fixture\ndef trained():\n    return helper()\n"
        "def test_direct():\n    subprocess.Popen(['true'])\n"
        "def test_through_fixture(trained):\n    pass\n"
        "@pytest.mark.slow\ndef test_marked():\n    helper()\n"
        "def test_in_process():\n    assert 1\n"
    )
    assert process_tests(sample) == {"test_direct": False, "test_marked": True, "test_through_fixture": False}
