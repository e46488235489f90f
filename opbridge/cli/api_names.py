"""The Python API behind each command, and the keyword each of its options is there.

An option ``--foo-bar`` is the keyword ``foo_bar`` of one of the command's :attr:`ApiFace.calls`
unless :attr:`ApiFace.renamed` or :attr:`ApiFace.cli_only` says otherwise, with the reason.
``tests/test_api_cli_parity.py`` checks every option of every command against the signatures,
and ``python -m opbridge.tools.gendocs`` prints the exceptions in docs/cli.md.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ApiFace:
    """``calls``: the functions (dotted names under ``opbridge``) whose keywords the options
    are; ``renamed``: option -> (the keyword it is, why); ``cli_only``: option -> why
    there is no keyword; ``command_only``: why the whole command has no Python function."""

    calls: tuple[str, ...] = ()
    renamed: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    cli_only: Mapping[str, str] = field(default_factory=dict)
    command_only: str = ""


# Reasons shared by several commands.
_SHAPES = "a mapping of input name -> dims: one entry per repeated --input-shape"
_VALUES = "a mapping of input name -> value: one entry per repeated --input-value"
_PLUGINS = "a list of files: one entry per repeated --plugin"
_PASSES = ("the whole list of passes: --pass NAME is passes=opbridge.ir.passes.with_passes([NAME]), "
           "i.e. ('fold_constants', NAME, 'dead_code')")
_LOAD_PLUGINS = "ob.load_plugins(paths) loads them (OPBRIDGE_PLUGIN_PATH too)"
_MODEL = {"--input-shape": ("input_shapes", _SHAPES), "--input-value": ("input_values", _VALUES),
          "--plugin": ("plugins", _PLUGINS)}
_DATA = {"--data": ("samples", "samples= is the data: a folder or file, or feed dicts the CLI cannot "
                    "give"),
         "--samples": ("num_samples", "samples= is the data itself (the second argument)")}
_IMAGE = "a field of image=ImageSpec(path, input, mean, scale, pixel_format) (opbridge.validate.inputs)"


def _returned(what: str) -> str:
    return f"the function returns the result; {what} writes it"


#: Command (as typed, "plugin new" for a sub-command) -> its Python face.
API: dict[str, ApiFace] = {
    "demo": ApiFace(
        calls=("convert", "compile", "validate", "Program.run"),
        renamed={**_MODEL, "--pass": ("passes", _PASSES)},
        cli_only={"models": "the bundled example models by default; each step is the API call of its name",
                  "--out-dir": "where the tour writes its files",
                  "--max-rows": "rows of the printed tables; a Report's print(max_rows=) in Python"}),
    "convert": ApiFace(
        calls=("convert",),
        renamed={**_MODEL, "--pass": ("passes", _PASSES)},
        cli_only={"--output": _returned("ob.save(graph, path)")}),
    "ops": ApiFace(
        calls=("load_plugins",),
        renamed={"--plugin": ("paths", _LOAD_PLUGINS)},
        cli_only={"--format": "a format of the listing; ob.DEFAULT_OPS and ob.DEFAULT_MAPPINGS are the tables",
                  "--framework": "filters the listing; ob.DEFAULT_MAPPINGS holds every framework's"}),
    "show": ApiFace(calls=("convert", "format_graph"), renamed=_MODEL),
    "export-torchscript": ApiFace(
        calls=("export_torchscript",),
        renamed={"model": ("module", "a module: torch.jit.load(path) reads the .pt"),
                 "--input-shape": ("example_inputs", "the example tensors themselves, in argument order"),
                 "--example-value": ("example_inputs", "the example values themselves, in argument order"),
                 "--input-dtype": ("example_inputs", "the example tensors carry their dtypes"),
                 "--output": ("path", "the third argument")},
        cli_only={"--seed": "seeds the random example tensors the CLI makes; Python passes its own"}),
    "calibrate": ApiFace(
        calls=("calibrate", "convert", "quant.Preprocess"),
        renamed={**_MODEL, **_DATA},
        cli_only={"--output": _returned("table.save(path)")}),
    "quantize": ApiFace(
        calls=("quantize", "convert", "quant.Preprocess"),
        renamed={**_MODEL, **_DATA, "--per-tensor": ("per_channel", "per_channel=False")},
        cli_only={"--output": _returned("ob.save(graph, path)")}),
    "compile": ApiFace(
        calls=("compile", "convert"),
        renamed={**_MODEL, "--pass": ("passes", _PASSES),
                 "--target-json": ("target", "target= takes a preset name, a Target or a .json file")},
        cli_only={"--output": _returned("program.save(path)")}),
    "run": ApiFace(
        calls=("load_program", "Program.run", "load_plugins"),
        renamed={"program": ("path", "ob.load_program(path)"),
                 "--input": ("feeds", "a dict of arrays by input name; the CLI reads them from files"),
                 "--plugin": ("paths", _LOAD_PLUGINS)},
        cli_only={"--random-input": "Python passes its own arrays (numpy.random.default_rng(seed))",
                  "--seed": "the seed of --random-input",
                  "--output": "run() returns the outputs; numpy.savez(path, **outputs) writes them"}),
    "profile": ApiFace(
        calls=("load_program", "Program.profile", "load_plugins"),
        renamed={"program": ("path", "ob.load_program(path)"), "--plugin": ("paths", _LOAD_PLUGINS)},
        cli_only={"--trace": _returned("profile.write_trace(path)"),
                  "--json": "an output format: profile.to_dict() is the same data",
                  "--html": "an output format: a page for people"}),
    "validate": ApiFace(
        calls=("validate",),
        renamed={**_MODEL, "--pass": ("passes", _PASSES),
                 "--input": ("input_files", "NAME=FILE specs as the CLI takes them; inputs= takes arrays"),
                 "--mean": ("image", _IMAGE), "--scale": ("image", _IMAGE),
                 "--pixel-format": ("image", _IMAGE),
                 "--no-simulator": ("target", "target=None"),
                 "--no-origin": ("origin", "origin=False")},
        cli_only={"--report": _returned("report.write_json(path)"),
                  "--html": _returned("report.write_html(path)"),
                  "--debug": "the deprecated spelling of --dump-layers",
                  "--max-rows": "rows of the printed table: report.print(console, max_rows=)"}),
    "plugin": ApiFace(command_only="a group of sub-commands"),
    "plugin new": ApiFace(command_only="writes a plugin's source files to edit; there is nothing to call"),
    "random-weights": ApiFace(calls=("random_weights",), renamed={"--input-shape": ("input_shapes", _SHAPES),
                                                                  "--plugin": ("plugins", _PLUGINS)}),
    "batch": ApiFace(calls=("batch",), renamed={**_MODEL, "--pass": ("passes", _PASSES)}),
    "serve": ApiFace(
        calls=("serve.ServeConfig",),
        renamed={"--job-timeout": ("job_timeout_s", "the field names its unit")},
        cli_only={"--host": "the address to listen on: serve create_app(ServeConfig(...)) with any ASGI server",
                  "--port": "the port to listen on: serve create_app(ServeConfig(...)) with any ASGI server"}),
}


def resolve(name: str) -> Callable[..., Any]:
    """The function (or class) ``opbridge.<name>``: "convert", "Program.run", "quant.Preprocess"
    (the longest leading part that is a module is imported; the rest are attributes)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, -1, -1):
        try:
            obj: Any = importlib.import_module(".".join(["opbridge", *parts[:cut]]))
        except ModuleNotFoundError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj  # type: ignore[no-any-return]
    raise AssertionError("unreachable: the package itself imports")


def keywords(name: str) -> frozenset[str]:
    """The parameter names of ``opbridge.<name>`` (a class: its constructor's)."""
    return frozenset(inspect.signature(resolve(name)).parameters) - {"self"}


def option_key(action: Any) -> str:
    """How the table names an option: its long spelling (``--output`` for ``-o/--output``), or
    a positional argument's name."""
    longs = [s for s in action.option_strings if s.startswith("--")]
    return longs[0] if longs else (action.option_strings[0] if action.option_strings else action.dest)


def default_keyword(key: str) -> str:
    """The keyword an option is when the table says nothing else: ``--foo-bar`` -> ``foo_bar``."""
    return key.lstrip("-").replace("-", "_")
