"""Compile a new plan's kernels on two cores: this process and one helper process.

A plan's kernels compile one after the other, and a Numba compile is one core's work: Numba
holds one process-wide compiler lock for all of it, so threads cannot share it out. On a cold
cache W9's first training step spent ~5.8 of its ~6.4 s in ~27 compiles of 0.1-1 s each, one
core busy and the other idle. So when a plan has several kernels that are not in the disk
cache, a helper process (started on first need and kept until it has been idle for
``IDLE_SECONDS``) compiles some of them into the same disk cache while this process compiles
the others. On Linux the helper is a fork of this process, taken while no thread compiles, calls
LLVM or runs a kernel (their locks held across the fork); elsewhere, or when such a thread is
busy, a fresh interpreter, which spent ~0.45 s starting and importing before its first job
(``start_method``):

* the steps are a row; this process takes them from the front and the helper from the back,
  one at a time, until they meet (whoever comes first claims a step, under one lock; steps
  with the same kernel are one job);
* the helper gets each step's warm-up call as (source, kernel name, Numba argument types), the
  call this process's warm-up would make (``CompiledPlan`` records it without running it);
* a step the helper compiled is then warmed up here as usual, and its kernel loads from the
  disk cache (~5 ms) instead of compiling; a step the helper has in hand when this process
  reaches it is waited for; a step the helper failed (or a helper that died or hung) is
  compiled here, so the result never depends on the helper;
* the helper first runs the kernels layer's warm-ups that the plan's library steps will meet
  when the plan first runs (``OpDef.warm``: the private BLAS's matmul halves, the LSTM's time
  loops...), and a new helper before them the split hand-off and the finite check
  (``PRELUDE``); when this process is through its steps it runs the plan's warm-ups the
  helper has not started, and waits only for the job the helper has in hand.

Plans made inside ``together()`` (a training step's gradient and update plans) compile as one
pool when the block ends, instead of one plan after the other: W9's update plan compiled its
6 kernels (0.17-0.28 s) after the gradient plan's 19, on its own.

The machine code is the same either way (one LLVM, one CPU, one source), so results are bit
for bit those of a one-process compile. ``ND4PY_COMPILE_HELPER=0`` turns the helper off; it
is off on a machine with one usable core, and for fewer than ``MIN_COLD`` kernels to compile.

>>> schedule = []
>>> compile_each([None, None], schedule.append)   # nothing to compile: all here, in order
>>> schedule
[0, 1]
"""
from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections import deque
from typing import Any, Callable, Iterator, Sequence

import numpy as np

#: the helper exits after this long without work (a later plan starts a new one)
IDLE_SECONDS = 60.0
#: seconds to wait for one kernel from the helper before compiling it here instead
JOB_TIMEOUT = 120.0
#: fewer kernels to compile than this: not worth a process start (~0.5 s of the other core)
MIN_COLD = 3

#: (module, warm function, its key) that a new helper runs first (``kernels.compiling.ready``'s
#: warm-ups: each compiles a kernels-layer function into the disk cache, or loads it)
PRELUDE = (("samediff.kernels.split", "_warm", ("split",)),
           ("samediff.kernels.finite", "_warm", ("finite", "float32")))

stats = {"helper_spawns": 0, "helper_compiles": 0, "helper_failures": 0}

_lock = threading.Lock()     # one plan at a time uses the helper; others compile alone
_helper: "_Helper | None" = None
_warmed: set = set()         # warm-ups run (or handed to a helper) in this process
_pool = threading.local()    # .work: the plans' compiles a ``together()`` block holds back


def enabled() -> bool:
    """Whether new plans may use a helper process (``ND4PY_COMPILE_HELPER``, usable cores)."""
    if os.environ.get("ND4PY_COMPILE_HELPER", "1") == "0":
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return cores >= 2


class FirstCall:
    """Stands in for a kernel module: records the first kernel call (name, arguments)
    instead of running it (``plan.KernelStep.compile_job``)."""

    def __init__(self) -> None:
        self.call: tuple | None = None

    def __getattr__(self, name: str) -> Any:
        def record(*args: Any) -> None:
            if self.call is None:
                self.call = (name, args)
        return record


def warmups(library_steps: Sequence[Any], types: Any) -> list:
    """The kernels-layer warm-ups these library steps (plan nodes) will run at their static
    types (``OpDef.warm``)."""
    out: list = []
    for step in library_steps:
        warm = getattr(step.op, "warm", None)
        if warm is not None:
            try:
                out += warm([types[i] for i in step.inputs], step.attrs)
            except Exception:  # noqa: BLE001 - a hint only: the step itself will run
                continue
    return out


def job(source: str, dispatcher: Any, name: str, args: Sequence[Any]) -> tuple | None:
    """The helper's job for the call ``dispatcher(*args)`` of kernel ``name`` in the module
    loaded from ``source``: (source, name, Numba argument types), or None when it needs no
    compile (compiled in this process already, or its disk cache has an index: a load)."""
    if dispatcher.overloads:
        return None
    try:
        if os.path.exists(dispatcher._cache._cache_file._index_path):
            return None
    except AttributeError:  # caching off, or Numba's internals moved: nothing to share
        return None
    import numba
    return source, name, tuple(numba.typeof(a) for a in args)


@contextlib.contextmanager
def together() -> Iterator[None]:
    """Plans made in this block, on this thread, compile their kernels as one pool when it
    ends (``compile_each``'s ``then`` runs for each after it); a plan run before that
    compiles the pool first (``flush``). Nested blocks join the outermost.

    >>> done = []
    >>> with together():
    ...     compile_each([None], done.append, then=done.append)
    ...     held = list(done)
    >>> held, done
    ([], [0, True])
    """
    if getattr(_pool, "work", None) is not None:
        yield
        return
    _pool.work = []
    try:
        yield
    finally:
        work, _pool.work = _pool.work, None
        _compile_pooled(work)


def flush() -> None:
    """Compile now what this thread's ``together()`` block holds back (nothing outside one)."""
    work = getattr(_pool, "work", None)
    if work:
        _pool.work = []
        _compile_pooled(work)


def _compile_pooled(work: list) -> None:
    owner = [(w, k) for w in work for k in range(len(w[0]))]
    ok = False
    try:
        _compile_all([j for w in work for j in w[0]], lambda n: owner[n][0][1](owner[n][1]),
                     [x for w in work for x in w[2]])
        ok = True
    finally:
        for _jobs, _here, _warm, then in work:
            if then is not None:
                then(ok)


def compile_each(jobs: Sequence[tuple | None], compile_here: Callable[[int], None],
                 warmups: Sequence[tuple] = (),
                 then: Callable[[bool], None] | None = None) -> None:
    """``compile_here(k)`` for every step ``k`` in order, with the helper compiling cold steps
    (``jobs[k]`` not None) from the back meanwhile, when that is worth it (module docstring);
    then ``then(ok)`` (``ok`` False: the compile was cut short by an exception, which
    propagates: Ctrl-C, a strict-mode ``CompilationError``). Inside ``together()`` this
    happens when the block ends, with the other plans' steps. ``warmups``: the kernels
    layer's warm-ups the plan's library steps will run (``OpDef.warm``: (module, function,
    key)); the helper takes them before any step, and this process runs what is left of them
    after its steps, each once per process."""
    work = getattr(_pool, "work", None)
    if work is not None:
        work.append((jobs, compile_here, warmups, then))
        return
    _compile_pooled([(jobs, compile_here, warmups, then)])


@contextlib.contextmanager
def _old_objects_left_out() -> Iterator[None]:
    """While a pool compiles, the objects alive before it are left out of the garbage
    collector's passes (``gc.freeze``; thawed after): Numba's compiles make enough garbage to
    set off full collections, each a walk over every object of the process (its modules,
    numpy's, Numba's own). Not when something froze objects already: thawing would thaw
    those too. (The forked helper freezes what it inherits for good.)"""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _compile_all(jobs: Sequence[tuple | None], compile_here: Callable[[int], None],
                 warmups: Sequence[tuple]) -> None:
    with _old_objects_left_out():
        _compile_jobs(jobs, compile_here, warmups)


def _compile_jobs(jobs: Sequence[tuple | None], compile_here: Callable[[int], None],
                  warmups: Sequence[tuple]) -> None:
    cold = [k for k, j in enumerate(jobs) if j is not None]
    if len(cold) >= MIN_COLD and enabled() and _lock.acquire(blocking=False):
        try:
            helper = _running_helper()
            if helper is not None:
                _two_ended(jobs, cold, [w for w in dict.fromkeys(warmups) if w not in _warmed],
                           helper, compile_here)
                return
        finally:
            _lock.release()
    for k in range(len(jobs)):  # alone: too little to share, no second core, or no helper
        compile_here(k)


def warm_here(warmup: tuple) -> None:
    """Run one warm-up (module, function, key) in this process, in ``"sync"`` mode (its
    calls compile now, whatever the mode in force)."""
    from ..kernels import compiling
    module, function, (family, *dtypes) = warmup
    key = (family, *(np.dtype(d) for d in dtypes))
    with compiling.override("sync"):
        getattr(importlib.import_module(module), function)(key)


def _two_ended(jobs: Sequence[tuple | None], cold: list, warmups: list, helper: "_Helper",
               compile_here: Callable[[int], None]) -> None:
    # steps with the same kernel (a repeated block, an update per parameter group) are one job
    unclaimed = deque(dict.fromkeys(jobs[k] for k in cold))
    warm = deque(warmups)
    busy: set = set()          # jobs the helper has in hand
    changed = threading.Condition()
    steps_done = threading.Event()  # this process is through its steps: no more prelude

    def feed() -> None:
        """Prelude (while this process still has steps), the plan's warm-ups, then steps
        from the back; a prelude left over goes to the next plan's feeder."""
        while helper.prelude and not steps_done.is_set():
            if not helper.compile(("warm", *helper.prelude.pop(0))):
                return
        while True:  # (the plan's warm-ups go on after this process's steps: it takes them too)
            with changed:
                if warm:
                    todo = warm.popleft()
                    _warmed.add(todo)
                    todo = ("warm", *todo)
                elif unclaimed:
                    todo = unclaimed.pop()
                    busy.add(todo)
                else:
                    return
            ok = helper.compile(todo)
            with changed:
                busy.discard(todo)
                changed.notify_all()
            if not ok:
                return  # a failed job is compiled here; a dead helper takes no more

    feeder = threading.Thread(target=feed, name="nd4py-compile-feeder", daemon=True)
    feeder.start()
    for k, mine in enumerate(jobs):
        if mine is not None:
            with changed:
                if mine in unclaimed:
                    unclaimed.remove(mine)
                if mine in busy and not changed.wait_for(lambda: mine not in busy, JOB_TIMEOUT):
                    helper.close()  # hung: the feeder's read ends, the step compiles here
        compile_here(k)
    steps_done.set()
    while True:  # the warm-ups the helper has not started: here, as the first run would
        with changed:
            if not warm:
                break
            todo = warm.popleft()
            _warmed.add(todo)
        try:
            warm_here(todo)
        except Exception:  # noqa: BLE001 - the op's own call meets it and reports it
            pass
    feeder.join(JOB_TIMEOUT)  # (its job in hand: the plan's first run may need it)


def _running_helper() -> "_Helper | None":
    global _helper
    if _helper is None or not _helper.alive():
        try:
            _helper = _Helper()
        except OSError:
            _helper = None
    return _helper


def start_method() -> str:
    """How a new helper starts: ``"fork"`` (on Linux: a copy of this process, its modules
    imported already -- a fresh interpreter spent ~0.45 s starting and importing ``samediff``
    and Numba before its first job) or ``"spawn"`` (a fresh interpreter: elsewhere, with
    ``ND4PY_COMPILE_HELPER_START=spawn``, and whenever a fork would not be safe, ``_Helper``)."""
    if os.environ.get("ND4PY_COMPILE_HELPER_START", "fork") == "spawn":
        return "spawn"
    return "fork" if sys.platform.startswith("linux") and hasattr(os, "fork") else "spawn"


class _Helper:
    """The helper process and the pipes to it (one job in flight at a time)."""

    def __init__(self) -> None:
        self._popen: subprocess.Popen | None = None
        self.started = start_method()
        if self.started != "fork" or not self._fork():
            self.started = "spawn"
            self._spawn()
        self.prelude = list(PRELUDE)
        stats["helper_spawns"] += 1

    def _spawn(self) -> None:
        # the same modules as here: this process's import path, made absolute
        path = os.pathsep.join(os.path.abspath(p) if p else os.getcwd() for p in sys.path)
        env = dict(os.environ, PYTHONPATH=path)
        self._popen = subprocess.Popen(
            [sys.executable, "-c", "from samediff.compiler.compile_helper import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.pid = self._popen.pid
        self.jobs, self.answers = self._popen.stdin, self._popen.stdout

    def _fork(self) -> bool:
        """Start the helper as a fork of this process; False (nothing started) when that is
        not safe now: another thread inside a Numba compile, an LLVM call or a kernel would
        leave the child its locks held or a BLAS call half done. They are held across the
        fork, so no compile or LLVM call starts meanwhile."""
        try:
            jobs_r, jobs_w = os.pipe()
        except OSError:  # (out of file descriptors: so would a spawn be)
            return False
        try:
            answers_r, answers_w = os.pipe()
        except OSError:
            os.close(jobs_r)
            os.close(jobs_w)
            return False
        fds = (jobs_r, jobs_w, answers_r, answers_w)
        held = _fork_locks()
        if held is None:
            for fd in fds:
                os.close(fd)
            return False
        try:
            with warnings.catch_warnings():  # (3.12+ warns of a fork with threads running:
                warnings.simplefilter("ignore", DeprecationWarning)  # the locks above cover it)
                pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:  # the child: never returns into the caller's code
            try:
                _release(held)  # (its one thread holds them now)
                _serve_forked(jobs_r, answers_w, keep={jobs_r, answers_w})
            finally:
                os._exit(1)
        _release(held)
        if pid < 0:
            for fd in fds:
                os.close(fd)
            return False
        os.close(jobs_r)
        os.close(answers_w)
        self.pid = pid
        self.jobs, self.answers = os.fdopen(jobs_w, "wb"), os.fdopen(answers_r, "rb")
        return True

    def alive(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:  # reaped already (or by someone else)
            return False

    def compile(self, job: tuple) -> bool:
        """Send one job and wait for its answer; False if it failed or the helper is gone."""
        try:
            pickle.dump(job, self.jobs, protocol=pickle.HIGHEST_PROTOCOL)
            self.jobs.flush()
            ok, _message = pickle.load(self.answers)
        except (OSError, EOFError, ValueError, pickle.UnpicklingError):
            self.close()
            ok = False
        stats["helper_compiles" if ok else "helper_failures"] += 1
        return bool(ok)

    def close(self) -> None:
        """End the helper (it exits when its input closes; killed if it does not)."""
        try:
            self.jobs.close()
        except (OSError, ValueError):
            pass
        if not self._exited(1.0):
            self._kill()
            self._exited(None)
        try:
            self.answers.close()
        except (OSError, ValueError):  # the feeder may be reading it: it ends with an error
            pass

    def _exited(self, seconds: float | None) -> bool:
        """Wait up to ``seconds`` (None: for good) for the helper to exit; reaps it."""
        if self._popen is not None:
            try:
                self._popen.wait(seconds)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            try:
                if os.waitpid(self.pid, os.WNOHANG if deadline is not None else 0)[0] != 0:
                    return True
            except ChildProcessError:
                return True
            if time.monotonic() >= deadline:  # type: ignore[operator]
                return False
            time.sleep(0.005)

    def _kill(self) -> None:
        try:
            if self._popen is not None:
                self._popen.kill()
            else:
                os.kill(self.pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def _fork_locks() -> list | None:
    """Numba's compiler lock and llvmlite's lock of the LLVM C API, taken without waiting,
    when no other thread runs a kernel (``forksafe``) and no background compile is queued
    (``kernels.compiling``: the child would start a thread for it); None (none held)
    otherwise."""
    try:
        from llvmlite.binding import ffi
        from numba.core.compiler_lock import global_compiler_lock
        locks = [global_compiler_lock._lock, ffi.lib._lock._lock]
    except (ImportError, AttributeError):  # Numba's or llvmlite's internals moved: spawn
        return None
    from ..kernels import compiling, forksafe
    held: list = []
    for lock in locks:
        if not lock.acquire(blocking=False):
            break
        held.append(lock)
    else:
        if forksafe.others_in_flight() == 0 and compiling.pending() == 0:
            return held
    _release(held)
    return None


def _release(held: list) -> None:
    for lock in reversed(held):
        lock.release()


def _serve_forked(jobs: int, answers: int, keep: set) -> None:
    """The forked helper (it ends with ``os._exit``: nothing of the parent's runs here, not
    its ``atexit`` handlers nor its buffered output). What it inherited and must not hold or
    act on is let go first:

    * Ctrl-C is the parent's to handle (its exit closes our input); the parent's Python signal
      handlers (a checkpoint on SIGTERM) are not ours: default actions, no wake-up fd;
    * every file descriptor but the two pipes now points to the null device -- a pipe, socket
      or lock file the parent closes must not stay open here (a spawned interpreter never had
      them); the numbers stay taken, so an inherited file object that is finalized later
      closes nothing of ours;
    * the objects it inherited are frozen out of garbage collection (collecting them would
      copy the parent's pages and run their finalizers); its own are collected."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for number in signal.valid_signals():
        try:
            if callable(signal.getsignal(number)) and number != signal.SIGINT:
                signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError, TypeError):
            continue
    try:
        signal.set_wakeup_fd(-1)
    except (ValueError, OSError):
        pass
    gc.freeze()
    null = os.open(os.devnull, os.O_RDWR)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep and fd != null:
            try:
                os.dup2(null, fd)
            except OSError:  # (the directory's own descriptor, closed by now)
                continue
    sys.stdout = sys.stderr = open(null, "w", closefd=False)
    _pool.work = None  # (a ``together`` block of the parent's thread is not ours)
    serve(os.fdopen(jobs, "rb"), os.fdopen(answers, "wb"))
    os._exit(0)


def _forget_in_child() -> None:
    """A forked child must not talk to its parent's helper (or close it)."""
    global _helper, _lock
    _helper, _lock = None, threading.Lock()


def _close_at_exit() -> None:
    if _helper is not None:
        _helper.close()


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(_close_at_exit)


def _wait_for_input(stream: Any, seconds: float) -> bool:
    """True when ``stream`` has input (or hit its end) within ``seconds``."""
    try:
        import select
        return bool(select.select([stream], [], [], seconds)[0])
    except (ImportError, OSError, ValueError):  # no select on pipes (Windows): just wait
        return True


def serve(inp: Any = None, out: Any = None) -> None:
    """The helper's loop: compile each job into the disk cache and answer (ok, message);
    exit when the input ends or after ``IDLE_SECONDS`` without a job. A job is a kernel's
    (source, name, argument types), or ("warm", module, function, key) for a warm-up
    (``PRELUDE``'s or an op's, ``warm_here``). Jobs come from ``inp`` and answers go to
    ``out`` (binary files; by default the standard input and output)."""
    from .codegen import load
    if inp is None:
        inp, out = sys.stdin.buffer, sys.stdout.buffer
        sys.stdout = sys.stderr  # the pipe carries answers only
    while _wait_for_input(inp, IDLE_SECONDS):
        try:
            job = pickle.load(inp)
        except (EOFError, pickle.UnpicklingError):
            return
        try:
            if job[0] == "warm":
                warm_here(job[1:])
            else:
                source, name, signature = job
                getattr(load(source), name).compile(signature)
            answer = (True, "")
        except Exception as exc:  # noqa: BLE001 - any failure: the plan compiles it itself
            answer = (False, f"{type(exc).__name__}: {exc}")
        pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()


__all__ = ["IDLE_SECONDS", "MIN_COLD", "FirstCall", "compile_each", "enabled", "flush", "job",
           "serve", "start_method", "stats", "together", "warm_here", "warmups"]
