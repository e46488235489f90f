"""A scripted loop whose carried value changes shape is retyped; when its body then fails, the
refusal names the loop once, then the node inside the body that failed."""

from __future__ import annotations

from pathlib import Path

import pytest

import opbridge as ob
from opbridge.mappers.registry import DEFAULT_MAPPINGS, MappingRegistry


def _registry_whose_view_needs_a_static_batch() -> MappingRegistry:
    """The built-in mappings, with aten::view asking for a static dim 0 first: a loop-carried
    value whose dim 0 grows then fails the retyped body at that view."""
    reg = MappingRegistry()
    for e in DEFAULT_MAPPINGS.entries("torchscript"):
        reg.register(e.framework, e.key_text, e.fn, since_opset=e.since, defined_at=e.defined_at)
    builtin = next(e for e in DEFAULT_MAPPINGS.entries("torchscript") if e.key_text == "aten::view")

    def view(node, g):
        g.static_dim(g.input(0), 0, "this view")
        return builtin.fn(node, g)

    reg.register("torchscript", "aten::view", view, override=True)
    return reg


def test_a_failing_retyped_loop_body_names_the_loop_once(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="exporting a scripted module needs torch")
    from opbridge.export.torchscript import export_torchscript

    class Grow(torch.nn.Module):
        def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
            y = x
            for i in range(n):
                z = y
                if i > 100:
                    z = y.view(2, 3)
                y = torch.cat([y, z], 0)
            return y

    path = export_torchscript(Grow(), (torch.ones(2, 3), 2), tmp_path / "m.ts.json", mode="script")
    with pytest.raises(ob.OpbridgeError) as info:
        ob.convert(str(path), registry=_registry_whose_view_needs_a_static_batch())
    message = str(info.value)
    loop = info.value.context["node"]
    assert info.value.context["op_type"] == "Loop"
    assert message.count(f"node '{loop}' (Loop)") == 1, message
    assert "changes shape" in message and "(view)" in message and "this view" in message


def test_an_error_in_a_torchscript_branch_carries_no_onnx_opset(tmp_path: Path) -> None:
    """Re-homed to the If, the error's fields are a TorchScript node's: no opset (an ONNX field)."""
    torch = pytest.importorskip("torch", reason="exporting a scripted module needs torch")
    from opbridge.export.torchscript import export_torchscript

    class Branch(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if bool(x.sum() > 0):
                return x.view(3, 2)
            return x

    reg = MappingRegistry()
    for e in DEFAULT_MAPPINGS.entries("torchscript"):
        reg.register(e.framework, e.key_text, e.fn, since_opset=e.since, defined_at=e.defined_at)

    def view(node, g):
        raise g.error("refused for the test", hint="none")

    reg.register("torchscript", "aten::view", view, override=True)
    path = export_torchscript(Branch(), (torch.ones(2, 3),), tmp_path / "b.ts.json", mode="script")
    with pytest.raises(ob.OpbridgeError) as info:
        ob.convert(str(path), registry=reg)
    context = info.value.context
    assert context["op_type"] == "If" and "refused for the test" in str(info.value)
    assert context.get("opset") is None, context
