"""The validation report: one row per compared tensor and runner, and the first divergence.

A :class:`Report` is what ``ob.validate`` returns and what ``opbridge validate`` prints (a rich
table, coloured where the terminal allows) and writes with ``--report report.json``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .compare import CompareResult

#: Report format version, bumped when the JSON layout changes.
REPORT_VERSION = 1


@dataclass
class Row:
    """One comparison: a tensor, by its name in the origin model, as two runners computed it."""

    #: the tensor's name in the origin model (ONNX value name, Caffe blob, TorchScript debug name)
    tensor: str
    #: the origin node (layer) that produces it, and that node's op type in the origin framework
    node: str
    op_type: str
    #: the runner taken as the reference, and the one compared with it
    reference: str
    candidate: str
    result: CompareResult
    #: whether the tensor is a graph output
    is_output: bool = False
    #: the tensors the producing node reads (graph inputs and earlier tensors; not weights)
    inputs: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.result.passed

    def to_dict(self) -> dict[str, Any]:
        return {
            "tensor": self.tensor, "node": self.node, "op_type": self.op_type,
            "reference": self.reference, "candidate": self.candidate, "is_output": self.is_output,
            **self.result.to_dict(),
        }


@dataclass(frozen=True)
class Divergence:
    """The first tensor, in execution order, where a runner leaves the reference."""

    tensor: str
    node: str
    op_type: str
    reference: str
    candidate: str
    #: ``shape``, ``dtype``, ``nonfinite`` or ``different`` (values)
    status: str
    #: what differs, in words
    reason: str
    #: the node's input tensors that were compared and agreed: when these are all of its
    #: inputs, the node itself (its mapping, op or kernel) is where the numbers go wrong
    inputs_matched: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = (f"node '{self.node}' ({self.op_type}), tensor '{self.tensor}': {self.candidate} vs "
                f"{self.reference}: {self.reason}")
        if self.inputs_matched:
            text += "; its input(s) " + ", ".join(f"'{t}'" for t in self.inputs_matched) + " agree"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "tensor": self.tensor, "node": self.node, "op_type": self.op_type,
            "reference": self.reference, "candidate": self.candidate, "status": self.status,
            "reason": self.reason, "inputs_matched": list(self.inputs_matched),
        }


@dataclass
class Report:
    """The outcome of validating one model: rows in execution order, and notes on what ran."""

    model: str
    framework: str
    #: the runners that produced tensors, reference first
    runners: list[str] = field(default_factory=list)
    #: (cosine, euclid) given by the user, or None for the per-dtype defaults
    tolerance: tuple[float, float] | None = None
    rows: list[Row] = field(default_factory=list)
    #: what the inputs were: name -> "f32[1,3,224,224] from x.npy" etc.
    inputs: dict[str, str] = field(default_factory=dict)
    #: what could not run or was limited, and why ("simulator: outputs only", ...)
    notes: list[str] = field(default_factory=list)
    #: runners that failed (a simulator that cannot compile or run the model); each fails the report
    errors: list[str] = field(default_factory=list)
    #: the converted Graph and the compiled Program validation ran, when kept (for the HTML
    #: report's diagram and profile; not part of the JSON)
    graph: Any = field(default=None, repr=False, compare=False)
    program: Any = field(default=None, repr=False, compare=False)
    #: how the simulator was compared: ``layer-groups`` (the real program: tensors that pass
    #: through DDR), ``per-layer`` (a debugging compile that stores every layer's output) or
    #: ``no-simulator``
    mode: str = "layer-groups"
    #: the origin layers the origin framework gave no tensor for (custom ops it cannot run,
    #: layers after them); their tensors were compared against the interpreter instead
    unreferenced: list[str] = field(default_factory=list)

    @property
    def reference(self) -> str:
        return self.runners[0] if self.runners else ""

    @property
    def passed(self) -> bool:
        """True when at least one comparison ran, every comparison passed and no runner failed."""
        return bool(self.rows) and not self.errors and all(r.passed for r in self.rows)

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if not r.passed]

    @property
    def first_divergence(self) -> Divergence | None:
        """The earliest failing row (execution order; ties go to the first candidate listed)."""
        agreed: set[tuple[str, str]] = set()
        for r in self.rows:
            if not r.passed:
                ok = tuple(t for t in r.inputs if (t, r.candidate) in agreed)
                return Divergence(r.tensor, r.node, r.op_type, r.reference, r.candidate,
                                  r.result.status, r.result.reason, ok)
            agreed.add((r.tensor, r.candidate))
        return None

    def summary(self) -> str:
        """One line: PASS/FAIL, how many comparisons, the first divergence."""
        n, bad = len(self.rows), len(self.failures)
        if self.errors:
            return f"FAIL: {self.errors[0]}"
        if not n:
            return f"NOTHING COMPARED for {self.model}"
        s = "s" if n != 1 else ""
        if self.passed:
            return f"PASS: {n} comparison{s} of {self.model} within tolerance"
        return f"FAIL: {bad} of {n} comparison{s} out of tolerance; first divergence: {self.first_divergence}"

    def to_dict(self) -> dict[str, Any]:
        fd = self.first_divergence
        return {
            "version": REPORT_VERSION,
            "model": self.model,
            "framework": self.framework,
            "passed": self.passed,
            "runners": list(self.runners),
            "reference": self.reference,
            "tolerance": list(self.tolerance) if self.tolerance else "per-dtype defaults",
            "mode": self.mode,
            "layers_without_framework_reference": list(self.unreferenced),
            "inputs": dict(self.inputs),
            "first_divergence": fd.to_dict() if fd else None,
            "notes": list(self.notes),
            "errors": list(self.errors),
            "rows": [r.to_dict() for r in self.rows],
        }

    def write_json(self, path: str | os.PathLike[str]) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n")

    def write_html(self, path: str | os.PathLike[str]) -> None:
        """Write the report as one self-contained HTML page (works offline): summary, a chart per
        layer, the sortable and filterable table, the graph diagram and, when the model was
        compiled, the profile's timeline."""
        from ..ir.io import atomic_write
        from .html import report_html

        page = report_html(self)
        atomic_write(path, lambda tmp: Path(tmp).write_text(page, encoding="utf-8"))

    def print(self, console: Any = None, *, max_rows: int = 40) -> None:
        """Print the table, the notes and the summary with rich (colours when the terminal allows)."""
        from rich.console import Console

        console = console or Console()
        console.print(self.table(max_rows=max_rows))
        console.print(f"[bold]mode:[/] {_esc(MODES.get(self.mode, self.mode))}", highlight=False)
        for note in self.notes:
            console.print(f"[yellow]note:[/] {_esc(note)}", highlight=False)
        for err in self.errors:
            console.print(f"[bold red]error:[/] {_esc(err)}", highlight=False)
        style = "bold green" if self.passed else "bold red"
        console.print(f"[{style}]{_esc(self.summary())}[/]", highlight=False)

    def table(self, *, max_rows: int = 40) -> Any:
        """A rich Table of the rows; long reports keep the head, the rows round the first
        divergence, and the outputs."""
        from rich.table import Table

        title = f"validate {self.model}: " + " vs ".join(self.runners[1:]) + f" against {self.reference}"
        t = Table(title=title, title_justify="left", show_lines=False, pad_edge=False)
        for col, just, wrap in (("#", "right", False), ("tensor", "left", True), ("layer", "left", True),
                                ("op", "left", True), ("run", "left", False), ("shape", "left", True),
                                ("cosine", "right", False), ("euclid", "right", False),
                                ("max|Δ|", "right", False), ("SQNR", "right", False),
                                ("status", "left", False)):
            t.add_column(col, justify=just, overflow="fold", no_wrap=not wrap)
        prev = -1
        for i in _shown(self, max_rows):
            if prev >= 0 and i != prev + 1:
                t.add_row("…", f"{i - prev - 1} rows not shown", *[""] * 9)
            prev = i
            r = self.rows[i]
            res = r.result
            ok = r.passed
            status = f"[green]{res.status}[/]" if ok else f"[bold red]{res.status.upper()}[/]"
            shape = "x".join(map(str, res.ref_shape)) or "scalar"
            if res.cand_shape != res.ref_shape:
                shape += "→" + ("x".join(map(str, res.cand_shape)) or "scalar")
            t.add_row(str(i), _esc(r.tensor) + (" (out)" if r.is_output else ""), _esc(r.node),
                      _esc(r.op_type), self._run_label(r), f"{res.ref_dtype}[{shape}]",
                      _num(res.cosine, 5), _num(res.euclid, 5), _num(res.max_abs, 2, "g"),
                      _num(res.sqnr_db, 1), status)
        return t

    def _run_label(self, r: Row) -> str:
        """The candidate, and its reference where it is not the report's (a layer the origin
        framework gave no tensor for)."""
        run = _SHORT.get(r.candidate, r.candidate)
        if r.reference != self.reference:
            run += " vs " + _SHORT.get(r.reference, r.reference)
        return run


_SHORT = {"interpreter": "interp", "simulator": "sim"}

#: The report's modes, in words.
MODES = {
    "layer-groups": "layer-groups (the compiled program; inside a layer group only the tensors "
                    "stored to DDR are compared: --per-layer compares every layer)",
    "per-layer": "per-layer (a debugging compile that stores every layer's output to DDR; every "
                 "layer compared; its timing is not the real program's)",
    "no-simulator": "no simulator (the interpreter and the origin framework only)",
}


def _shown(report: Report, max_rows: int) -> list[int]:
    n = len(report.rows)
    if max_rows <= 0 or n <= max_rows:
        return list(range(n))
    keep = set(range(min(10, n)))
    bad = [i for i, r in enumerate(report.rows) if not r.passed]
    if bad:
        keep.update(range(max(0, bad[0] - 5), min(n, bad[0] + 6)))
    keep.update(i for i, r in enumerate(report.rows) if r.is_output)
    keep.update(range(max(0, n - 5), n))
    return sorted(keep)


def _num(v: float, digits: int, fmt: str = "f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}{fmt}}"


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)
