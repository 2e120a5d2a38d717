"""ONNX's recurrent layers ``RNN``, ``GRU`` and ``LSTM`` unrolled over their (static) sequence
length into Relax operators: the input projection of every step is one matmul, then each step
adds its recurrent projection and applies the gates. ``direction`` forward, reverse or
bidirectional, ``layout`` 0 or 1, the activation functions with their alpha/beta, ``clip``,
GRU's ``linear_before_reset``, LSTM's peepholes; ``sequence_lens`` shorter than the sequence
in the forward direction (a batch entry's state stops, its outputs are zeros)."""
from __future__ import annotations

import numpy as np

from ..ir import relax as rx
from .onnx_convert import OnnxOpConverter, Unsupported, converter, dims_of, dtype_of, scalar_like, value_of
from .onnx_ops_math import elu, hard_sigmoid, softsign, thresholded_relu
from .relax_op_api import op


# name -> (function of (x, alpha, beta), default alpha, default beta); None: takes no such value
_ACTIVATIONS = {
    "relu": (lambda x, a, b: op.nn.relu(x), None, None),
    "tanh": (lambda x, a, b: op.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: op.sigmoid(x), None, None),
    "affine": (lambda x, a, b: op.add(op.multiply(x, scalar_like(a, x)), scalar_like(b, x)), 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: op.nn.leakyrelu(x, alpha=a), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: thresholded_relu(x, a), 1.0, None),
    "scaledtanh": (lambda x, a, b: op.multiply(op.tanh(op.multiply(x, scalar_like(b, x))), scalar_like(a, x)),
                   1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: hard_sigmoid(x, a, b), 0.2, 0.5),
    "elu": (lambda x, a, b: elu(x, a), 1.0, None),
    "softsign": (lambda x, a, b: softsign(x), None, None),
    "softplus": (lambda x, a, b: op.nn.softplus(x), None, None),  # (log(exp(x) + 1) overflows)
}


def _activations(attrs, defaults, directions):
    """One list of functions (x -> Relax expr) per direction."""
    names = list(attrs.get("activations", defaults * directions))
    if len(names) != len(defaults) * directions:
        raise Unsupported(f"{len(names)} activations (expected {len(defaults) * directions})")
    alphas = list(attrs.get("activation_alpha", []))
    betas = list(attrs.get("activation_beta", []))
    funcs = []
    for name in names:
        if name.lower() not in _ACTIVATIONS:
            raise Unsupported(f"the activation {name!r}")
        fn, alpha, beta = _ACTIVATIONS[name.lower()]
        # (alpha and beta values are consumed in order by the functions that take them)
        a = alphas.pop(0) if alpha is not None and alphas else alpha
        b = betas.pop(0) if beta is not None and betas else beta
        funcs.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    n = len(defaults)
    return [funcs[d * n:(d + 1) * n] for d in range(directions)]


class _Recurrent(OnnxOpConverter):
    gates = 1
    defaults = ["Tanh"]
    states = 1  # (LSTM carries a cell state too)

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x, w, r, b, seq_lens, h0 = (inputs + [None] * 6)[:6]
        extra = inputs[6:]
        layout = attrs.get("layout", 0)
        if layout:
            x = ctx.emit(op.permute_dims(x, [1, 0, 2]))
        seq, batch = dims_of(x)[:2]
        if not isinstance(seq, int):
            raise Unsupported("a symbolic sequence length (the layer is unrolled)")
        direction = attrs.get("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise Unsupported(f"direction={direction!r}")
        directions = 2 if direction == "bidirectional" else 1
        hidden = dims_of(r)[-1]
        if attrs.get("hidden_size", hidden) != hidden:
            raise Unsupported(f"hidden_size={attrs['hidden_size']} differs from R's {hidden}")
        dtype = dtype_of(x)
        funcs = _activations(attrs, cls.defaults, directions)
        clip = attrs.get("clip")
        seq_lens = cls._active_lengths(seq_lens, seq)
        if seq_lens is not None and direction != "forward":
            raise Unsupported(f"sequence_lens shorter than the sequence with direction={direction}")
        initial = [h0] + [extra[0] if extra else None] * (cls.states - 1)
        peepholes = extra[1] if len(extra) > 1 else None
        ys, finals = [], [[] for _ in range(cls.states)]
        for d in range(directions):
            reverse = direction == "reverse" or d == 1
            states = []
            for s in initial:
                if s is None:
                    states.append(ctx.emit(op.zeros([batch, hidden], dtype)))
                else:
                    s = ctx.emit(op.permute_dims(s, [1, 0, 2])) if layout else s
                    states.append(cls._take(ctx, s, d))
            steps = cls._steps(ctx, x, cls._take(ctx, w, d), b if b is None else cls._take(ctx, b, d), seq, hidden)
            weights = cls._weights(ctx, cls._take(ctx, r, d), b if b is None else cls._take(ctx, b, d), hidden,
                                   peepholes if peepholes is None else cls._take(ctx, peepholes, d), attrs)
            outputs = [None] * seq
            order = range(seq - 1, -1, -1) if reverse else range(seq)
            act = [lambda e, f=f: f(op.clip(e, -clip, clip) if clip is not None else e) for f in funcs[d]]
            for t in order:
                new = cls._cell(ctx, steps[t], states, weights, act, hidden)
                if seq_lens is not None:
                    valid = ctx.emit(op.reshape(op.less(ctx.constant(np.array(t, dtype=dtype_of(seq_lens))),
                                                        seq_lens), [-1, 1]))
                    new = [ctx.emit(op.where(valid, n, s)) for n, s in zip(new, states)]
                    outputs[t] = ctx.emit(op.where(valid, new[0], op.zeros_like(new[0])))
                else:
                    outputs[t] = new[0]
                states = new
            ys.append(ctx.emit(op.stack(outputs, axis=0)))
            for i, s in enumerate(states):
                finals[i].append(s)
        y = ctx.emit(op.stack(ys, axis=1))  # (seq, directions, batch, hidden)
        finals = [ctx.emit(op.stack(f, axis=0)) for f in finals]
        if layout:
            y = op.permute_dims(y, [2, 0, 1, 3])
            finals = [op.permute_dims(f, [1, 0, 2]) for f in finals]
        return [y] + finals

    @staticmethod
    def _take(ctx, tensor, d):
        """Direction ``d``'s slice of a (directions, ...) tensor."""
        return ctx.emit(op.squeeze(op.strided_slice(tensor, axes=[0], begin=[d], end=[d + 1]), axis=[0]))

    @staticmethod
    def _active_lengths(seq_lens, seq):
        """``sequence_lens`` unless it is a constant saying every entry has the full length."""
        if seq_lens is None:
            return None
        value = value_of(seq_lens)
        return None if value is not None and np.all(value == seq) else seq_lens

    @classmethod
    def _steps(cls, ctx, x, w, b, seq, hidden):
        """X W^T (+ the input bias) of every step: a list of (batch, gates * hidden)."""
        proj = ctx.emit(op.matmul(x, op.permute_dims(w, [1, 0])))
        if b is not None:
            proj = ctx.emit(op.add(proj, cls._input_bias(ctx, b, hidden)))
        parts = ctx.emit(op.split(proj, seq, axis=0)) if seq > 1 else None
        return [ctx.emit(op.squeeze(rx.TupleGetItem(parts, t) if parts is not None else proj, axis=[0]))
                for t in range(seq)]

    @classmethod
    def _input_bias(cls, ctx, b, hidden):
        """The bias added to the input projection: Wb + Rb."""
        n = cls.gates * hidden
        return op.add(op.strided_slice(b, axes=[0], begin=[0], end=[n]),
                      op.strided_slice(b, axes=[0], begin=[n], end=[2 * n]))

    @classmethod
    def _weights(cls, ctx, r, b, hidden, peepholes, attrs):
        """What every step uses: the recurrent weights transposed, and the cell's options."""
        return {"rt": ctx.emit(op.permute_dims(r, [1, 0]))}

    @staticmethod
    def _gates(ctx, value, n):
        parts = ctx.emit(op.split(value, n, axis=-1))
        return [rx.TupleGetItem(parts, i) for i in range(n)]


@converter("RNN")
class RNN(_Recurrent):
    @classmethod
    def _cell(cls, ctx, xw, states, weights, act, hidden):
        (f,) = act
        return [ctx.emit(f(op.add(xw, op.matmul(states[0], weights["rt"]))))]


@converter("GRU")
class GRU(_Recurrent):
    gates = 3
    defaults = ["Sigmoid", "Tanh"]

    @classmethod
    def _input_bias(cls, ctx, b, hidden):
        # (Rb of the z and r gates joins the input bias; Rbh stays inside the h gate)
        rb = op.strided_slice(b, axes=[0], begin=[3 * hidden], end=[5 * hidden])
        rb = op.concat([rb, op.zeros([hidden], dtype_of(b))], axis=0)
        return op.add(op.strided_slice(b, axes=[0], begin=[0], end=[3 * hidden]), rb)

    @classmethod
    def _weights(cls, ctx, r, b, hidden, peepholes, attrs):
        rz_r = ctx.emit(op.permute_dims(op.strided_slice(r, axes=[0], begin=[0], end=[2 * hidden]), [1, 0]))
        rh = ctx.emit(op.permute_dims(op.strided_slice(r, axes=[0], begin=[2 * hidden], end=[3 * hidden]), [1, 0]))
        rbh = None if b is None else ctx.emit(op.strided_slice(b, axes=[0], begin=[5 * hidden], end=[6 * hidden]))
        return {"rzr": rz_r, "rh": rh, "rbh": rbh, "before_reset": bool(attrs.get("linear_before_reset", 0))}

    @classmethod
    def _cell(cls, ctx, xw, states, weights, act, hidden):
        f, g = act
        (h,) = states
        xz, xr, xh = cls._gates(ctx, xw, 3)
        hz, hr = cls._gates(ctx, ctx.emit(op.matmul(h, weights["rzr"])), 2)
        z = ctx.emit(f(op.add(xz, hz)))
        r = ctx.emit(f(op.add(xr, hr)))
        candidate = ctx.emit(g(op.add(xh, cls._reset(ctx, r, h, weights))))
        # H = (1 - z) * candidate + z * H_prev = candidate + z * (H_prev - candidate)
        return [ctx.emit(op.add(candidate, op.multiply(z, op.subtract(h, candidate))))]

    @staticmethod
    def _reset(ctx, r, h, weights):
        """The recurrent term of the h gate: (r * H) Rh^T + Rbh, or with linear_before_reset
        r * (H Rh^T + Rbh)."""
        before = weights["before_reset"]
        term = op.matmul(h if before else ctx.emit(op.multiply(r, h)), weights["rh"])
        term = term if weights["rbh"] is None else op.add(term, weights["rbh"])
        return op.multiply(r, ctx.emit(term)) if before else term


@converter("LSTM")
class LSTM(_Recurrent):
    gates = 4
    defaults = ["Sigmoid", "Tanh", "Tanh"]
    states = 2

    @classmethod
    def _weights(cls, ctx, r, b, hidden, peepholes, attrs):
        if attrs.get("input_forget", 0):
            raise Unsupported("input_forget=1")
        weights = super()._weights(ctx, r, b, hidden, peepholes, attrs)
        weights["p"] = None if peepholes is None else cls._gates(ctx, peepholes, 3)  # (i, o, f)
        return weights

    @classmethod
    def _cell(cls, ctx, xw, states, weights, act, hidden):
        f, g, h_act = act
        h, c = states
        i, o, fg, cand = cls._gates(ctx, ctx.emit(op.add(xw, op.matmul(h, weights["rt"]))), 4)
        p = weights["p"]
        if p is not None:
            i, fg = op.add(i, op.multiply(p[0], c)), op.add(fg, op.multiply(p[2], c))
        i, fg, cand = ctx.emit(f(i)), ctx.emit(f(fg)), ctx.emit(g(cand))
        c_new = ctx.emit(op.add(op.multiply(fg, c), op.multiply(i, cand)))
        if p is not None:
            o = op.add(o, op.multiply(p[1], c_new))
        o = ctx.emit(f(o))
        return [ctx.emit(op.multiply(o, h_act(c_new))), c_new]
