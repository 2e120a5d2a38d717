"""``Det``: the determinant of each square matrix of the last two axes, by Gaussian elimination
with partial pivoting (as LAPACK's LU, which numpy's reference uses), unrolled over the static
matrix size into batched Relax operators."""
from __future__ import annotations

from .onnx_convert import OnnxOpConverter, Unsupported, converter, dims_of, scalar_like
from .relax_op_api import op

_LARGEST = 32  # (unrolled: about a dozen operators per row)


@converter("Det")
class Det(OnnxOpConverter):
    """Each step takes the row with the largest first element as the pivot row (a swap with the
    first row flips the sign), multiplies the determinant by the pivot and eliminates the first
    column from the other rows, leaving a matrix one smaller. A zero pivot (a singular matrix)
    gives 0: the division uses 1 in its place."""

    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        m = inputs[0]
        dims = dims_of(m)
        n = dims[-1] if len(dims) >= 2 else None
        if not isinstance(n, int) or dims[-2] != n or n > _LARGEST:
            raise Unsupported(f"matrices of shape {dims[-2:]} (square, static, at most {_LARGEST} rows)")
        batch = dims[:-2]
        det = sign = None
        for size in range(n, 0, -1):
            first = ctx.emit(op.strided_slice(m, [len(dims) - 1], [0], [1]))  # (..., size, 1)
            row = ctx.emit(op.argmax(ctx.emit(op.abs(first)), len(dims) - 2, True))  # (..., 1, 1)
            rows = ctx.emit(op.broadcast_to(row, batch + [1, size]))
            pivot_row = ctx.emit(op.gather_elements(m, rows, len(dims) - 2))
            pivot = ctx.emit(op.strided_slice(pivot_row, [len(dims) - 1], [0], [1]))  # (..., 1, 1)
            swapped = ctx.emit(op.not_equal(row, ctx.constant(0, "int64")))
            flip = ctx.emit(op.where(swapped, scalar_like(-1, m), scalar_like(1, m)))
            det = pivot if det is None else ctx.emit(op.multiply(det, pivot))
            sign = flip if sign is None else ctx.emit(op.multiply(sign, flip))
            if size == 1:
                break
            # the other rows: row 0 takes the pivot row's place, then leaves
            places = ctx.constant(list(range(size)), "int64")
            here = ctx.emit(op.equal(ctx.emit(op.reshape(places, [size, 1])), row))
            top = ctx.emit(op.strided_slice(m, [len(dims) - 2], [0], [1]))
            rest = ctx.emit(op.where(here, top, m))
            rest = ctx.emit(op.strided_slice(rest, [len(dims) - 2, len(dims) - 1], [1, 0], [size, size]))
            safe = ctx.emit(op.where(ctx.emit(op.equal(pivot, scalar_like(0, m))), scalar_like(1, m), pivot))
            factor = ctx.emit(op.divide(ctx.emit(op.strided_slice(rest, [len(dims) - 1], [0], [1])), safe))
            tail = ctx.emit(op.strided_slice(pivot_row, [len(dims) - 1], [1], [size]))
            m = ctx.emit(op.subtract(ctx.emit(op.strided_slice(rest, [len(dims) - 1], [1], [size])),
                                     ctx.emit(op.multiply(factor, tail))))
        return op.squeeze(ctx.emit(op.multiply(det, sign)), [len(dims) - 2, len(dims) - 1])
