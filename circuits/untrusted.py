"""Reading a folder that a stranger may have written: a run, a sweep, an output directory.

One rule, in one place, for every file read from such a folder: nothing below the folder the user named is
followed if it is a symbolic link (at any level: a linked condition folder would lead a sweep or a summary
outside it), nothing is read that is not a regular file (a named pipe would block the reader for ever, a
device would never end), and nothing is read whole that is larger than a limit, checked on the open file
before its first byte is read. And one rule for numbers read from such a folder or computed from it: one
that is NaN or infinite is never printed as a result. A message quotes at most 200 characters of a value read
from such a folder (:func:`~induction_probes.circuits.validation.quoted`): a 30 MB string in a
config.json must not come back as a 30 MB error line.

Writing into such a folder has its rule here too (:func:`write_atomic`): whole files through a temporary file of
an unpredictable name and a rename, so that a crash leaves the old file or the new one and no link planted in
the folder is written through.
"""

from __future__ import annotations

import errno
import fcntl
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import TypeVar

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import MAX_TEXT_BYTES

Finite = TypeVar("Finite")  # what require_finite returns: what it was given


class CheckpointError(BadInput):
    """A run or checkpoint that cannot be opened: missing, corrupt, or inconsistent with its config."""


class NotFiniteError(BadInput):
    """A number that is NaN or infinite where a result must be a finite number."""


def refuse_links(*paths: Path, why: str = "a run's files are its own") -> None:
    """A run reads and writes only inside its own directory: none of ``paths`` may be a symbolic link."""
    for path in paths:
        if path.is_symlink():
            raise CheckpointError(f"{path} is a symbolic link: {why}")


def refuse_links_below(root: Path, path: Path, why: str = "a folder's files are its own") -> None:
    """No folder or file from just below ``root`` (the folder the user named, which may itself be a link)
    down to ``path`` itself may be a symbolic link; ``path`` must lie below ``root``."""
    relative = Path(os.path.relpath(path, root))
    if relative.parts[:1] == ("..",):
        raise CheckpointError(f"{path} is not inside {root}")
    below = root
    for part in relative.parts:
        below = below / part
        refuse_links(below, why=why)


def read_bytes(path: Path, limit: int = MAX_TEXT_BYTES, root: Path | None = None) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes, no link on the way below ``root``
    (or at ``path`` itself without one). A missing file is a FileNotFoundError, as ``open`` gives."""
    if root is None:
        refuse_links(path)
    else:
        refuse_links_below(root, path)
    # O_NONBLOCK: opening a named pipe with no writer must not wait; O_NOFOLLOW: a link swapped in since
    # the check above is refused by the kernel itself
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        raise CheckpointError(f"{path} is not a regular file")
    with os.fdopen(descriptor, "rb") as handle:
        if status.st_size > limit:
            raise CheckpointError(f"{path} is larger than such a file can be ({limit:,} bytes)")
        data = handle.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise CheckpointError(f"{path} is larger than such a file can be ({limit:,} bytes)")
    return data


def open_for_writing(path: Path, flags: int, mode: int = 0o666) -> int:
    """A descriptor of ``path`` opened with ``flags`` (``O_WRONLY``, ``O_APPEND``, ``O_CREAT``, ...) for writing
    in a folder a stranger may have written: a link at its name is refused (``O_NOFOLLOW``), and so is anything
    that is not a regular file or that has other names (a hard link: writing would change a file elsewhere),
    checked on the open descriptor before a byte is written (no caller truncates on opening); ``O_NONBLOCK`` so
    that a named pipe there with no reader cannot hold the open for ever (it fails at once, or opens and is
    refused)."""
    try:
        descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):  # a link, a folder, a pipe nobody reads
            kind = {errno.ELOOP: "a symbolic link", errno.EISDIR: "a folder", errno.ENXIO: "a named pipe"}
            raise CheckpointError(f"{path} is {kind[error.errno]}, not a regular file: refusing to write it") from None
        raise
    status = os.fstat(descriptor)
    found = status.st_mode
    if not stat.S_ISREG(found):
        os.close(descriptor)
        what = "a named pipe, not a regular file" if stat.S_ISFIFO(found) else "not a regular file"  # O_RDWR opens one
        raise CheckpointError(f"{path} is {what}: refusing to write it")
    if status.st_nlink > 1:  # another name of the same file, maybe outside the folder: writing would change it too
        os.close(descriptor)
        raise CheckpointError(f"{path} has other names (a hard link): refusing to write through it")
    os.set_blocking(descriptor, True)  # a regular file's writes never wait; the flag only guarded the open
    return descriptor


def lock_or_refuse(handle, busy: Exception) -> None:
    """Hold ``handle``'s file locked (``flock``, exclusive) for as long as it stays open, or raise ``busy`` at
    once if another process holds it. The kernel releases the lock with its process, however that dies."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise busy from None


def read_text(path: Path, limit: int = MAX_TEXT_BYTES, root: Path | None = None) -> str:
    """:func:`read_bytes` as UTF-8 text (a UnicodeDecodeError if it is not)."""
    return read_bytes(path, limit, root).decode("utf-8")


def not_a_number(constant: str):
    """``json.loads``'s hook for NaN and Infinity, which strict JSON has not and a result must not be."""
    raise NotFiniteError(constant)


def require_finite(value: Finite, what: str) -> Finite:
    """``value`` (a number, or dicts and lists of them) if every number in it is finite; else a
    :class:`NotFiniteError` naming where the first one that is not sits."""
    where = first_not_finite(value)
    if where is not None:
        raise NotFiniteError(f"{what}{where} is not a finite number (NaN or infinity): refusing to report it")
    return value


def first_not_finite(value: object, where: str = "") -> str | None:
    if isinstance(value, float):
        return None if math.isfinite(value) else where
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = first_not_finite(item, f"{where}[{key!r}]")
        if found is not None:
            return found
    return None


TEMPORARY_SUFFIX = ".tmp"  # write_atomic writes FILE through .FILE.<random>.tmp beside it


def is_temporary_of(name: str, target: str) -> bool:
    """Whether ``name`` is a temporary file :func:`write_atomic` makes on its way to writing ``target``."""
    return name.startswith(f".{target}.") and name.endswith(TEMPORARY_SUFFIX)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half, and no link
    planted in the run is followed: a fresh temporary file beside ``path`` (created exclusively under a
    random name, so nothing can be waiting there), fsync'ed, then renamed over ``path`` (a rename replaces
    a link at ``path`` itself instead of writing where it points)."""
    refuse_links(path.parent, why="a run writes only inside its own directory")
    descriptor, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE & ~current_umask())  # mkstemp's 0600 would differ from file to file
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


FILE_MODE = 0o666  # what open() gives a new file before the umask: every file of a run gets the same mode


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
