"""Collecting submissions for ``hub/grading/grade.py`` without following anything a student
controls.

Where a submission comes from:

* **the class hub** (default): each student ``<name>`` is the system user ``<prefix><name>``
  (``alab-`` by default), and saves the released notebook as
  ``~/assignments/<assignment>/<notebook>.ipynb`` in their home (``grade.py release`` puts it
  there, as the student);
* **a folder of returned notebooks** (``--from DIR``): ``DIR/<student id>/<notebook>.ipynb``.

Only the assignment's notebooks are read, nothing else beside them. Every step of the path
below the home (or DIR) is opened with ``O_NOFOLLOW`` relative to the one before, so a link
anywhere in it (``~/assignments`` pointing into another home, ``exercises.ipynb`` pointing at
another student's notebook or at the hub's cookie secret) is refused, never followed. In a
home every step must belong to the student (a hard link to someone else's file keeps its
owner, and is refused); the file must be a regular file no larger than ``max_bytes``, and a
notebook nbformat can read. What is refused is reported with the reason; it never reaches
``submitted/``.
"""

from __future__ import annotations

import errno
import os
import pwd
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

MiB = 1024**2
MAX_BYTES = 20 * MiB
HOME_FOLDER = "assignments"  # ~/assignments/<assignment>/<notebook>.ipynb
STUDENT_ID = re.compile(r"^[a-z][a-z0-9_-]{0,19}$")  # the hub's names (username_pattern)
FOLDER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class Refusal(Exception):
    """A file that is not collected, and why."""


class Missing(Refusal):
    """No such file: the student has not saved the notebook there (not an attack)."""


@dataclass
class Student:
    id: str  # nbgrader's student id: the hub name
    root: Path  # the home, or DIR/<id>
    uid: int | None  # the owner every step must have (None: any, for a teacher's folder)
    parts: tuple[str, ...] = ()  # the path below root to the assignment's folder


@dataclass
class Collection:
    collected: dict[str, dict[str, bytes]] = field(default_factory=dict)  # id -> name -> bytes
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # (id, path, reason)
    missing: list[str] = field(default_factory=list)  # ids with no notebook there


def hub_students(prefix: str, assignment: str, names: list[str] | None = None) -> list[Student]:
    """The hub's students: every system user named ``<prefix><name>`` (or only ``names``)."""
    students = []
    for pw in sorted(pwd.getpwall(), key=lambda p: p.pw_name):
        if not pw.pw_name.startswith(prefix):
            continue
        name = pw.pw_name[len(prefix) :]
        if names is not None and name not in names:
            continue
        if not STUDENT_ID.match(name):
            continue
        students.append(Student(name, Path(pw.pw_dir), pw.pw_uid, (HOME_FOLDER, assignment)))
    return students


def folder_students(folder: Path, names: list[str] | None = None) -> list[Student]:
    """The returned notebooks of a teacher's folder: ``DIR/<student id>/``."""
    students = []
    for entry in sorted(os.listdir(folder)):
        if (names is None or entry in names) and FOLDER_ID.match(entry):
            students.append(Student(entry, folder, None, (entry,)))
    return students


def _open_dir(name: str, dir_fd: int | None, owner: int | None, shown: str) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as e:
        raise _refusal(e, shown) from None
    st = os.fstat(fd)
    if owner is not None and st.st_uid != owner:
        os.close(fd)
        raise Refusal(f"{shown} belongs to uid {st.st_uid}, not to the student")
    return fd


def _refusal(error: OSError, shown: str) -> Refusal:
    if error.errno in (errno.ELOOP, errno.ENOTDIR):
        return Refusal(f"{shown} is a symbolic link or not a folder: not followed")
    if error.errno == errno.ENOENT:
        return Missing(f"{shown} does not exist")
    if error.errno == errno.ENXIO:
        return Refusal(f"{shown} is not a regular file")
    return Refusal(f"{shown}: {error.strerror}")


def read_beneath(
    root: Path, parts: tuple[str, ...], owner: int | None, max_bytes: int = MAX_BYTES
) -> bytes:
    """The bytes of ``root/parts...``, opened one step at a time with O_NOFOLLOW: raises
    Refusal for a link, a file that is not regular, a step that ``owner`` does not own, or
    more than ``max_bytes``."""
    shown = str(root)
    fd = _open_dir(str(root), None, owner, shown)
    try:
        for part in parts[:-1]:
            shown = f"{shown}/{part}"
            next_fd = _open_dir(part, fd, owner, shown)
            os.close(fd)
            fd = next_fd
        shown = f"{shown}/{parts[-1]}"
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        try:
            file_fd = os.open(parts[-1], flags, dir_fd=fd)
        except OSError as e:
            raise _refusal(e, shown) from None
        try:
            st = os.fstat(file_fd)
            if not stat.S_ISREG(st.st_mode):
                raise Refusal(f"{shown} is not a regular file")
            if owner is not None and st.st_uid != owner:
                raise Refusal(f"{shown} belongs to uid {st.st_uid}, not to the student")
            if st.st_size > max_bytes:
                raise Refusal(f"{shown} has {st.st_size} bytes, more than {max_bytes}")
            chunks, size = [], 0
            while chunk := os.read(file_fd, 1 << 20):
                chunks.append(chunk)
                size += len(chunk)
                if size > max_bytes:  # grew while read
                    raise Refusal(f"{shown} has more than {max_bytes} bytes")
            return b"".join(chunks)
        finally:
            os.close(file_fd)
    finally:
        os.close(fd)


def _is_notebook(data: bytes) -> str | None:
    """None for a notebook nbformat reads (version 4), else why not."""
    import nbformat

    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception as e:  # noqa: BLE001 -- any reason a file is not a notebook
        return f"not a notebook ({type(e).__name__})"
    return None if nb.get("nbformat") == 4 else "not a version-4 notebook"


def collect(
    students: list[Student], notebooks: list[str], max_bytes: int = MAX_BYTES
) -> Collection:
    """Read each student's copy of each of the assignment's ``notebooks`` (file names)."""
    result = Collection()
    for student in students:
        files: dict[str, bytes] = {}
        for name in notebooks:
            parts = (*student.parts, name)
            try:
                data = read_beneath(student.root, parts, student.uid, max_bytes)
                problem = _is_notebook(data)
                if problem:
                    raise Refusal(f"{student.root}/{'/'.join(parts)} is {problem}")
            except Missing:
                result.missing.append(student.id)
                continue
            except Refusal as e:
                result.refused.append((student.id, str(student.root.joinpath(*parts)), str(e)))
                continue
            files[name] = data
        if files:
            result.collected[student.id] = files
    return result


def write_submissions(course: Path, assignment: str, collection: Collection) -> list[Path]:
    """``submitted/<id>/<assignment>/<notebook>``, root's, mode 0600 in folders 0700: only
    the notebooks collected, replacing what an earlier collection put there."""
    written = []
    submitted = course / "submitted"
    submitted.mkdir(mode=0o700, exist_ok=True)
    for student, files in collection.collected.items():
        folder = submitted / student / assignment
        if folder.is_symlink() or folder.parent.is_symlink():
            raise RuntimeError(f"{folder} is a link: the course folder was changed by someone")
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True, mode=0o700)
        for name, data in files.items():
            path = folder / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            written.append(path)
    return written
