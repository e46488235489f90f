"""Symbolic dims: named dims (``"batch"``), expressions of them (``"batch*3"``, ``"(seq-1)//2+1"``)
and dims known only at run time (names starting with ``?``, made by data-dependent ops).

A dim is an ``int`` or a ``str``; the string is a canonical expression over names with ``+``,
``-``, ``*`` and ``//`` by a positive constant, so that two equal expressions are equal strings
and shapes stay plain JSON in ``.obir`` files. A name that is not an identifier is written in
braces (``{batch size}``). Arithmetic here is exact polynomial arithmetic; a floor division
that does not divide evenly becomes an opaque term. :func:`evaluate` resolves a dim against the
values its names have in one run (:func:`bind_shape` collects them from concrete shapes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, MutableMapping

from ..errors import ShapeError

Dim = int | str
#: A polynomial: monomial (sorted tuple of atom names) -> integer coefficient.
Poly = dict[tuple[str, ...], int]

#: Prefix of a dim whose value only the run knows (a NonZero's count, a data-given shape).
RUNTIME_PREFIX = "?"

_IDENT = re.compile(r"\??[A-Za-z_][A-Za-z0-9_.]*")
_TOKEN = re.compile(r"\s*(?:(\d+)|(//|[-+*()])|(\{[^{}]*\})|(\??[A-Za-z_][A-Za-z0-9_.]*))")


def _atom_text(name: str) -> str:
    return name if _IDENT.fullmatch(name) or name.startswith("(") else "{" + name + "}"


def _tokens(text: str) -> list[str] | None:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            return None
        out.append(m.group(m.lastindex or 0).strip())
        pos = m.end()
    return out


class _Parser:
    """Recursive descent over ``expr := term (('+'|'-') term)*``, ``term := factor (('*'
    factor) | ('//' int))*``, ``factor := int | name | '(' expr ')' | '-' factor``."""

    def __init__(self, toks: list[str]) -> None:
        self.toks, self.i = toks, 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> str:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expr(self) -> Poly:
        p = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            q = self.term()
            p = _add(p, q if op == "+" else _scale(q, -1))
        return p

    def term(self) -> Poly:
        p = self.factor()
        while self.peek() in ("*", "//"):
            op = self.take()
            if op == "*":
                p = _mul(p, self.factor())
            else:
                c = self.take()
                if not c.isdigit() or int(c) <= 0:
                    raise ValueError(c)
                p = _floordiv(p, int(c))
        return p

    def factor(self) -> Poly:
        t = self.take()
        if t == "(":
            p = self.expr()
            if self.take() != ")":
                raise ValueError(")")
            return p
        if t == "-":
            return _scale(self.factor(), -1)
        if t.isdigit():
            return {(): int(t)} if int(t) else {}
        if t.startswith("{"):
            return {(t[1:-1],): 1}
        if t in ("+", "*", "//", ")"):
            raise ValueError(t)
        return {(t,): 1}


def _clean(p: Poly) -> Poly:
    return {k: v for k, v in p.items() if v}


def _add(a: Poly, b: Poly) -> Poly:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return _clean(out)


def _scale(a: Poly, c: int) -> Poly:
    return _clean({k: v * c for k, v in a.items()})


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ka, va in a.items():
        for kb, vb in b.items():
            k = tuple(sorted(ka + kb))
            out[k] = out.get(k, 0) + va * vb
    return _clean(out)


def _floordiv(a: Poly, c: int) -> Poly:
    if c == 1:
        return dict(a)
    if all(v % c == 0 for v in a.values()):
        return {k: v // c for k, v in a.items()}
    if set(a) <= {()}:
        return _clean({(): a.get((), 0) // c})
    return {(f"({_format(a)})//{c}",): 1}


def _format(p: Poly) -> str:
    if not p:
        return "0"
    parts = []
    # constant last, monomials by degree then name: "batch*seq+seq+1"
    for k in sorted(p, key=lambda m: (len(m) == 0, -len(m), m)):
        v = p[k]
        body = "*".join(_atom_text(a) for a in k)
        if not k:
            term = str(abs(v))
        elif abs(v) == 1:
            term = body
        else:
            term = f"{abs(v)}*{body}"
        parts.append(("-" if v < 0 else "+") + term)
    text = "".join(parts)
    return text[1:] if text.startswith("+") else text


def to_poly(d: Dim) -> Poly:
    """``d`` as a polynomial; a string that is not an expression is one opaque name."""
    if isinstance(d, bool):
        raise ShapeError(f"dim {d!r} is a boolean")
    if isinstance(d, int):
        return {(): d} if d else {}
    toks = _tokens(d)
    if toks:
        parser = _Parser(toks)
        try:
            p = parser.expr()
            if parser.i == len(toks):
                return p
        except (ValueError, IndexError):
            pass
    return {(d,): 1}


def from_poly(p: Poly) -> Dim:
    if set(p) <= {()}:
        return p.get((), 0)
    return _format(p)


def canonical(d: Dim) -> Dim:
    """``d`` in canonical form: ``"3*N"`` and ``"N*3"`` are both ``"3*N"``; ``"2"`` is 2."""
    return from_poly(to_poly(d))


def add(*dims: Dim) -> Dim:
    p: Poly = {}
    for d in dims:
        p = _add(p, to_poly(d))
    return from_poly(p)


def sub(a: Dim, b: Dim) -> Dim:
    return from_poly(_add(to_poly(a), _scale(to_poly(b), -1)))


def mul(*dims: Dim) -> Dim:
    p: Poly = {(): 1}
    for d in dims:
        p = _mul(p, to_poly(d))
    return from_poly(p)


def prod(dims: Iterable[Dim]) -> Dim:
    return mul(*dims)


def floordiv(a: Dim, c: int) -> Dim:
    """``a // c`` for a positive constant ``c``."""
    if not isinstance(c, int) or c <= 0:
        raise ShapeError(f"symbolic floor division by {c!r}: only positive constants divide a dim")
    return from_poly(_floordiv(to_poly(a), c))


def divide_exact(a: Dim, b: Dim) -> Dim | None:
    """``a / b`` when it divides exactly (``"6*N" / "2*N"`` is 3), else None."""
    pa, pb = to_poly(a), to_poly(b)
    if not pb:
        return None
    if set(pb) <= {()}:
        c = pb[()]
        if c > 0 and all(v % c == 0 for v in pa.values()):
            return from_poly({k: v // c for k, v in pa.items()})
        return None
    if len(pb) != 1:
        return from_poly({(): 1}) if pa == pb else None
    (mono, coef), = pb.items()
    out: Poly = {}
    for k, v in pa.items():
        rest = list(k)
        for atom in mono:
            if atom not in rest:
                return None
            rest.remove(atom)
        if v % coef:
            return None
        out[tuple(rest)] = v // coef
    return from_poly(out)


def equal(a: Dim, b: Dim) -> bool:
    """Whether two dims are the same (as expressions)."""
    return to_poly(a) == to_poly(b)


def names(d: Dim) -> set[str]:
    """The plain names ``d`` depends on (those inside floor-divided terms too)."""
    out: set[str] = set()
    for mono in to_poly(d):
        for atom in mono:
            if atom.startswith("(") and ")//" in atom:
                out |= names(atom[1:atom.rindex(")//")])
            else:
                out.add(atom)
    return out


def is_runtime(d: Dim) -> bool:
    return isinstance(d, str) and any(n.startswith(RUNTIME_PREFIX) for n in names(d))


def runtime_dim(owner: str, tag: str = "n") -> str:
    """A fresh dim known only at run time, named after the node ``owner`` that makes it."""
    base = re.sub(r"[^A-Za-z0-9_.]", "_", owner) or "node"
    if not (base[0].isalpha() or base[0] == "_"):
        base = "_" + base
    return f"{RUNTIME_PREFIX}{base}.{tag}"


def evaluate(d: Dim, values: Mapping[str, int]) -> int | None:
    """The value of ``d`` given its names' values; None when a name is unbound."""
    if isinstance(d, int):
        return d
    total = 0
    for mono, coef in to_poly(d).items():
        term = coef
        for atom in mono:
            if atom.startswith("(") and ")//" in atom:
                cut = atom.rindex(")//")
                inner = evaluate(atom[1:cut], values)
                if inner is None:
                    return None
                term *= inner // int(atom[cut + 3:])
            elif atom in values:
                term *= values[atom]
            else:
                return None
        total += term
    return total


def bind(d: Dim, actual: int, values: MutableMapping[str, int]) -> bool:
    """Check ``actual`` against ``d``, binding ``d``'s name when ``d`` is a bare unbound name
    (or a linear expression with one unbound name); False when they disagree."""
    known = evaluate(d, values)
    if known is not None:
        return known == actual
    p = to_poly(d)
    free = [m for m in p if any(a not in values for a in m)]
    if len(free) == 1 and len(free[0]) == 1 and not free[0][0].startswith("("):
        atom, coef = free[0][0], p[free[0]]
        rest = evaluate(from_poly({k: v for k, v in p.items() if k != free[0]}), values)
        if rest is not None and (actual - rest) % coef == 0 and (actual - rest) // coef >= 0:
            values[atom] = (actual - rest) // coef
            return True
        return False
    return True  # not enough known to tell; later dims will


def bind_shape(shape: Iterable[Dim], actual: Iterable[int],
               values: MutableMapping[str, int]) -> int | None:
    """Bind ``shape``'s names against the concrete ``actual`` (same rank); the index of the first
    dim that disagrees, else None."""
    for i, (d, a) in enumerate(zip(shape, actual)):
        if not bind(d, int(a), values):
            return i
    return None


def sizes_text(values: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items()))


def ceil_div(a: Dim, c: int) -> Dim:
    """``ceil(a / c)`` for a positive constant ``c``."""
    return floordiv(add(a, c - 1), c) if not isinstance(a, int) else -(-a // c)
