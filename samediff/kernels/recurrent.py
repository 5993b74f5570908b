"""Compiled LSTM time loops: one Numba call runs a whole direction, forward or back.

``ops/recurrent.py`` runs a layer as numpy calls per step — a GEMM with ``R`` plus ~15 array
operations of the gate math, ~25-35 us of call overhead per step whatever the size. Here one
compiled function loops over the steps: per step one single-threaded GEMM on the private BLAS
(``kernels.blas.gemm``: ``h @ R`` accumulated onto the step's input projection) and one fused
pass over ``[batch, hidden]`` for the gates, cell and output. The backward loop is the same
shape: a fused pass giving the step's gate gradients, then one GEMM with ``R^T`` for the
gradient of the previous hidden state. The weight gradients (``x^T dZ``, ``h^T dZ``) are one
large GEMM each over all steps, on the matmul op's routes (``ops/recurrent.py``).

Examples never meet in a recurrence, so ``forward``/``backward`` run a big enough batch as two
halves of examples, one per thread (``workers``), each through every step: one hand-off per
direction, not one per step. W8's layer (T 32, batch 32, hidden 128): forward loop 2.2-3.0
-> 1.8 ms, backward 2.9-3.1 -> 2.6 ms (one half alone: 1.1-1.5 / 1.7-2.0 ms; per-step GEMMs
of 16 rows run at 25-45 GFLOP/s, and two at once share the caches).

One example cannot be split by examples. Its forward (the latency case: T 512, hidden 128)
runs as two halves of the hidden units instead (``lstm_forward_units``), one per thread, in
step: each thread's product is with its half of R's columns (128 KB, from its own core's
cache: the product is bound by cache bandwidth, 1.2 us for a half against 2.4-2.8 us whole),
then the gate math of its units, and each step waits for the other half of ``h_t``. The loop
took 0.70-0.76x the time of one thread; with another process busy on one core 1.13x (a
helper preempted in the middle of a half it claimed holds the caller up), still 0.43x
PyTorch's time there. The per-step hand-off costs ~0.5 us of the ~2.4 us step (a flag, then
the other half of ``h_t``, each a cache line away on another core).

float32 only, with LSTM's default activations (sigmoid gates, tanh cell and output), computed
with ``fastmath``'s vectorizable ``sigmoid_f32``/``tanh_f32`` (a few float32 ulps of
the exact values; a loop of libm calls, as float64 would need, ran 4x slower than numpy's
route): everything else takes the numpy route. Peepholes are always applied (zeros: none),
the clip always (inf: none), so the gate loop has no branch and vectorizes.

The tape the backward loop reads (``hs``, ``cs`` — the states entering each step, and the
one after the last — ``pre``/``post`` the gates before and after their activations, ``raw``
the unclipped cell, ``oc`` the output activation of the cell) is filled by the forward loop
with ``keep=True``; without it (inference) only one step's scratch is kept.
"""
from __future__ import annotations

import numba
import numpy as np

from . import compiling, forksafe, split, workers
from .blas import available, gemm, gemv
from .fastmath import KERNEL_FASTMATH, sigmoid_f32, tanh_f32
from .jit_options import PYTHON_CALLERS, compiled_only
from .spin import announce, claim, load, publish, relax, spin_until

#: the activations (gate, cell, output) the loops compute: LSTM's default, which nearly every
#: model uses; other activations run the numpy route
ACTIVATIONS = ("sigmoid", "tanh", "tanh")
#: float32 constants: a Python int or float next to a float32 makes the loop float64 (Numba's
#: typing), which neither vectorizes nor calls the float32 functions
_ONE, _ZERO = np.float32(1.0), np.float32(0.0)


_FAST = set(KERNEL_FASTMATH)


# The transcendental loops are functions of their own, called (not inlined) by the time loops:
# inlining each call site of the fastmath functions made the forward loop's cold compile 10 s.

@compiled_only(cache=True, nogil=True, fastmath=_FAST)
def _sigmoid_gate(z, p, c, out):
    """``out = sigmoid(z + p * c)`` (a gate with its peephole)."""
    for m in range(out.shape[0]):
        out[m] = sigmoid_f32(z[m] + p[m] * c[m])


@compiled_only(cache=True, nogil=True)
def _copy(src, dst):
    """``dst[:] = src`` for 1-D arrays (an array assignment inside the time loops cost seconds
    of their compile: Numba's general broadcasting setitem)."""
    for m in range(dst.shape[0]):
        dst[m] = src[m]


@compiled_only(cache=True, nogil=True)
def _fill(dst, value):
    for m in range(dst.shape[0]):
        dst[m] = value


@compiled_only(cache=True, nogil=True, fastmath=_FAST)
def _tanh(x, out):
    for m in range(out.shape[0]):
        out[m] = tanh_f32(x[m])


@compiled_only(cache=True, nogil=True, fastmath=_FAST)
def _cell(zi, zf, zg, zo, pi, pf, po, cp, cn, hn, y, gi, gf, gg, go_, r, out, bound):
    """One step's gate math on runs of equal length: the gates ``gi, gf, gg, go_`` from the
    pre-activations ``z*`` (and peepholes ``p*`` on the cell ``cp`` entering the step), the
    unclipped cell ``r``, the cell ``cn`` (clipped to ``bound``), ``out`` = tanh(cell) and the
    output ``hn`` (copied to ``y``)."""
    _sigmoid_gate(zi, pi, cp, gi)
    _sigmoid_gate(zf, pf, cp, gf)
    _tanh(zg, gg)
    for m in range(cn.shape[0]):
        r[m] = gf[m] * cp[m] + gi[m] * gg[m]
    for m in range(cn.shape[0]):
        cn[m] = min(max(r[m], -bound), bound)
    _sigmoid_gate(zo, po, cn, go_)
    _tanh(cn, out)
    for m in range(cn.shape[0]):
        hn[m] = go_[m] * out[m]
    _copy(hn, y)


@numba.njit(cache=True, nogil=True, fastmath=_FAST, **PYTHON_CALLERS)
def lstm_forward(zx, R, peep, lengths, clip, hs, cs, ys, z, post, raw, oc, keep, b0, b1, go):
    """Run the steps of ``zx [4, T, B, H]`` (gate-major: gates i, f, g, o; the input
    projection and bias) from ``hs[0]``, ``cs[0]`` (``[T + 1, B, H]``): fills ``hs[1:]``,
    ``cs[1:]``, ``ys [T, B, H]`` (zeros past an example's length) and, with ``keep``, the
    tape (``post [T, 4, B, H]`` the gates, ``raw`` the unclipped cell, ``oc`` = tanh(cell),
    ``[T, B, H]``; without it their row 0 is scratch). ``z [4, B, H]`` is scratch. ``peep
    [3, B * H]``: the i, f, o peepholes repeated per example (zeros: none); ``lengths``:
    ``[B]`` or ``[0]`` (every example runs every step); ``clip``: the cell clip (inf: none).
    Only the examples ``[b0, b1)`` are run and written (``go``: ``workers.both``'s token):
    examples never meet, so two threads run the two halves of a batch through every step.

    Gate-major, so each gate is one contiguous ``B * H`` run, and the math is a few simple
    loops over them: one loop over a row's gates touching a dozen arrays did not vectorize
    (LLVM gives up on that many runtime alias checks: 26 against 4.7 ns per element)."""
    announce(go)
    steps, batch, hidden = hs.shape[0] - 1, hs.shape[1], hs.shape[2]
    size, lo, hi = batch * hidden, b0 * hidden, b1 * hidden
    bound = np.float32(clip)
    # this half's run of every [B * H] array: a C-contiguous slice, looped from 0 (loops over
    # range(lo, hi) of the whole runs took 1.2-1.3x as long)
    pi, pf, po = peep[0, lo:hi], peep[1, lo:hi], peep[2, lo:hi]
    zi, zf, zg, zo = (z[0].reshape(size)[lo:hi], z[1].reshape(size)[lo:hi],
                      z[2].reshape(size)[lo:hi], z[3].reshape(size)[lo:hi])
    for t in range(steps):
        k = t if keep else 0
        for q in range(4):
            _copy(zx[q, t].reshape(size)[lo:hi], z[q].reshape(size)[lo:hi])
        if batch == 1:  # the four gates' rows lie end to end: one product with all of R
            gemv(R.T, hs[t, 0], z.reshape(4 * hidden), 1.0)
        else:
            for q in range(4):
                gemm(hs[t, b0:b1], R[:, q * hidden:(q + 1) * hidden], z[q, b0:b1], 1.0)
        cp, cn = cs[t].reshape(size)[lo:hi], cs[t + 1].reshape(size)[lo:hi]
        hn, y = hs[t + 1].reshape(size)[lo:hi], ys[t].reshape(size)[lo:hi]
        gi, gf = post[k, 0].reshape(size)[lo:hi], post[k, 1].reshape(size)[lo:hi]
        gg, go_ = post[k, 2].reshape(size)[lo:hi], post[k, 3].reshape(size)[lo:hi]
        r, out = raw[k].reshape(size)[lo:hi], oc[k].reshape(size)[lo:hi]
        _cell(zi, zf, zg, zo, pi, pf, po, cp, cn, hn, y, gi, gf, gg, go_, r, out, bound)
        for n in range(b0, min(b1, lengths.shape[0])):
            if t >= lengths[n]:  # finished: the state carries over, y is 0
                _copy(hs[t, n], hs[t + 1, n])
                _copy(cs[t, n], cs[t + 1, n])
                _fill(ys[t, n], _ZERO)


@numba.njit(cache=True, nogil=True, fastmath=_FAST, **PYTHON_CALLERS)
def lstm_backward(dys, dh, dc, R, RT, peep, lengths, clip, hs, cs, post, raw, oc, dz, dpeep,
                  dh_buf, saved, b0, b1, go):
    """Back through the steps: ``dys [T, B, H]`` the gradient of every step's output, ``dh``,
    ``dc`` ``[B, H]`` that of the last state (updated in place into the gradient of the
    initial state). Fills ``dz [4, T, B, H]`` (gate-major: the gradient of each step's gate
    pre-activations, which is that of ``zx``) and adds the peepholes' gradient, per example,
    into ``dpeep [3, B * H]``. ``dh_buf [B, H]`` and ``saved [2, B, H]`` are scratch. As the
    forward: only the examples ``[b0, b1)``. ``RT [4, H, H]``: each gate's block of ``R``
    transposed, contiguous (``gate_blocks_transposed``): OpenBLAS multiplied by the
    transposed view of a block in 1.8x the time (W8's half: 33 against 18.6 us a step)."""
    announce(go)
    steps, batch, hidden = dys.shape[0], dys.shape[1], dys.shape[2]
    size, lo, hi = batch * hidden, b0 * hidden, b1 * hidden
    n = hi - lo
    bound = np.float32(clip)
    pi, pf, po = peep[0, lo:hi], peep[1, lo:hi], peep[2, lo:hi]
    dpi, dpf, dpo = dpeep[0, lo:hi], dpeep[1, lo:hi], dpeep[2, lo:hi]
    row = np.empty(4 * hidden if batch == 1 else 0, dz.dtype)
    gh, gc = dh.reshape(size)[lo:hi], dc.reshape(size)[lo:hi]
    for t in range(steps - 1, -1, -1):
        for e in range(b0, min(b1, lengths.shape[0])):
            if t >= lengths[e]:  # this example skipped the step: keep its gradients
                _copy(dh[e], saved[0, e])
                _copy(dc[e], saved[1, e])
        gi, gf = post[t, 0].reshape(size)[lo:hi], post[t, 1].reshape(size)[lo:hi]
        gg, go_ = post[t, 2].reshape(size)[lo:hi], post[t, 3].reshape(size)[lo:hi]
        di, df = dz[0, t].reshape(size)[lo:hi], dz[1, t].reshape(size)[lo:hi]
        dg, do = dz[2, t].reshape(size)[lo:hi], dz[3, t].reshape(size)[lo:hi]
        cp, cn = cs[t].reshape(size)[lo:hi], cs[t + 1].reshape(size)[lo:hi]
        r, out, dy = (raw[t].reshape(size)[lo:hi], oc[t].reshape(size)[lo:hi],
                      dys[t].reshape(size)[lo:hi])
        for m in range(n):
            gh[m] += dy[m]
        for m in range(n):
            do[m] = gh[m] * out[m] * go_[m] * (_ONE - go_[m])
        for m in range(n):
            gc[m] += gh[m] * go_[m] * (_ONE - out[m] * out[m]) + do[m] * po[m]
        for m in range(n):
            gc[m] = gc[m] if abs(r[m]) <= bound else _ZERO
        for m in range(n):
            di[m] = gc[m] * gg[m] * gi[m] * (_ONE - gi[m])
        for m in range(n):
            df[m] = gc[m] * cp[m] * gf[m] * (_ONE - gf[m])
        for m in range(n):
            dg[m] = gc[m] * gi[m] * (_ONE - gg[m] * gg[m])
        for m in range(n):
            gc[m] = gc[m] * gf[m] + di[m] * pi[m] + df[m] * pf[m]
        for e in range(b0, min(b1, lengths.shape[0])):
            if t >= lengths[e]:
                for q in range(4):
                    _fill(dz[q, t, e], _ZERO)
                _copy(saved[1, e], dc[e])
        for m in range(n):
            dpi[m] += di[m] * cp[m]
        for m in range(n):
            dpf[m] += df[m] * cp[m]
        for m in range(n):
            dpo[m] += do[m] * cn[m]
        if batch == 1:  # the step's four gate gradients end to end, then one product
            for q in range(4):
                _copy(dz[q, t, 0], row[q * hidden:(q + 1) * hidden])
            gemv(R, row, dh_buf[0], 0.0)
        else:
            for q in range(4):
                gemm(dz[q, t, b0:b1], RT[q], dh_buf[b0:b1], 1.0 if q else 0.0)
        _copy(dh_buf.reshape(size)[lo:hi], gh)
        for e in range(b0, min(b1, lengths.shape[0])):
            if t >= lengths[e]:
                _copy(saved[0, e], dh[e])


@compiled_only(cache=True, nogil=True, fastmath=_FAST)
def _unit_step(zx, Rh, peep, lengths, bound, hs, cs, ys, zh, post, raw, oc, k, t, u0, u1):
    """Step ``t`` of the hidden units ``[u0, u1)`` of a one-example layer: ``zh [4 * n]``
    (scratch, n = u1 - u0) gets the step's projection of these units' four gates plus
    ``h_t @ Rh`` (``Rh [H, 4 * n]``: these units' columns of R, gate after gate), then the gate
    math writes these units of ``hs[t + 1]``, ``cs[t + 1]``, ``ys[t]`` and of the tape row
    ``k``. Units never meet within a step: only ``h_t``, whole, is read."""
    n = u1 - u0
    for q in range(4):
        _copy(zx[q, t, 0, u0:u1], zh[q * n:(q + 1) * n])
    gemv(Rh.T, hs[t, 0], zh, 1.0)
    zi, zf, zg, zo = zh[:n], zh[n:2 * n], zh[2 * n:3 * n], zh[3 * n:4 * n]
    pi, pf, po = peep[0, u0:u1], peep[1, u0:u1], peep[2, u0:u1]
    cp, cn = cs[t, 0, u0:u1], cs[t + 1, 0, u0:u1]
    hn, y = hs[t + 1, 0, u0:u1], ys[t, 0, u0:u1]
    gi, gf, gg, go_ = (post[k, 0, 0, u0:u1], post[k, 1, 0, u0:u1], post[k, 2, 0, u0:u1],
                       post[k, 3, 0, u0:u1])
    r, out = raw[k, 0, u0:u1], oc[k, 0, u0:u1]
    _cell(zi, zf, zg, zo, pi, pf, po, cp, cn, hn, y, gi, gf, gg, go_, r, out, bound)
    if lengths.shape[0] and t >= lengths[0]:  # finished: the state carries over, y is 0
        _copy(hs[t, 0, u0:u1], hn)
        _copy(cs[t, 0, u0:u1], cn)
        _fill(y, _ZERO)


#: slots of a unit-split forward's flag array, a cache line apart: the steps whose first half
#: is done (t + 1 after step t's); the claim word of the second halves (ticket t + 1); the
#: steps whose second half is done; every step done (the caller's loop has returned)
_FIRST_DONE, _SECOND_CLAIM, _SECOND_DONE, _END = 0, 8, 16, 24


@numba.njit(cache=True, nogil=True, fastmath=_FAST, **PYTHON_CALLERS)
def lstm_forward_units(zx, Rp, peep, lengths, clip, hs, cs, ys, zp, post, raw, oc, keep,
                       flags, role, spins, go):
    """A one-example layer's steps with its hidden units in two halves (``Rp [2, H, 4 * H/2]``:
    each half's columns of R; ``zp [2, >= 4 * H/2]`` their scratch), two threads in step.

    ``role`` 0 (the caller) runs the first half of every step: it waits for the second half
    of the step before (``h_t`` whole), runs its half, publishes it, then claims the second
    half of the same step (``spin.claim``, ticket t + 1) and runs it when the helper has not.
    ``role`` 1 (the helper) claims the second half of step s as soon as ``h_s`` is whole (the
    first half of step s - 1 published, the second its own), until the caller's loop ends or
    nothing shows for ``spins`` polls. Each thread waits for one flag of the other per step,
    not for a round trip. A half is computed by the same code whoever runs it: the same bits
    with or without the helper."""
    announce(go)
    steps, hidden = hs.shape[0] - 1, hs.shape[2]
    half = hidden // 2
    bound = np.float32(clip)
    if role == 0:
        for t in range(steps):
            k = t if keep else 0
            while load(flags, _SECOND_DONE) < t:  # h_t's second half (ours or the helper's)
                spin_until(flags, _SECOND_DONE, t, 1 << 10, 256)
            _unit_step(zx, Rp[0], peep, lengths, bound, hs, cs, ys, zp[0, :4 * half], post,
                       raw, oc, k, t, 0, half)
            publish(flags, _FIRST_DONE, t + 1)
            if claim(flags, _SECOND_CLAIM, t + 1):
                _unit_step(zx, Rp[1], peep, lengths, bound, hs, cs, ys, zp[1, :4 * half],
                           post, raw, oc, k, t, half, hidden)
                publish(flags, _SECOND_DONE, t + 1)
        while load(flags, _SECOND_DONE) < steps:
            spin_until(flags, _SECOND_DONE, steps, 1 << 10, 256)
        publish(flags, _END, 1)
        return
    idle = 0
    while idle < spins and load(flags, _END) == 0:
        s = load(flags, _SECOND_DONE)
        if (s < steps and load(flags, _FIRST_DONE) >= s and load(flags, _SECOND_CLAIM) <= s
                and claim(flags, _SECOND_CLAIM, s + 1)):
            _unit_step(zx, Rp[1], peep, lengths, bound, hs, cs, ys, zp[1, :4 * half], post,
                       raw, oc, s if keep else 0, s, half, hidden)
            publish(flags, _SECOND_DONE, s + 1)
            idle = 0
        else:
            idle += 1
            relax(idle, 256)  # (as the idle helper of ``workers`` yields its core now and then)


#: multiply-adds of a direction's recurrent GEMMs (steps x batch x hidden x 4 hidden) from
#: which its examples run in two halves, one per thread (``workers.halves``: decided by size
#: alone, so the same bits whether or not the helper takes its half). W8's layer (T 32, batch
#: 32, hidden 128: 2^26) ran its loops in 0.5-0.6x the time of one thread.
SPLIT_MIN_WORK = 1 << 20


def _halves(steps: int, batch: int, hidden: int) -> list:
    return workers.halves(batch, steps * batch * hidden * 4 * hidden, SPLIT_MIN_WORK)


#: the least hidden size a one-example layer runs in two halves of units: at 128 (T 512) its
#: loop took 0.70x the time of one thread, at 256 0.56x; at 64 1.1x (the halves' per-step
#: hand-off costs more than half of the step)
UNIT_SPLIT_MIN_HIDDEN = 128


#: the fewest steps a one-example layer runs by halves of units: the halves' copy of R
#: (``unit_halves``, once per call) reads as much memory as one step's products
UNIT_SPLIT_MIN_STEPS = 16


def by_units(steps: int, batch: int, hidden: int) -> bool:
    """Does a direction run as two halves of its hidden units, one per thread, in step
    (``lstm_forward_units``)? One example (nothing to split by examples), an even hidden
    size of at least ``UNIT_SPLIT_MIN_HIDDEN``, enough steps and work: decided by sizes
    alone."""
    return (batch == 1 and hidden % 2 == 0 and hidden >= UNIT_SPLIT_MIN_HIDDEN
            and steps >= UNIT_SPLIT_MIN_STEPS and steps * hidden * 4 * hidden >= SPLIT_MIN_WORK)


def unit_halves(R: np.ndarray) -> np.ndarray:
    """``R [H, 4H]`` as ``[2, H, 4 * H/2]``: each half of the hidden units' columns, gate
    after gate, contiguous (one matrix-vector product per half and step)."""
    hidden = R.shape[0]
    half = hidden // 2
    return np.ascontiguousarray(
        R.reshape(hidden, 4, 2, half).transpose(2, 0, 1, 3)).reshape(2, hidden, 4 * half)


@forksafe.guarded  # GEMMs and the helper: a fork waits for them
def forward(zx, R, peep, lengths, clip, hs, cs, ys, z, post, raw, oc, keep) -> None:
    """``lstm_forward`` over the whole batch, its two halves at once when it is big enough;
    one example by halves of its units (``by_units``)."""
    steps, batch, hidden = zx.shape[1], hs.shape[1], hs.shape[2]
    if by_units(steps, batch, hidden):
        _forward_units(zx, R, peep, lengths, clip, hs, cs, ys, post, raw, oc, keep)
        return
    parts = _halves(steps, batch, hidden)
    split.on_halves(parts, lambda p, go: lstm_forward(zx, R, peep, lengths, clip, hs, cs, ys, z,
                                                      post, raw, oc, keep, p.start, p.stop, go))


def _forward_units(zx, R, peep, lengths, clip, hs, cs, ys, post, raw, oc, keep) -> None:
    """``lstm_forward_units``: the caller's role here, the helper's on the helper thread
    (``workers.on_halves``; or here, after the caller's, which then finds every step done)."""
    Rp = unit_halves(R)
    half = R.shape[0] // 2
    zp = np.empty((2, 4 * half + 16), np.float32)  # 64 bytes apart: no shared cache line
    flags = np.zeros(32, np.int64)
    spins = workers.poll_count()

    def role(part: int, go: tuple) -> None:
        try:
            lstm_forward_units(zx, Rp, peep, lengths, clip, hs, cs, ys, zp, post, raw, oc, keep,
                               flags, part, spins, go)
        finally:  # the helper's role ends when this is set, whatever happened here
            if part == 0:
                publish(flags, _END, 1)
    split.on_halves([0, 1], role)


def gate_blocks_transposed(R: np.ndarray) -> np.ndarray:
    """``R [H, 4H]`` as ``[4, H, H]``: gate q's block ``R[:, qH:(q+1)H]`` transposed, each
    contiguous (what ``lstm_backward`` multiplies the gate gradients by)."""
    hidden = R.shape[0]
    return np.ascontiguousarray(R.reshape(hidden, 4, hidden).transpose(1, 2, 0))


@forksafe.guarded
def backward(dys, dh, dc, R, peep, lengths, clip, hs, cs, post, raw, oc, dz, dpeep, dh_buf,
             saved) -> None:
    """``lstm_backward`` over the whole batch, split as ``forward`` splits it."""
    steps, batch, hidden = dys.shape
    RT = gate_blocks_transposed(R) if batch > 1 else np.empty((4, 0, 0), R.dtype)
    parts = _halves(steps, batch, hidden)
    split.on_halves(parts, lambda p, go: lstm_backward(
        dys, dh, dc, R, RT, peep, lengths, clip, hs, cs, post, raw, oc, dz, dpeep, dh_buf,
        saved, p.start, p.stop, go))


def _warm(key: tuple) -> None:
    """Compile (or load) both loops on tiny float32 arguments (nothing without the private
    BLAS: ``available()`` also loads it, which the loops' compile needs)."""
    _warm_forward(key)
    _warm_backward(key)


def _warm_forward(key: tuple) -> None:
    """``_warm``'s forward loop alone (a compile helper may take the two at once)."""
    if available():
        z, dt = np.zeros, np.float32
        lstm_forward(z((4, 1, 1, 1), dt), np.ones((1, 4), dt), z((3, 1), dt), z(1, np.int64),
                     np.inf, z((2, 1, 1), dt), z((2, 1, 1), dt), z((1, 1, 1), dt),
                     z((4, 1, 1), dt), z((1, 4, 1, 1), dt), z((1, 1, 1), dt),
                     z((1, 1, 1), dt), True, 0, 1, workers.NO_GO)


def _warm_units(key: tuple) -> None:
    """Compile (or load) the one-example loop by halves of units (``by_units``)."""
    if available():
        z, dt = np.zeros, np.float32
        lstm_forward_units(z((4, 1, 1, 2), dt), np.ones((2, 2, 4), dt), z((3, 2), dt),
                           z(1, np.int64), np.inf, z((2, 1, 2), dt), z((2, 1, 2), dt),
                           z((1, 1, 2), dt), z((2, 20), dt), z((1, 4, 1, 2), dt),
                           z((1, 1, 2), dt), z((1, 1, 2), dt), True, np.zeros(32, np.int64), 0,
                           0, workers.NO_GO)


def _warm_backward(key: tuple) -> None:
    """``_warm``'s backward loop alone."""
    if available():
        z, dt = np.zeros, np.float32
        lstm_backward(z((1, 1, 1), dt), z((1, 1), dt), z((1, 1), dt), np.ones((1, 4), dt),
                      z((4, 0, 0), dt), z((3, 1), dt), z(1, np.int64), np.inf, z((2, 1, 1), dt),
                      z((2, 1, 1), dt), z((1, 4, 1, 1), dt), z((1, 1, 1), dt),
                      z((1, 1, 1), dt), z((4, 1, 1, 1), dt), z((3, 1), dt), z((1, 1), dt),
                      z((2, 1, 1), dt), 0, 1, workers.NO_GO)


def ready(dtype: np.dtype, activations: tuple, steps: int, batch: int, hidden: int) -> bool:
    """May the compiled loops run now: float32, LSTM's default activations, the private BLAS
    loaded, the loops compiled (``compiling.ready``; a layer of these sizes that runs by
    halves of units, ``by_units``, needs that loop too)?"""
    if not (np.dtype(dtype) == np.float32 and activations == ACTIVATIONS and available()
            and compiling.ready(("lstm", np.dtype(np.float32)), _warm)):
        return False
    return (not by_units(steps, batch, hidden)
            or compiling.ready(("lstm_units", np.dtype(np.float32)), _warm_units))
