"""Matrix products: MatMul (numpy semantics), Gemm, MatMulInteger, Einsum."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from ..types import Dim
from .common import FLOATS, broadcast_shapes

MATMUL_TYPES = FLOATS + ("i32", "i64", "u32", "u64")


def _dims_agree(a: Dim, b: Dim) -> bool:
    return not (isinstance(a, int) and isinstance(b, int) and a != b)


def _matmul_shape(ctx: ShapeContext) -> Any:
    a, b = list(ctx.input_shape(0)), list(ctx.input_shape(1))
    if not a or not b:
        raise ctx.error("MatMul inputs must have rank >= 1 (scalars are not matrices)",
                        hint="reshape the scalar operand to a 1-D or 2-D tensor first, or use Mul")
    a2: list[Dim] = [1, *a] if len(a) == 1 else a
    b2: list[Dim] = [*b, 1] if len(b) == 1 else b
    if not _dims_agree(a2[-1], b2[-2]):
        raise ctx.error(
            f"inner dimensions differ: A {a} has {a2[-1]} columns, B {b} has {b2[-2]} rows",
            hint="numpy matmul rules: A[..., M, K] @ B[..., K, N]",
        )
    batch = broadcast_shapes([tuple(a2[:-2]), tuple(b2[:-2])], ctx.where)
    out = list(batch) + [a2[-2], b2[-1]]
    if len(a) == 1:
        out.pop(-2)
    if len(b) == 1:
        out.pop(-1)
    dt = ctx.input_dtype(0)
    return tuple(out), dt


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype in (np.float16,) or a.dtype.name == "bfloat16":
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    return np.matmul(a, b)


(
    define_op("MatMul")
    .doc("matrix product with numpy matmul semantics (1-D operands, batch broadcasting)")
    .input("A", "T").input("B", "T").output("Y", "T")
    .type_param("T", MATMUL_TYPES)
    .shape_fn(_matmul_shape)
    .compute(_matmul)
)


# -- Gemm ------------------------------------------------------------------------------
def _gemm_shape(ctx: ShapeContext) -> Any:
    a, b = ctx.input_shape(0), ctx.input_shape(1)
    if len(a) != 2 or len(b) != 2:
        raise ctx.error(f"A {list(a)} and B {list(b)} must both be 2-D",
                        hint="use MatMul for batched or 1-D products")
    m, k = (a[1], a[0]) if ctx.attr("transA") else (a[0], a[1])
    k2, n = (b[1], b[0]) if ctx.attr("transB") else (b[0], b[1])
    if not _dims_agree(k, k2):
        raise ctx.error(
            f"inner dimensions differ: op(A) is [{m}, {k}], op(B) is [{k2}, {n}]",
            attr="transB", hint="check transA/transB against the operands' layouts",
        )
    if ctx.has_input(2):
        c = tuple(ctx.input_shape(2))
        if broadcast_shapes([c, (m, n)], ctx.where) != (m, n):
            raise ctx.error(f"C {list(c)} does not broadcast to the output [{m}, {n}]",
                            hint="C must broadcast to [M, N]: check the bias's shape and transA/transB")
    return (m, n), ctx.input_dtype(0)


def _gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *, alpha: float,
          beta: float, transA: int, transB: int) -> np.ndarray:
    dt = a.dtype
    wdt = np.float32 if dt in (np.float16,) or dt.name == "bfloat16" else dt
    a = a.astype(wdt, copy=False)
    b = b.astype(wdt, copy=False)
    y = (a.T if transA else a) @ (b.T if transB else b)
    if alpha != 1.0:
        y = y * np.asarray(alpha, wdt)
    if c is not None and beta != 0.0:
        y = y + np.asarray(beta, wdt) * c.astype(wdt, copy=False)
    return y.astype(dt, copy=False)


(
    define_op("Gemm")
    .doc("alpha * op(A) @ op(B) + beta * C, op = optional transpose; C broadcasts to [M, N]")
    .input("A", "T").input("B", "T").input("C", "T", optional=True).output("Y", "T")
    .param("alpha", "float", default=1.0)
    .param("beta", "float", default=1.0)
    .param("transA", "int", default=0, allowed=(0, 1))
    .param("transB", "int", default=0, allowed=(0, 1))
    .type_param("T", MATMUL_TYPES)
    .shape_fn(_gemm_shape)
    .compute(_gemm)
)


# -- MatMulInteger ---------------------------------------------------------------------------
def _mmi_shape(ctx: ShapeContext) -> Any:
    shape, _ = _matmul_shape(ctx)
    a, b = ctx.input_shape(0), ctx.input_shape(1)
    for i, name, rows in ((2, "a_zero_point", a[-2] if len(a) > 1 else 1),
                          (3, "b_zero_point", b[-1] if len(b) > 1 else 1)):
        if ctx.has_input(i):
            zs = tuple(ctx.input_shape(i))
            if ctx.input_dtype(i) != ctx.input_dtype(i - 2):
                raise ctx.error(f"'{name}' is {ctx.input_dtype(i)}, its operand is "
                                f"{ctx.input_dtype(i - 2)}; they must agree",
                                hint="give the zero point the dtype of the tensor it belongs to")
            if zs not in ((), (1,), (rows,)):
                raise ctx.error(f"'{name}' has shape {list(zs)}; give a scalar or one per "
                                f"{'row of A' if i == 2 else 'column of B'} ({rows})",
                                hint="give a scalar zero point, or one per row of A (a_zero_point) or "
                                     "column of B (b_zero_point)")
    return shape, "i32"


def _matmul_integer(a: np.ndarray, b: np.ndarray, a_zero_point: np.ndarray | None = None,
                    b_zero_point: np.ndarray | None = None) -> np.ndarray:
    """Exact: (a - a_zp) @ (b - b_zp) in the narrowest type whose sums of products cannot round
    (float32 or float64 BLAS, int64 past that; see
    :func:`~opbridge.ir.ops.quant.exact_sum_dtype`), then i32."""
    from .quant import exact_sum_dtype, offset_bound

    bi = b.astype(np.int64)
    if b_zero_point is not None:
        bi -= b_zero_point.astype(np.int64).reshape(-1 if b_zero_point.size > 1 else ())
    # sum |b - b_zp| down each column (a 1-d b is one column)
    col_sums = np.abs(bi).sum(axis=-2 if bi.ndim > 1 else 0)
    dt = exact_sum_dtype(offset_bound(a.dtype, a_zero_point), col_sums)
    af = a.astype(dt)
    if a_zero_point is not None:
        za = a_zero_point.astype(dt)
        af -= za.reshape(-1, 1) if za.size > 1 else za.reshape(())
    # every entry is an exact integer, so the cast to i32 is exact
    return np.matmul(af, bi.astype(dt)).astype(np.int32)


(
    define_op("MatMulInteger")
    .doc("integer matmul (numpy semantics) of (A - a_zero_point) and (B - b_zero_point) into i32; "
         "zero points are scalars or per row of A / per column of B")
    .input("A", "T1").input("B", "T2").input("a_zero_point", "T1", optional=True)
    .input("b_zero_point", "T2", optional=True).output("Y", "i32")
    .type_param("T1", ("i8", "u8")).type_param("T2", ("i8", "u8"))
    .shape_fn(_mmi_shape)
    .compute(_matmul_integer)
)


# -- Einsum ----------------------------------------------------------------------------------
def parse_einsum(equation: str, shapes: list[tuple[Dim, ...]], err: Any) -> tuple[Dim, ...]:
    """The output shape of an einsum ``equation`` over operands of ``shapes``.

    ``err(message)`` returns the exception to raise (the caller's node context).
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise err(f"'{equation}' has {len(terms)} operands, the node has {len(shapes)} inputs")
    sizes: dict[str, Dim] = {}
    ell: list[tuple[Dim, ...]] = []
    counts: dict[str, int] = {}
    for term, shape in zip(terms, shapes):
        if term.count("...") > 1 or not all(ch.isalpha() for ch in term.replace("...", "")):
            raise err(f"'{equation}': operand term '{term}' is malformed")
        letters = term.replace("...", "")
        n_ell = len(shape) - len(letters)
        if ("..." in term and n_ell < 0) or ("..." not in term and n_ell != 0):
            raise err(f"'{equation}': term '{term}' does not fit an operand of rank {len(shape)}")
        if "..." in term:
            pos = term.index("...")
            ell.append(tuple(shape[pos:pos + n_ell]))
            dims = list(shape[:pos]) + list(shape[pos + n_ell:])
        else:
            dims = list(shape)
        for ch, d in zip(letters, dims):
            counts[ch] = counts.get(ch, 0) + 1
            old = sizes.get(ch)
            if old is None or old == 1:
                sizes[ch] = d
            elif d != 1 and not (_dims_agree(old, d)):
                raise err(f"'{equation}': label '{ch}' is {old} in one operand and {d} in another")
    ell_shape = broadcast_shapes(ell, "einsum") if ell else ()
    if arrow:
        if rhs.count("...") > 1 or not all(ch.isalpha() for ch in rhs.replace("...", "")):
            raise err(f"'{equation}': output term '{rhs}' is malformed")
        out: list[Dim] = []
        for part_i, part in enumerate(rhs.split("...")):
            if part_i:
                out.extend(ell_shape)
            for ch in part:
                if ch not in sizes:
                    raise err(f"'{equation}': output label '{ch}' is in no operand")
                out.append(sizes[ch])
        return tuple(out)
    return tuple(ell_shape) + tuple(sizes[ch] for ch in sorted(c for c, n in counts.items() if n == 1))


def _einsum_shape(ctx: ShapeContext) -> Any:
    shapes = [tuple(ctx.input_shape(i)) for i in range(ctx.num_inputs)]
    dts = {ctx.input_dtype(i) for i in range(ctx.num_inputs)}
    if len(dts) > 1:
        raise ctx.error(f"operands have different dtypes {sorted(dts)}", hint="insert a Cast")
    shape = parse_einsum(ctx.attr("equation"), shapes,
                         lambda m: ctx.error(m, attr="equation",
                                             hint="correct the equation in the model (numpy.einsum's "
                                                  "notation: one term per input, e.g. 'bij,bjk->bik')"))
    return shape, ctx.input_dtype(0)


def _einsum(*xs: np.ndarray, equation: str) -> np.ndarray:
    dt = xs[0].dtype
    if dt == np.float16 or dt.name == "bfloat16":
        return np.einsum(equation, *[x.astype(np.float32) for x in xs], optimize=True).astype(dt)
    return np.asarray(np.einsum(equation, *xs, optimize=len(xs) > 1))


(
    define_op("Einsum")
    .doc("Einstein summation (numpy/ONNX equation syntax, '...' broadcasting, implicit output)")
    .input("Inputs", "T", variadic=True).output("Output", "T")
    .param("equation", "str")
    .type_param("T", FLOATS + ("i32", "i64", "u32", "u64"))
    .shape_fn(_einsum_shape)
    .compute(_einsum)
)
