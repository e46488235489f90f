"""Modules for torch.jit.script in the tests (scripting needs them in a source file)."""

from __future__ import annotations

import torch


class DataDependentReshape(torch.nn.Module):
    """A size computed from the data: the converter needs it while converting, and cannot."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(int(x.abs().sum().clamp(2, 2)), -1)


class Branchy(torch.nn.Module):
    """Data-dependent control flow: the exporter refuses it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):
            return x * 2
        return x - 1


class ShapeCode(torch.nn.Module):
    """Scripted shape arithmetic: sizes, unpacking, numel, floordiv, indexing a size list, dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        n = x.numel() // b
        y = x.reshape(b, n)
        if x.dim() == 4:
            y = y * 2.0
        s = x.size()
        y = y[:, : s[1] * h]
        pair = (y, y + 1.0)
        first, second = pair
        z = torch.zeros(len(s), dtype=x.dtype)
        return first.sum(1, keepdim=True) + second[:, :1] + z[:1] + float(w)


class BoolShapeLogic(torch.nn.Module):
    """Scripted conditions on sizes (``and``, ``or``, ``not``): folded while converting."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        square = x.size(-1) == x.size(-2)
        batched = x.dim() == 4 or x.size(0) > 1
        if square and batched and not x.size(1) == 0:
            return x.transpose(-1, -2) * 3.0
        return x


class TupleOutputs(torch.nn.Module):
    """A tuple built, indexed and returned: TupleConstruct / TupleIndex / TupleUnpack."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        parts = (x + 1.0, x * 2.0, x - 3.0)
        a, b, c = parts
        return parts[1] + c, a.to(torch.float32) * int(x.size(0))


class IntBranch(torch.nn.Module):
    """Branches on an int forward() argument."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        if n > 2:
            y = x * 2.0
        else:
            y = x + float(n)
        return y


class ForLoop(torch.nn.Module):
    """A for loop with a run-time trip count carrying a tensor; the body reads the iteration."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        y = x
        for i in range(n):
            y = y * 0.5 + i
        return y


class WhileLoop(torch.nn.Module):
    """A while loop carrying a tensor and an int counter."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        k = 0
        y = x
        while k < n:
            y = y + x
            k += 1
        return y - k


class NestedIfInLoop(torch.nn.Module):
    """An if on the carried tensor's value inside a loop over an int argument."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        y = x
        for _ in range(n):
            if y.sum() > 10.0:
                y = y - 3.0
            else:
                y = y * 2.0
        return y


class ScalarArgs(torch.nn.Module):
    """float and bool forward() arguments."""

    def forward(self, x: torch.Tensor, s: float, flag: bool) -> torch.Tensor:
        if flag:
            return x * s
        return x - s


class ListArg(torch.nn.Module):
    """A List[int] argument that sizes a reshape: known only when the user passes it."""

    def forward(self, x: torch.Tensor, shape: list[int]) -> torch.Tensor:
        return x.reshape(shape) + 1.0


class InplaceInLoop(torch.nn.Module):
    """An in-place write inside a loop body: refused with the node named."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        y = x.clone()
        for _ in range(n):
            y.add_(1.0)
        return y


class Voice(torch.nn.Module):
    """A small voice-activity model in the style of the PyPI VAD models' scripted form: it
    branches on its int ``sr`` argument (16 kHz audio keeps every 2nd sample, 8 kHz audio its
    first half, scaled: the same duration; any other rate raises), frames the audio, runs a GRU
    over the frames and scores each one."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(32, 8)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, audio: torch.Tensor, sr: int) -> torch.Tensor:
        if sr == 16000:
            x = audio[:, ::2]
        elif sr == 8000:
            x = audio[:, : audio.size(1) // 2] * 0.5
        else:
            raise ValueError("Supported sampling rates: 8000, 16000")
        states, _ = self.gru(x.reshape(-1, 1, 32))
        return torch.sigmoid(self.head(states))


class Grow(torch.nn.Module):
    """A loop-carried tensor that grows by a block each iteration (its first dim is run-time)."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        y = x
        for _ in range(n):
            y = torch.cat([y, x * 2.0], 0)
        return y


class IndexInLoop(torch.nn.Module):
    """A loop body that reads the row its iteration number picks."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        acc = torch.zeros_like(x[0])
        for i in range(n):
            acc = acc + x[i] * float(i + 1)
        return acc


class WhileOnTensor(torch.nn.Module):
    """A while loop whose condition is computed from the carried tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        while bool(y.abs().sum() < 100.0):
            y = y * 2.0 + 0.25
        return y


class FloatListArg(torch.nn.Module):
    """A List[float] argument used as a tensor of weights."""

    def forward(self, x: torch.Tensor, w: list[float]) -> torch.Tensor:
        return x * torch.tensor(w)


class OptionalIntArg(torch.nn.Module):
    """An Optional[int] argument: given a value, it is an int input."""

    def forward(self, x: torch.Tensor, k: int | None) -> torch.Tensor:
        if k is None:
            return x
        return x + k


class DtypeBranch(torch.nn.Module):
    """Branches that give different dtypes: refused unless the condition is bound."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        if n > 2:
            y = x.to(torch.int64)
        else:
            y = x
        return y


class StrArg(torch.nn.Module):
    """A str forward() argument: not a graph input type."""

    def forward(self, x: torch.Tensor, mode: str) -> torch.Tensor:
        if mode == "double":
            return x * 2.0
        return x


class BreakLoop(torch.nn.Module):
    """A for loop left with break on a tensor condition (TorchScript folds the break into the
    loop's condition: a run-time `not`)."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        y = x
        for _ in range(n):
            if y.sum() > 20.0:
                break
            y = y * 2.0
        return y


class IntCarry(torch.nn.Module):
    """An int carried through a run-time loop, then used as a number."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        k = 1
        for i in range(n):
            k = k * 2 + i
        return x * float(k)


class ListAppendInLoop(torch.nn.Module):
    """Results collected in a list in a loop: refused with what to write instead."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        outs: list[torch.Tensor] = []
        for i in range(n):
            outs.append(x * float(i))
        return torch.stack(outs)


class LoopBetweenLayers(torch.nn.Module):
    """Layers before and after a run-time loop (the loop holds an if on the carried tensor)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = NestedIfInLoop()

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return torch.relu(self.inner(x * 3.0, n)) + 1.0


class ShapeBranch(torch.nn.Module):
    """Branches that give different shapes; the result is reshaped and reduced after the if."""

    def forward(self, x: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        if n > 2:
            y = x[:, ::2]
        else:
            y = x
        return y.reshape(-1) * 2.0, y.sum(1) + y.mean()


class RateCheck(torch.nn.Module):
    """Two accepted rates and a raise for any other (the PyPI VAD models' sr check)."""

    def forward(self, x: torch.Tensor, sr: int) -> torch.Tensor:
        if sr == 16000:
            y = x[::2]
        elif sr == 8000:
            y = x[:4]
        else:
            raise ValueError("unsupported sampling rate")
        return y * 2.0


class FixedRangeBreak(torch.nn.Module):
    """A loop over a constant range left early on a tensor condition: a run-time Loop."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        for _ in range(6):
            if y.sum() > 20.0:
                break
            y = y * 2.0
        return y


class LongFixedLoop(torch.nn.Module):
    """A constant trip count above the unrolling limit (the tests lower it): a run-time Loop.
    TorchScript's freezing itself unrolls the body 8 times, with a loop for the remainder."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        for _ in range(100):
            y = y * 0.99 + 0.01
        return y
