"""``python hub/classroom/capacity.py`` (``make bench-capacity``, part of ``make bench``):
what one student costs on the classroom hub of ``hub/``.

On a private hub (root only; ``classroom.py`` starts it), for one student's server:

- every notebook of the English edition run top to bottom in a fresh kernel, through the
  kernel API as a browser would: peak memory of the server and its kernel together (RSS, and
  PSS, which counts a shared page once across processes, so it is what adds up across a class),
  CPU-seconds of the server and kernel, and wall time;
- notebook 08 run by 1, 2 and 4 students at once: each one's wall time.

Writes ``bench-results/capacity.csv`` and ``capacity.md`` (the tables of the teacher's guide,
section "Running it for a class"). Not a timed test: the numbers depend on the machine and
on whatever else it runs.
"""

from __future__ import annotations

import argparse
import csv
import os
import pwd
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import classroom  # hub/classroom/classroom.py, beside this file

MB = 2**20
CONCURRENT = "08_training_copy_task.ipynb"


@dataclass
class Sample:
    peak_rss_mb: float = 0.0
    peak_pss_mb: float = 0.0
    cpu_s: float = 0.0


class Sampler:
    """Samples every process of one uid (the student's server and kernels) in a thread: the
    peak of their summed RSS and PSS, and the CPU time they used since ``start``."""

    def __init__(self, uid: int, interval: float = 0.25):
        self.uid, self.interval = uid, interval
        self.sample = Sample()
        self._cpu_start: dict[int, float] = {}
        self._cpu_last: dict[int, float] = {}
        self._stop = threading.Event()

    def _read(self, pss: bool) -> None:
        import psutil

        rss = pss_total = 0
        for p in classroom.processes_of(self.uid):
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    self._cpu_last[p.pid] = t.user + t.system
                    if pss:
                        m = p.memory_full_info()
                        rss += m.rss
                        pss_total += m.pss
                    else:
                        rss += p.memory_info().rss
            except psutil.Error:
                pass
        self.sample.peak_rss_mb = max(self.sample.peak_rss_mb, rss / MB)
        if pss:
            self.sample.peak_pss_mb = max(self.sample.peak_pss_mb, pss_total / MB)

    def __enter__(self):
        self._read(pss=True)
        self._cpu_start = dict(self._cpu_last)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(self.interval):
            n += 1
            self._read(pss=n % 4 == 0)  # PSS reads smaps: slower, so one sample in four

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample.cpu_s = sum(
            cpu - self._cpu_start.get(pid, 0.0) for pid, cpu in self._cpu_last.items()
        )


@dataclass
class NotebookRow:
    notebook: str
    cells: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    peak_pss_mb: float
    idle_server_rss_mb: float


def measure_notebooks(hub, name: str, token: str, notebooks: list[Path], log) -> list:
    uid = pwd.getpwnam(hub.system_user(name)).pw_uid
    server = hub.server(name, token)
    with Sampler(uid) as idle:
        time.sleep(1)
    rows = []
    for path in notebooks:
        t = time.perf_counter()
        with Sampler(uid) as s:
            with server.kernel() as k:
                cells = k.run_notebook(path)
        row = NotebookRow(
            path.stem,
            cells,
            round(time.perf_counter() - t, 1),
            round(s.sample.cpu_s, 1),
            round(s.sample.peak_rss_mb),
            round(s.sample.peak_pss_mb),
            round(idle.sample.peak_rss_mb),
        )
        log(
            f"  {row.notebook:<28} {row.wall_s:6.1f} s wall {row.cpu_s:6.1f} CPU-s "
            f"peak RSS {row.peak_rss_mb:5.0f} MB, PSS {row.peak_pss_mb:5.0f} MB"
        )
        rows.append(row)
    return rows


def measure_concurrent(hub, tokens: dict, path: Path, counts: list[int], log) -> list:
    rows = []
    for n in counts:
        names = list(tokens)[:n]

        def run(name: str) -> float:
            t = time.perf_counter()
            with hub.server(name, tokens[name]).kernel() as k:
                k.run_notebook(path)
            return time.perf_counter() - t

        start = time.perf_counter()
        with ThreadPoolExecutor(n) as pool:
            walls = list(pool.map(run, names))
        row = {
            "students": n,
            "wall_each_s": " ".join(f"{w:.0f}" for w in walls),
            "slowest_s": round(max(walls), 1),
            "all_done_s": round(time.perf_counter() - start, 1),
        }
        log(f"  {n} at once: {row['wall_each_s']} s each, all done in {row['all_done_s']} s")
        rows.append(row)
    return rows


def markdown(rows: list, conc: list, threads: str, cores: int) -> str:
    lines = [
        "| notebook | cells | wall (s) | CPU (s) | peak RSS (MB) | peak PSS (MB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.notebook} | {r.cells} | {r.wall_s:.0f} | {r.cpu_s:.0f} | "
            f"{r.peak_rss_mb:.0f} | {r.peak_pss_mb:.0f} |"
        )
    lines += [
        "",
        f"| students running {Path(CONCURRENT).stem} at once ({cores} cores, "
        f"{threads} thread each) | wall time of each (s) | all done (s) |",
        "| ---: | --- | ---: |",
    ]
    for c in conc:
        lines.append(f"| {c['students']} | {c['wall_each_s']} | {c['all_done_s']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, log=print) -> int:
    parser = argparse.ArgumentParser(prog="python hub/classroom/capacity.py")
    parser.add_argument("--notebooks", nargs="*", help="names; default: every notebooks/*.ipynb")
    parser.add_argument("--concurrent", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        log("capacity: needs root (the hub runs each student as their own system user)")
        return 1
    threads = os.environ.get("ATTENTION_LAB_HUB_THREADS", "1")
    cores = os.cpu_count() or 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    classroom.build_hub_env(log)
    # the chapter as tools/hub_env.sh copied it beside the venv, with the package it installed
    chapter = classroom.CHAPTER
    names_given = [Path(n).name for n in args.notebooks or []]
    notebooks = [chapter / n for n in names_given] or sorted(chapter.glob("*.ipynb"))
    with classroom.private_checkout(), classroom.running_hub(prefix="alab-cap-") as hub:
        names = [f"c{i}" for i in range(1, max([1, *args.concurrent]) + 1)]
        for name in names:
            hub.create_student(name)
        tokens = {name: hub.token_for(name) for name in names}
        t = time.perf_counter()
        hub.start_server(names[0])
        log(
            f"one student's server ready in {time.perf_counter() - t:.1f} s; "
            f"{threads} thread per kernel (ATTENTION_LAB_HUB_THREADS), {cores} cores"
        )
        rows = measure_notebooks(hub, names[0], tokens[names[0]], notebooks, log)
        for name in names[1:]:
            hub.start_server(name)
        conc = measure_concurrent(hub, tokens, chapter / CONCURRENT, args.concurrent, log)
    with open(out / "capacity.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        w.writeheader()
        w.writerows(asdict(r) for r in rows)
        f.write("\n")
        w = csv.DictWriter(f, fieldnames=list(conc[0]))
        w.writeheader()
        w.writerows(conc)
    table = markdown(rows, conc, threads, cores)
    (out / "capacity.md").write_text(table)
    log("")
    log(table)
    took = time.perf_counter() - start
    log(f"wrote {out / 'capacity.csv'} and {out / 'capacity.md'} in {took:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
