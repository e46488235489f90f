"""No function in the package is longer than LIMIT lines (``def`` line to last line, docstring
included), so each one can be read on one screen; a long one wants splitting along a seam a
reader can name (a helper with a clear name, a small dataclass for the state passed on).

ALLOWED lists the functions still over the limit, each with its reason; the list only shrinks:
an entry whose function is gone or has come under the limit fails too, so it is removed as soon
as the function is split.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import opbridge

LIMIT = 80

PACKAGE = Path(opbridge.__file__).resolve().parent
ROOT = PACKAGE.parent

#: "path::qualname" -> why it is still over the limit.
ALLOWED: dict[str, str] = {}


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualname, length in lines) of every function and method, nested ones included."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            qualname = prefix + child.name
            assert child.end_lineno is not None
            yield qualname, child.end_lineno - child.lineno + 1
            yield from _functions(child, qualname + ".<locals>.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, prefix + child.name + ".")
        else:
            yield from _functions(child, prefix)


def function_lengths(package: Path = PACKAGE) -> dict[str, int]:
    """"path::qualname" (path relative to the repository) -> length, for every function."""
    out: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for qualname, length in _functions(tree):
            out[f"{rel}::{qualname}"] = length
    return out


def test_no_function_over_the_limit() -> None:
    too_long = {key: n for key, n in function_lengths().items() if n > LIMIT and key not in ALLOWED}
    assert not too_long, f"functions over {LIMIT} lines (split them along a seam you can name):\n" + "\n".join(
        f"  {key}: {n} lines" for key, n in sorted(too_long.items(), key=lambda kv: -kv[1])
    )


def test_allowlist_only_holds_functions_still_over_the_limit() -> None:
    lengths = function_lengths()
    stale = {key: lengths.get(key) for key in ALLOWED if lengths.get(key, 0) <= LIMIT}
    assert not stale, "remove these ALLOWED entries (the function is gone or now short enough):\n" + "\n".join(
        f"  {key}: {'no such function' if n is None else f'{n} lines'}" for key, n in stale.items()
    )


def test_allowlist_reasons_are_given() -> None:
    assert all(reason.strip() for reason in ALLOWED.values())


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n" + "    x = 1\n" * 3, {"f": 4}),
        ("class C:\n    def m(self):\n        pass\n", {"C.m": 2}),
        ("def f():\n    def g():\n        pass\n    return g\n", {"f": 4, "f.<locals>.g": 2}),
        ("if True:\n    async def h():\n        pass\n", {"h": 2}),
    ],
    ids=["function", "method", "nested", "async-under-if"],
)
def test_function_lengths_are_measured_def_to_last_line(source: str, expected: dict[str, int]) -> None:
    assert dict(_functions(ast.parse(source))) == expected


def test_a_long_function_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text("def long():\n" + "    pass\n" * LIMIT + "def short():\n    pass\n")
    assert function_lengths(pkg) == {"pkg/mod.py::long": LIMIT + 1, "pkg/mod.py::short": 2}
