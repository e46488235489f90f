"""Loading plugins: Python files that define ops, mappings and kernels.

Sources: explicit paths (``--plugin FILE``), ``OPBRIDGE_PLUGIN_PATH`` (files or folders,
``:``-separated) and installed packages in the ``opbridge.plugins`` entry-point group. In a
folder, every ``*.py`` is a plugin except private modules (``_*.py``) and tests
(``test_*.py``, ``conftest.py``): a plugin's test imports the plugin, and loading the test as a
plugin would run its module-level code (and pytest) inside every conversion.
A plugin that fails to import is reported with its path and the error.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from .errors import OpbridgeError, PluginError

_loaded: dict[str, object] = {}


def _load_file(path: Path, *, from_env: bool = False) -> None:
    key = str(path.resolve())
    if key in _loaded:
        return
    if not path.is_file():
        if from_env:  # the user gave no --plugin: say where the path came from
            raise PluginError(f"plugin '{path}' (from OPBRIDGE_PLUGIN_PATH) does not exist or is not a file",
                              hint=f"fix or unset OPBRIDGE_PLUGIN_PATH: plugin files or folders, "
                                   f"'{os.pathsep}'-separated")
        raise PluginError(f"plugin '{path}' does not exist or is not a file",
                          hint="give the path of a plugin .py file (opbridge plugin new NAME writes one)")
    modname = "opbridge_plugin_" + hashlib.sha1(key.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"plugin '{path}' cannot be imported (is it a .py file?)",
                          hint="a plugin is a Python file (opbridge plugin new NAME writes one)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except OpbridgeError as err:
        sys.modules.pop(modname, None)
        raise PluginError(f"plugin '{path}' failed to load: {err.message}", hint=err.hint) from err
    except BaseException as err:
        sys.modules.pop(modname, None)
        if isinstance(err, KeyboardInterrupt):
            raise
        raise PluginError(
            f"plugin '{path}' failed to import: {type(err).__name__}: {err}",
            hint="fix the plugin file (run it with python to see the traceback)",
        ) from err
    _loaded[key] = module


def is_plugin_file(path: Path) -> bool:
    """Whether a ``.py`` file found in a plugin folder is a plugin (not private, not a test)."""
    name = path.name
    return not name.startswith(("_", "test_")) and name != "conftest.py"


def plugin_paths_from_env() -> list[Path]:
    out: list[Path] = []
    for part in os.environ.get("OPBRIDGE_PLUGIN_PATH", "").split(os.pathsep):
        if not part:
            continue
        p = Path(part)
        if p.is_dir():
            out.extend(sorted(x for x in p.glob("*.py") if is_plugin_file(x)))
        else:
            out.append(p)
    return out


def load_entry_points() -> None:
    for ep in metadata.entry_points(group="opbridge.plugins"):
        if ep.value in _loaded:
            continue
        try:
            ep.load()
        except Exception as err:
            raise PluginError(
                f"installed plugin '{ep.name}' ({ep.value}) failed to import: "
                f"{type(err).__name__}: {err}",
                hint=f"fix or uninstall the package that provides it (entry point {ep.value})",
            ) from err
        _loaded[ep.value] = ep


def load_plugins(paths: Iterable[str | os.PathLike[str]] = (), *, env: bool = True) -> None:
    """Load the given plugin files, then those of OPBRIDGE_PLUGIN_PATH and entry points."""
    for p in paths:
        _load_file(Path(p))
    if env:
        for p in plugin_paths_from_env():
            _load_file(p, from_env=True)
        load_entry_points()
