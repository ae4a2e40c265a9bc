"""The second red team's attacks (issue 38) that need no running shared hub: each starts a
hub of its own, or none. They live apart from tests/hub/test_hub_redteam2.py so that pytest-xdist
can give them to the worker that grades (tests/hub/test_hub_grading.py) while the other worker
runs every test of the shared hub (tests/conftest.py keeps those files on one worker):

- 5 (the hub's half): a checkout and a course folder that every user can read: the hub
  refuses to start, naming each path that holds solutions, grades or submissions and the
  command that fixes it;
- 10 (the fallback): where cgroups are not writable, RLIMIT_AS stops a process that asks
  for more than mem_limit, torch imported;
- 11 (a class from before the limit): the first spawn with a disk limit moves the home's
  files into its new image; deleting the student archives it.

ATTENTION_LAB_HUB_DIR runs them against another hub folder, as for the rest of the round.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.hub_helpers import ALLOCATE

pytestmark = pytest.mark.hub  # a real hub, real system users: only `make test-hub`


# --- 5, the hub's half: nothing that holds solutions, grades or submissions is readable --------


def test_5_the_hub_refuses_to_start_while_students_could_read_the_course(classroom, monkeypatch):
    # a teacher's checkout and course folder as `git clone` and nbgrader leave them: every
    # folder 0755, every file 0644 (the hub's own folder copied into the checkout)
    top = Path(tempfile.mkdtemp(prefix="attention-lab-readable-"))
    try:
        os.chmod(top, 0o755)
        checkout, course = top / "checkout", top / "course"
        shutil.copytree(classroom.HUB_DIR, checkout / "hub", ignore=shutil.ignore_patterns("node*"))
        (checkout / "hub" / "node_modules").symlink_to(classroom.HUB_DIR / "node_modules")
        solutions = checkout / "notebooks" / "zh-CN" / "exercises_solutions.ipynb"
        solutions.parent.mkdir(parents=True)
        solutions.write_text("{}")
        secrets = [solutions, course, *(course / n for n in ("source", "submitted", "autograded"))]
        secrets += [course / "feedback", course / "gradebook.db"]
        for folder in secrets[1:-1]:
            folder.mkdir(parents=True, exist_ok=True)
        secrets[-1].write_bytes(b"SQLite format 3\0")
        for path in [top, *top.rglob("*")]:
            if not path.is_symlink():
                os.chmod(path, 0o755 if path.is_dir() else 0o644)
        monkeypatch.setattr(classroom, "HUB_DIR", checkout / "hub")
        env = {"ATTENTION_LAB_COURSE": str(course)}

        with pytest.raises(RuntimeError) as refused:  # (its first check: no admin needed)
            with classroom.running_hub(env=env, admin_password=None):
                pass
        message = str(refused.value)
        print(f"\nthe hub with a readable checkout and course folder: {message[-1500:]}")
        for path in secrets:
            assert f"  {path}\n      fix: chmod o-rwx {path}" in message, path
        assert f"chmod o-rwx {checkout} (" in message  # the whole checkout at once
        # the commands it names are enough: the hub gets past this check (to the next one,
        # the admin's password, which this start leaves out)
        for path in (checkout, course):
            os.chmod(path, 0o750)
        with pytest.raises(RuntimeError) as next_check:
            with classroom.running_hub(env=env, admin_password=None):
                pass
        assert "the admin, teacher, has no password" in str(next_check.value)
        assert "can read what holds solutions" not in str(next_check.value)
    finally:
        shutil.rmtree(top, ignore_errors=True)


# --- 10: memory, where cgroups are not writable ---------------------------------------------


def test_10_the_fallback_without_cgroups_limits_every_process(classroom):
    """Where cgroups are not writable the spawner sets RLIMIT_AS (twice mem_limit: address
    space) on every process: torch imports, and a process that asks for 3 GiB under a
    1 GiB mem_limit gets a MemoryError (the spawner's own preexec_fn, as
    ATTENTION_LAB_HUB_MEMORY=rlimit chooses it)."""
    script = f"""
import subprocess, sys, types
sys.path.insert(0, {str(classroom.HUB_DIR)!r})
import classroom_hub as ch
if not hasattr(ch, "choose_memory_limiter"):
    sys.exit("this hub has no memory limiter")
ch.SETTINGS.prefix = ""
ch.SETTINGS.memory, why = ch.choose_memory_limiter("rlimit")
user = types.SimpleNamespace(name="nobody", url="/user/nobody/", id=0, orm_user=None)
spawner = ch.ClassroomSpawner(user=user, mem_limit=1024 * 2**20)
code = "import torch; print('torch', torch.__version__)" + {ALLOCATE.format(mib=3072)!r}
r = subprocess.run([sys.executable, "-c", code], preexec_fn=spawner.make_preexec_fn("nobody"),
                   capture_output=True, text=True)
print(why, r.returncode, r.stdout.replace(chr(10), ' '), r.stderr.strip().splitlines()[-1:])
"""
    python = str(classroom.HUB_VENV / "bin" / "python")
    r = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=300)
    print(f"\nmem_limit 1 GiB, RLIMIT_AS, torch imported, 3 GiB asked for: {r.stdout.strip()}")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "torch" in r.stdout and "MemoryError" in r.stdout
    assert "touched" not in r.stdout


# --- 11: disk, a home from before the limit ---------------------------------------------------

MIGRATE = """
import logging, os, pwd, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import classroom_hub as ch
if not hasattr(ch, "mount_home"):
    sys.exit("this hub has no disk limit")
state = Path(tempfile.mkdtemp(prefix="attention-lab-hub-"))
ch.SETTINGS.state, ch.SETTINGS.disk_limit, ch.SETTINGS.prefix = state, 64 * 2**20, sys.argv[2]
name = ch.system_user("x")
subprocess.run(["useradd", "--create-home", "--user-group", name], check=True)
pw = pwd.getpwnam(name)
home = Path(pw.pw_dir)
subprocess.run(["runuser", "-u", name, "--", "sh", "-c", "cd && mkdir work && echo hi > work/a "
                "&& ln -s /etc/shadow link"], check=True)
files = lambda: sorted(str(p.relative_to(home)) for p in home.rglob("*"))
before = files()
ch.mount_home(pw)
print(os.path.ismount(home), before == files(), os.readlink(home / "link"),
      os.stat(home / "work/a").st_uid == pw.pw_uid, (home / "work/a").read_text().strip())
ch.unmount_home(home, logging.getLogger())
print(list(home.iterdir()))
ch.remove_system_user("x", logging.getLogger())
print(sorted(p.suffix for p in (state / "deleted").iterdir()), os.path.exists(home))
subprocess.run(["rm", "-rf", str(state)])
"""


def test_11_a_home_from_before_the_limit_moves_into_its_image(classroom):
    """A class that ran before the disk limit: the first spawn with it copies the home's files
    into its new image (a link stays a link, owners stay), and nothing is left under the mount
    point; deleting the student archives the image."""
    prefix = f"alab-test-{os.getpid() % 10000}-"
    python = str(classroom.HUB_VENV / "bin" / "python")
    try:
        r = subprocess.run(
            [python, "-c", MIGRATE, str(classroom.HUB_DIR), prefix], capture_output=True, text=True
        )
    finally:
        classroom.remove_users(prefix)
    print(f"\na home with files, then its image: {r.stdout.strip()}")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n") == ["True True /etc/shadow True hi", "[]", "['.img'] False", ""]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-s", "-m", "hub"]))
