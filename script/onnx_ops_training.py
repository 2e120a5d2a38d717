"""The optimizer steps of ONNX's ``ai.onnx.preview.training`` domain: ``Adagrad``, ``Adam`` and
``Momentum`` (standard or Nesterov). Each updates n tensors at once: its inputs are the learning
rate R, the iteration count T, then n tensors of each kind (X..., G..., and the optimizer's
state), and its outputs the n new X then the n new states of each kind; every update is
elementwise, in the dtype of X."""
from __future__ import annotations

from .onnx_convert import OnnxOpConverter, Unsupported, as_dtype, converter, dtype_of
from .relax_op_api import op

_DOMAIN = "ai.onnx.preview.training."


def _groups(inputs, kinds):
    """The n-tuples (x, g, state...) of the inputs after R and T."""
    tensors = inputs[2:]
    n = len(tensors) // kinds
    if n == 0 or n * kinds != len(tensors):
        raise Unsupported(f"{len(tensors)} tensors after R and T, not {kinds} groups of the same size")
    return list(zip(*(tensors[k * n:(k + 1) * n] for k in range(kinds))))


class _Step:
    """Arithmetic on the tensors of one update, scalars made of the tensors' dtype."""

    def __init__(self, ctx, x, r, t):
        self.ctx, self.dtype = ctx, dtype_of(x)
        self.r, self.t = ctx.emit(as_dtype(r, self.dtype)), t  # (scalars: they broadcast)
        self.t_float = ctx.emit(as_dtype(self.t, self.dtype))

    def c(self, value):
        return self.ctx.constant(value, self.dtype)

    def emit(self, expr):
        return self.ctx.emit(expr)

    def lin(self, a, x, b, y):
        """a * x + b * y (a, b numbers or scalar tensors)."""
        a, b = (self.c(v) if isinstance(v, (int, float)) else v for v in (a, b))
        return self.emit(op.add(self.emit(op.multiply(a, x)), self.emit(op.multiply(b, y))))

    def if_started(self, then, otherwise):
        """``then`` after the first iteration (T > 0), ``otherwise`` at T = 0."""
        started = self.emit(op.greater(self.t, self.ctx.constant(0, dtype_of(self.t))))
        return self.emit(op.where(started, then, otherwise))


@converter(_DOMAIN + "Adagrad")
class Adagrad(OnnxOpConverter):
    """H += G'^2, X -= R / (1 + T * decay) * G' / (sqrt(H) + epsilon), G' = G + norm * X."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        decay, eps = attrs.get("decay_factor", 0.0), attrs.get("epsilon", 1e-6)
        norm = attrs.get("norm_coefficient", 0.0)
        xs, hs = [], []
        for x, g, h in _groups(inputs, 3):
            s = _Step(ctx, x, inputs[0], inputs[1])
            rate = s.emit(op.divide(s.r, s.lin(1.0, s.c(1.0), decay, s.t_float)))
            grad = s.lin(norm, x, 1.0, g)
            h_new = s.lin(1.0, h, grad, grad)
            scale = s.emit(op.add(s.emit(op.sqrt(h_new)), s.c(eps)))
            xs.append(s.emit(op.subtract(x, s.emit(op.divide(s.emit(op.multiply(rate, grad)), scale)))))
            hs.append(h_new)
        return xs + hs


@converter(_DOMAIN + "Adam")
class Adam(OnnxOpConverter):
    """V = alpha V + (1 - alpha) G', H = beta H + (1 - beta) G'^2, and X -= R' V / (sqrt(H) +
    epsilon), with the bias-corrected rate R' = R sqrt(1 - beta^T) / (1 - alpha^T) from T > 0 on,
    then X *= 1 - norm_post."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        alpha, beta = attrs.get("alpha", 0.9), attrs.get("beta", 0.999)
        eps, norm = attrs.get("epsilon", 1e-6), attrs.get("norm_coefficient", 0.0)
        post = attrs.get("norm_coefficient_post", 0.0)
        xs, vs, hs = [], [], []
        for x, g, v, h in _groups(inputs, 4):
            s = _Step(ctx, x, inputs[0], inputs[1])
            grad = s.lin(norm, x, 1.0, g)
            v_new = s.lin(alpha, v, 1 - alpha, grad)
            h_new = s.lin(beta, h, s.emit(op.multiply(s.c(1 - beta), grad)), grad)
            power = [s.emit(op.subtract(s.c(1.0), s.emit(op.power(s.c(base), s.t_float)))) for base in (alpha, beta)]
            corrected = s.emit(op.divide(s.emit(op.multiply(s.r, s.emit(op.sqrt(power[1])))), power[0]))
            rate = s.if_started(corrected, s.r)
            scale = s.emit(op.add(s.emit(op.sqrt(h_new)), s.c(eps)))
            step = s.emit(op.multiply(rate, s.emit(op.divide(v_new, scale))))
            xs.append(s.emit(op.multiply(s.c(1 - post), s.emit(op.subtract(x, step)))))
            vs.append(v_new)
            hs.append(h_new)
        return xs + vs + hs


@converter(_DOMAIN + "Momentum")
class Momentum(OnnxOpConverter):
    """V = alpha V + beta' G' (beta' = beta from T > 0 on, 1 at T = 0), then X -= R V
    (standard) or X -= R (G' + alpha V) (nesterov)."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        alpha, beta = attrs["alpha"], attrs["beta"]
        norm, mode = attrs["norm_coefficient"], attrs["mode"]
        if mode not in ("standard", "nesterov"):
            raise Unsupported(f"the mode {mode!r}")
        xs, vs = [], []
        for x, g, v in _groups(inputs, 3):
            s = _Step(ctx, x, inputs[0], inputs[1])
            grad = s.lin(norm, x, 1.0, g)
            v_new = s.lin(alpha, v, s.if_started(s.c(beta), s.c(1.0)), grad)
            direction = v_new if mode == "standard" else s.lin(1.0, grad, alpha, v_new)
            xs.append(s.emit(op.subtract(x, s.emit(op.multiply(s.r, direction)))))
            vs.append(v_new)
        return xs + vs
