"""Train each model once per test run: a store of finished ``train`` runs, off by default.

``make test`` runs every notebook twice (the English and the Chinese edition), and several
notebooks and tests train the same small models (notebook 11 trains notebook 10's two-layer
model as its positive control). The test run sets ``ATTENTION_LAB_TRAIN_ONCE`` to a fresh
folder; ``train`` then keeps each run it finishes there, and a later call that would train
exactly the same model (in any process: the notebooks' kernels, the browser tests' servers)
loads the weights and the history instead of training again. Unset -- a reader's run,
``make lab``, Colab -- nothing here is used and ``train`` trains.

What "exactly the same" means is the key: the model's class, ``repr`` and ``config`` (every
size and switch, those without weights such as ``residual`` too), its initial weights byte for
byte with their dtype and device, the task, the budget options, the data seed, torch's CPU
thread count, the attention kernels it may pick (``sdpa_kernel``) and its deterministic mode,
torch's version, the pinned kernels (``ATEN_CPU_CAPABILITY``, ``MKL_CBWR``) and the source of
every module of this package. Each of them changes what training computes. A run that draws
from torch's global random generator (dropout) depends on its state too: such a run is never
stored, and trains every time (the chapter's runs draw nothing: their data order has its own
generator). A run with an ``on_step`` is kept only when the callback can save and restore what
it measured (``state_dict`` and ``load_state_dict``, as ``induction.InductionRecorder`` does):
its inputs join the key and what it recorded is stored beside the weights. Any other callback
trains every time.

A stored run comes back bitwise: the weights, every number of the history, what the recorder
recorded and each module's train or eval mode (tests/library/test_train_once.py checks each
against a run that trains). Two processes that want the same run at once take turns (a file
lock): the second loads what the first stored. Files are written whole, then renamed, and read
with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import torch

ENV = "ATTENTION_LAB_TRAIN_ONCE"


def folder() -> Path | None:
    """The folder finished runs are kept in, or None (the default: train every time)."""
    where = os.environ.get(ENV, "")
    return Path(where) if where else None


def reusable(on_step) -> bool:
    """Whether a run with this ``on_step`` can be stored: none, or one that saves its state."""
    return on_step is None or (
        callable(getattr(on_step, "state_dict", None))
        and callable(getattr(on_step, "load_state_dict", None))
    )


def run(
    model: torch.nn.Module,
    train: Callable[[], object],
    history_type: type,
    on_step=None,
    **settings,
):
    """``train()``, or the stored result of the same run; ``settings`` are what else decides it
    (task, budget, seed). Returns ``(history, loaded)``; when loaded, ``model`` (and ``on_step``)
    hold what the stored run left."""
    where = folder()
    if where is None or not reusable(on_step):
        return train(), False
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{key(model, on_step, settings)}.pt"
    with _locked(path.with_suffix(".lock")):
        if path.exists():
            stored = torch.load(path, weights_only=True)
            model.load_state_dict(stored["weights"])
            if on_step is not None:
                on_step.load_state_dict(stored["on_step"])
            for module, training in zip(model.modules(), stored["modes"], strict=True):
                module.training = training
            _log(where, "loaded", path.stem, settings)
            return history_type(**stored["history"]), True
        rng = torch.get_rng_state()
        history = train()
        if not torch.equal(rng, torch.get_rng_state()):  # it drew: its result depends on rng
            _log(where, "not kept (drew random numbers)", path.stem, settings)
            return history, False
        stored = {
            "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "history": dataclasses.asdict(history),
            "modes": [m.training for m in model.modules()],
            "on_step": None if on_step is None else on_step.state_dict(),
        }
        part = path.with_suffix(f".{os.getpid()}.part")
        torch.save(stored, part)
        os.replace(part, path)
        _log(where, "trained", path.stem, settings)
        return history, False


def key(model: torch.nn.Module, on_step, settings: dict) -> str:
    """The run's name: a digest of everything that decides what training computes."""
    h = hashlib.sha256()
    facts = (
        type(model).__module__,
        type(model).__qualname__,
        repr(model),
        repr(getattr(model, "config", None)),  # switches without weights (residual) too
        sorted(settings.items()),
        torch.get_num_threads(),
        _kernel_switches(),
        torch.__version__,
        os.environ.get("ATEN_CPU_CAPABILITY"),
        os.environ.get("MKL_CBWR"),
        _source_digest(),
    )
    h.update(repr(facts).encode())
    _add_tensors(h, model.state_dict())
    if on_step is not None:
        h.update(b"on_step " + type(on_step).__qualname__.encode())
        _add_tensors(h, on_step.state_dict())
    return h.hexdigest()[:32]


def _kernel_switches() -> tuple:
    """Which attention kernels torch may pick (``sdpa_kernel`` changes them), and whether it
    must pick deterministic ones: each changes the numbers training computes."""
    cuda = torch.backends.cuda
    return (
        cuda.flash_sdp_enabled(),
        cuda.mem_efficient_sdp_enabled(),
        cuda.math_sdp_enabled(),
        cuda.cudnn_sdp_enabled(),
        torch.are_deterministic_algorithms_enabled(),
    )


def _add_tensors(h, values: dict) -> None:
    """Feed ``h`` each name and value: tensors byte for byte, lists of them in turn, the rest
    by ``repr``."""
    for name, value in sorted(values.items()):
        h.update(f"|{name}|".encode())
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if isinstance(item, torch.Tensor):
                t = item.detach().cpu().reshape(-1).contiguous()
                h.update(f"{t.dtype}{tuple(item.shape)}{item.device}".encode())
                h.update(t.view(torch.uint8).numpy().tobytes())
            else:
                h.update(repr(item).encode())


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    """A digest of every module of this package: a change to the code is another run."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@contextmanager
def _locked(path: Path):
    """Hold an exclusive lock on ``path`` (created if missing) for the block."""
    import fcntl  # POSIX only; the store is a test run's, and the tests run on Linux

    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _log(where: Path, what: str, name: str, settings: dict) -> None:
    """One line per run in ``log.txt``: how many were trained and how many loaded."""
    task = settings.get("task", "?")
    with open(where / "log.txt", "a", encoding="utf-8") as log:
        log.write(f"{what} {name} {task} pid={os.getpid()}\n")
