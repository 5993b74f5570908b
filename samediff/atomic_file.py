"""Crash-safe file replacement: write a temporary beside the target, fsync, rename over it.

Whatever fails (including KeyboardInterrupt), the temporary is removed and the target is left as
it was: the rename is the only step that touches it, and it is atomic. The temporary
``.<name>.<8 random characters>.tmp`` stays locked (``flock``) while it is written, so the next write to the
same target can tell a temporary left by a killed process (unlocked: removed) from a live one.
A file-system failure is a ``SaveError`` (also an ``OSError``) naming the target and what to do.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "notes.txt")
>>> write_atomically(path, lambda f: f.write(b"hello"))
>>> open(path, "rb").read()
b'hello'
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from typing import IO, Callable

try:
    import fcntl
except ImportError:  # Windows: no flock; stale temporaries are then left alone (see below)
    fcntl = None  # type: ignore[assignment]

from .errors import SaveError

_TEMP_ATTEMPTS = 10


def write_atomically(path: str | os.PathLike, write: Callable[[IO[bytes]], object]) -> None:
    """Replace ``path`` with what ``write(file)`` writes, atomically; ``SaveError`` (an
    ``OSError``) naming ``path`` on a file-system failure."""
    path = os.fspath(path)
    try:
        _write_atomically(path, write)
    except OSError as exc:
        raise _save_error(path, exc) from exc


def _write_atomically(path: str, write: Callable[[IO[bytes]], None]) -> None:
    """Run ``write`` on a locked temporary beside ``path``, fsync it, rename it over ``path``.

    Whatever fails (including KeyboardInterrupt), the temporary is removed and ``path`` is left
    as it was: the rename is the only step that touches it, and it is atomic."""
    directory, base = os.path.split(os.path.abspath(path))
    mode = _file_mode(path)
    _remove_stale_temporaries(directory, base)
    tmp = _create_temporary(directory, base)
    try:
        with tmp:
            write(tmp)
            tmp.flush()
            os.fsync(tmp.fileno())
            os.chmod(tmp.name, mode)  # the temporary is 0600; give the usual permissions
            if fcntl is None:
                tmp.close()  # Windows cannot rename an open file (and there is no lock to keep)
            os.replace(tmp.name, path)  # still open on POSIX: locked until it is the target
    except BaseException:
        _remove_quietly(tmp.name)
        raise
    finally:
        _LIVE_TEMPORARIES.discard(tmp.name)
    _fsync_dir(directory)


def _save_error(path: str, exc: OSError) -> SaveError:
    """A ``SaveError`` naming the target (not the temporary) and what to do about it."""
    directory = os.path.dirname(os.path.abspath(path))
    advice = {
        errno.ENOENT: f"the directory {directory!r} does not exist; create it first "
                      f"(os.makedirs) or save elsewhere",
        errno.ENOTDIR: f"{directory!r} is not a directory (part of the path is a file); "
                       f"choose another path",
        errno.EACCES: f"no permission to create files in {directory!r}; save to a writable "
                      f"directory or fix its permissions",
        errno.EROFS: f"{directory!r} is on a read-only file system; save elsewhere",
        errno.ENOSPC: "the disk is full; free some space and save again",
        errno.EISDIR: "that path is a directory; give a file name",
    }
    advice[errno.EPERM] = advice[errno.EACCES]
    if hasattr(errno, "EDQUOT"):
        advice[errno.EDQUOT] = "the disk quota is exceeded; free some space and save again"
    reason = exc.strerror or str(exc) or type(exc).__name__
    what = advice.get(exc.errno, "check the path and the file system")
    err = SaveError(f"save: cannot write {path!r} ({reason}): {what}. Any previous file at "
                    f"that path is unchanged")
    err.errno = exc.errno  # ``except OSError`` handlers that look at errno keep working
    return err


def _file_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o7777  # overwriting: keep the file's permissions
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_dir(directory: str) -> None:
    """Make the rename itself durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- temporaries -----------------------------------------------------------------------------
#
# A save writes ``.<target name>.<8 random characters>.tmp`` (``tempfile``'s 8 random characters) and holds an
# exclusive ``flock`` on it until it has been renamed over the target. A process killed mid-save
# leaves its temporary behind, but the kernel drops its lock, even on SIGKILL. So the next save
# to the same target removes exactly the temporaries of that target that nobody holds locked:
# a concurrent save (another process, or another thread: flock locks belong to the open file,
# not to the process) keeps its lock and is never touched. Temporaries of this process are also
# skipped by name, in case the file system emulates flock with per-process locks (NFS).

_LIVE_TEMPORARIES: set[str] = set()  # temporaries this process is writing (all threads)


def _temporary_pattern(base: str) -> re.Pattern:
    """Names of the temporaries of target ``base``: not the target itself, and not those of
    another target (``a.sdz.x``'s temporaries hold a second dot where the random part is)."""
    return re.compile(re.escape(f".{base}.") + r"[a-z0-9_]{8}" + re.escape(".tmp"))


def _create_temporary(directory: str, base: str) -> IO[bytes]:
    """A new temporary beside the target, exclusively locked for as long as it is open."""
    for _ in range(_TEMP_ATTEMPTS):
        tmp = tempfile.NamedTemporaryFile(dir=directory, prefix=f".{base}.", suffix=".tmp",
                                          delete=False)
        _LIVE_TEMPORARIES.add(tmp.name)
        try:
            locked = _lock_still_named(tmp.fileno(), tmp.name)
        except BaseException:  # interrupted: leave nothing behind
            _LIVE_TEMPORARIES.discard(tmp.name)
            tmp.close()
            _remove_quietly(tmp.name)
            raise
        if locked:
            return tmp
        # A concurrent save's clean-up saw the file before we locked it and removes it: retry.
        _LIVE_TEMPORARIES.discard(tmp.name)
        tmp.close()
    raise OSError(errno.EAGAIN, f"could not create a temporary file in {directory!r}")


def _lock_still_named(fd: int, name: str) -> bool:
    """Lock ``fd`` without waiting, and check that ``name`` still names its file (a clean-up
    may have locked and removed it between its creation and now)."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # a clean-up holds it, and is removing it
    except OSError:
        return True   # no locks on this file system: clean-ups cannot lock (remove) it either
    try:
        return _same_file(os.stat(name, follow_symlinks=False), os.fstat(fd))
    except OSError:
        return False


def _remove_stale_temporaries(directory: str, base: str) -> None:
    """Remove the temporaries that killed saves of this target left behind (best effort:
    whatever cannot be examined or removed is left alone, and never fails the save)."""
    if fcntl is None:
        return  # without locks a stale temporary cannot be told from a live one
    pattern = _temporary_pattern(base)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        full = os.path.join(directory, name)
        if pattern.fullmatch(name) and full not in _LIVE_TEMPORARIES:
            _remove_if_unlocked(full)


def _remove_if_unlocked(name: str) -> None:
    try:  # O_NOFOLLOW: never a symlink's target; O_NONBLOCK: never hang on a FIFO
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while a live save holds it
        if _same_file(os.stat(name, follow_symlinks=False), info):
            os.unlink(name)
    except OSError:
        pass
    finally:
        os.close(fd)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _remove_quietly(name: str) -> None:
    # already gone (renamed or cleaned up): never hide the error being handled
    with contextlib.suppress(OSError):
        os.unlink(name)
