"""The Python API has the CLI's names: every option of every command is a keyword of the
function the command calls, or is listed (with the reason) in opbridge.cli.api_names.

The options come from the CLI's own parser (opbridge.cli.build_parser), the keywords from the
functions' signatures; a new option that is neither fails here. The keywords added so that
they are (quantize's per_tensor and num_samples, compile's lmem_kib and a .json target,
ob.random_weights) are checked to do what the option does.
"""

from __future__ import annotations

import argparse
import inspect
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.cli import build_parser, main
from opbridge.cli.api_names import API, ApiFace, default_keyword, keywords, option_key, resolve


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command's parser by its name as typed ("plugin new" for a sub-command)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield " ".join((*path, name)), sub
                yield from _commands(sub, (*path, name))


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [option_key(a) for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def mismatches(command: str, parser: argparse.ArgumentParser, face: ApiFace) -> list[str]:
    """What is wrong with ``face`` as the API of ``command``: an option that is no keyword and
    is not listed, a listed keyword that does not exist, an entry that names no option or is
    no longer needed (the API took the CLI's name)."""
    options = _options(parser)
    if face.command_only:
        return []
    params = frozenset().union(*(keywords(c) for c in face.calls))
    # a keyword of the option's name that another option is (calibrate's samples= is --data)
    taken = {kw for kw, _ in face.renamed.values()}
    out = []
    for key in options:
        if key in face.renamed:
            kw, why = face.renamed[key]
            if not why or kw not in params:
                out.append(f"{command} {key}: listed as {kw}, which none of {face.calls} takes")
            elif default_keyword(key) in params - taken:
                out.append(f"{command} {key}: the API now takes {default_keyword(key)}; drop the entry")
        elif key in face.cli_only:
            if not face.cli_only[key]:
                out.append(f"{command} {key}: listed as CLI-only without a reason")
            elif default_keyword(key) in params:
                out.append(f"{command} {key}: the API now takes {default_keyword(key)}; drop the entry")
        elif default_keyword(key) not in params:
            out.append(f"{command} {key}: no keyword {default_keyword(key)} in {face.calls}, and not "
                       "listed in opbridge.cli.api_names")
    out += [f"{command} {key}: listed, but the command has no such option"
            for key in (*face.renamed, *face.cli_only) if key not in options]
    return out


def test_every_command_has_its_python_face() -> None:
    commands = dict(_commands(build_parser()))
    assert set(commands) == set(API), "add the command to opbridge.cli.api_names.API"
    for name, face in API.items():
        assert face.calls or face.command_only, name
        for call in face.calls:
            assert callable(resolve(call)), (name, call)


@pytest.mark.parametrize("command", sorted(API))
def test_every_option_is_an_api_keyword_or_listed(command: str) -> None:
    parser = dict(_commands(build_parser()))[command]
    assert mismatches(command, parser, API[command]) == []


def test_a_new_option_without_a_keyword_fails() -> None:
    """The check above is not vacuous: an option added to a command's real parser is caught,
    and so is a listed one whose keyword does not exist or that the API has taken since."""
    parser = dict(_commands(build_parser()))["convert"]
    parser.add_argument("--brand-new-knob", type=int)
    assert mismatches("convert", parser, API["convert"]) == [
        "convert --brand-new-knob: no keyword brand_new_knob in ('convert',), and not listed in "
        "opbridge.cli.api_names"]
    face = ApiFace(calls=("convert",), renamed={"--brand-new-knob": ("knobs", "why")},
                   cli_only={"--weights": "why", "--gone": "why"})
    found = mismatches("convert", parser, face)
    assert "convert --brand-new-knob: listed as knobs, which none of ('convert',) takes" in found
    assert "convert --weights: the API now takes weights; drop the entry" in found
    assert "convert --gone: listed, but the command has no such option" in found
    assert all(w in " ".join(found) for w in ("--input-shape", "--input-value", "--plugin", "--output"))


def test_plural_and_renamed_keywords_are_documented() -> None:
    """docs/cli.md (generated) lists, under each command, every option whose keyword differs."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    for name, face in API.items():
        section = text.split(f"## opbridge {name}\n", 1)[1].split("\n## ", 1)[0]
        for key, (kw, _) in face.renamed.items():
            assert f"| `{key}` | `{kw}` |" in section, (name, key)
        for key in face.cli_only:
            assert f"| `{key}` | (none) |" in section, (name, key)


# --- the keywords added for parity do what the option does ---------------------------------

def _conv_graph() -> ob.Graph:
    rng = np.random.default_rng(3)
    b = ob.GraphBuilder("parity")
    x = b.input("x", "f32", (1, 3, 8, 8))
    w = b.constant("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    bias = b.constant("b", rng.standard_normal(4).astype(np.float32))
    b.output(b.op("Relu", [b.op("Conv", [x, w, bias], pads=(1, 1, 1, 1))]))
    return b.build()


def _feeds(n: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    return [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(n)]


def _same_graph(a: ob.Graph, b: ob.Graph) -> None:
    assert [n.op for n in a.nodes] == [n.op for n in b.nodes]
    for name, c in a.constants.items():
        np.testing.assert_array_equal(c.data, b.constants[name].data)


def _multipliers(q: ob.Graph) -> list[np.ndarray]:
    """The fixed-point multipliers of the Requantize after each integer Conv: one per output
    channel with per-channel weights, one in all with per-tensor ones."""
    return [n.inputs[1].data for n in q.nodes if n.op == "Requantize" and n.inputs[1] is not None]


def test_quantize_per_tensor_is_per_channel_false(tmp_path: Path) -> None:
    """The CLI's --per-tensor is the API's per_channel=False (one scale)."""
    g = _conv_graph()
    table = ob.calibrate(g, _feeds(3))
    per_tensor = ob.quantize(g, table, per_channel=False)
    assert [m.size for m in _multipliers(per_tensor)] == [1]
    assert [m.size for m in _multipliers(ob.quantize(g, table))] == [4]
    ob.save(g, tmp_path / "g.obir")
    table.save(tmp_path / "t.json")
    assert main(["quantize", str(tmp_path / "g.obir"), "--table", str(tmp_path / "t.json"), "--per-tensor",
                 "-o", str(tmp_path / "q.obir")]) == 0
    _same_graph(ob.load(tmp_path / "q.obir"), per_tensor)


def test_quantize_num_samples_caps_the_samples_as_slicing_does() -> None:
    g = _conv_graph()
    feeds = _feeds(4)
    table = ob.calibrate(g, feeds)
    capped = ob.quantize(g, table, bias_correction=True, samples=feeds, num_samples=1)
    _same_graph(capped, ob.quantize(g, table, bias_correction=True, samples=feeds[:1]))
    with pytest.raises(ob.OpbridgeError, match="number of samples 0"):
        ob.quantize(g, table, bias_correction=True, samples=feeds, num_samples=0)


def test_cli_quantize_samples_reaches_the_api(tmp_path: Path) -> None:
    """``quantize --samples 1 --bias-correction`` corrects on the first sample only, as
    ``ob.quantize(num_samples=1)`` does (the option was read and dropped before)."""
    g = _conv_graph()
    feeds = _feeds(3)
    data = tmp_path / "data"
    data.mkdir()
    for i, f in enumerate(feeds):
        np.save(data / f"{i}.npy", f["x"])
    ob.save(g, str(tmp_path / "g.obir"))
    table = ob.calibrate(g, feeds)
    table.save(str(tmp_path / "t.json"))
    out = tmp_path / "q.obir"
    done = subprocess.run([sys.executable, "-m", "opbridge", "quantize", str(tmp_path / "g.obir"), "--table",
                           str(tmp_path / "t.json"), "--bias-correction", "--data", str(data), "--samples", "1",
                           "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    _same_graph(ob.load(str(out)), ob.quantize(g, table, bias_correction=True, samples=feeds[:1]))
    assert not np.array_equal(
        *[next(c.data for n, c in q.constants.items() if c.data is not None and c.data.dtype == np.int32)
          for q in (ob.load(str(out)), ob.quantize(g, table, bias_correction=True, samples=feeds))])


def test_compile_lmem_kib_and_target_json_as_the_cli(tmp_path: Path) -> None:
    g = _conv_graph()
    ob.save(g, str(tmp_path / "g.obir"))
    target = ob.Target.preset("bm1684x")
    (tmp_path / "t.json").write_text(json.dumps(target.to_dict()), encoding="utf-8")
    prog = ob.compile(g, target=str(tmp_path / "t.json"), lmem_kib=64)
    assert prog.target.lmem_bytes_per_lane == 64 * 1024
    assert prog.target.to_dict() == {**target.to_dict(), "lmem_bytes_per_lane": 65536}
    done = subprocess.run([sys.executable, "-m", "opbridge", "compile", str(tmp_path / "g.obir"), "--target-json",
                           str(tmp_path / "t.json"), "--lmem-kib", "64", "-o", str(tmp_path / "p.obprog")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with pytest.raises(ob.SimulatorError, match="lmem_kib = 0: give the local memory"):
        ob.compile(g, lmem_kib=0)
    cli = ob.load_program(str(tmp_path / "p.obprog"))
    assert cli.to_json() == prog.to_json()
    x = _feeds(1)[0]
    np.testing.assert_array_equal(prog.run(x)[g.outputs[0].name], cli.run(x)[g.outputs[0].name])


def test_random_weights_writes_the_cli_bytes(tmp_path: Path) -> None:
    from opbridge.examples import fire_net_prototxt

    proto = fire_net_prototxt()
    written = ob.random_weights(proto, tmp_path / "api.caffemodel", seed=5)
    # the writer the CLI used before it called ob.random_weights
    from opbridge.tools.caffe_weights import write_random_weights

    write_random_weights(proto, tmp_path / "direct.caffemodel", seed=5)
    assert (tmp_path / "api.caffemodel").read_bytes() == (tmp_path / "direct.caffemodel").read_bytes()
    assert written and all(shapes for shapes in written.values())
    assert "random_weights" in ob.__all__ and "output" in inspect.signature(ob.random_weights).parameters


def test_calibrate_and_quantize_take_threads() -> None:
    g = _conv_graph()
    feeds = _feeds(2)
    one = ob.calibrate(g, feeds, threads=1)
    two = ob.calibrate(g, feeds, threads=2)
    assert {k: r.threshold for k, r in one.tensors.items()} == {k: r.threshold for k, r in two.tensors.items()}
    with pytest.raises(ob.OpbridgeError, match="^threads = -1"):
        ob.calibrate(g, feeds, threads=-1)
    for bad in ({"threads": -1}, {"num_samples": 0}, {"num_samples": 2.5}, {"num_samples": "x"}):
        with pytest.raises(ob.OpbridgeError):  # refused on the plain int8 path too
            ob.quantize(g, one, **bad)
    _same_graph(ob.quantize(g, one, bias_correction=True, samples=feeds, threads=2),
                ob.quantize(g, one, bias_correction=True, samples=feeds))
