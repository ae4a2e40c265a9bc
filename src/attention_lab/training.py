"""The training loop for the toy tasks (notebook 08; ``python -m attention_lab demo``)."""

from __future__ import annotations

import inspect
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from . import train_once
from ._checks import check_positive
from .config import FIELDS, TinyLMConfig
from .device import cpu_threads
from .i18n import _, error_text
from .tasks import IGNORE_INDEX, make_batch, rows_in, task_name, task_settings
from .tiny_lm import TinyLM

EVAL_ROWS, EVAL_SEED = 512, 1234  # the evaluation batch every training run reports on


@dataclass
class TrainHistory:
    """What ``train`` measured. Losses are cross-entropy in nats; chance is ln(vocab_size)."""

    task: str
    initial_loss: float  # loss on the evaluation rows before the first step
    step_losses: list[float] = field(default_factory=list)  # one per optimiser step
    step_accuracies: list[float] = field(default_factory=list)  # on the same training batch
    epoch_losses: list[float] = field(default_factory=list)  # mean training loss per epoch
    final_loss: float = math.nan  # loss on the evaluation rows after training
    final_accuracy: float = math.nan  # next-token accuracy on the evaluation rows
    seconds: float = 0.0  # wall-clock time of the training loop
    eval_rows: int = 0  # how many rows the evaluation used
    # True when none of the evaluation rows is in the training set (a real held-out set).
    # The copy task has only vocab_size different rows, all of them in any sizeable
    # training set: its evaluation is a fresh batch of rows the model has seen.
    held_out: bool = False


def _loss_and_accuracy(logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, float]:
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX)
    keep = y != IGNORE_INDEX
    accuracy = (logits.argmax(-1)[keep] == y[keep]).float().mean().item()
    return loss, accuracy


@torch.no_grad()
def evaluate(
    model: TinyLM,
    task: str = "copy",
    n_rows: int = EVAL_ROWS,
    seed: int = EVAL_SEED,
    exclude: torch.Tensor | None = None,
) -> tuple[float, float]:
    """``(loss, accuracy)`` on a fresh batch of ``n_rows`` rows of ``task`` drawn with ``seed``.

    A fresh batch is not a held-out set by itself: it may repeat rows the model trained on
    (for the copy task it always does). Pass the training inputs as ``exclude`` (N, T) to drop
    every row that appears among them first; then the numbers are on rows the model never
    saw, and a ValueError says so when no such row is left.
    """
    x, y, held_out = _eval_batch(model, task, n_rows, seed, exclude)
    if exclude is not None and not held_out:
        raise ValueError(
            error_text(
                "every one of the {n_rows} fresh {task} rows is in `exclude`: the task has too "
                "few different rows for a held-out set; evaluate on a fresh batch (exclude=None)"
            ).format(n_rows=n_rows, task=repr(task))
        )
    return _evaluate_rows(model, x, y)


def _eval_batch(
    model: TinyLM, task: str, n_rows: int, seed: int, exclude: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """The one held-out evaluation batch: ``n_rows`` fresh rows of ``task`` drawn with
    ``seed``, without every row that appears in ``exclude`` (N, T) -- unless that would leave
    none (the copy task has only ``vocab_size`` different rows): then all of them.
    Returns ``(x, y, held_out)``; ``held_out`` is True when rows were left out and some remain.
    """
    g = torch.Generator().manual_seed(seed)
    x, y = make_batch(task, n_rows, model.context_length, model.vocab_size, generator=g)
    if exclude is None:
        return x, y, False
    unseen = ~rows_in(x, exclude.to(x.device))  # (n_rows,)
    if not unseen.any():
        return x, y, False
    return x[unseen], y[unseen], True


@torch.no_grad()
def _evaluate_rows(model: TinyLM, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    loss, accuracy = _loss_and_accuracy(model(x.to(device)), y.to(device))
    model.train(was_training)
    return loss.item(), accuracy


def train(
    model: TinyLM,
    task: str = "copy",
    epochs: int | None = None,
    n_rows: int | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    seed: int = 0,
    progress: bool = True,
    threads: int | None = 1,
    on_step: Callable[[int, TinyLM], None] | None = None,
) -> TrainHistory:
    """Train ``model`` in place with Adam on ``n_rows`` rows of ``task`` for ``epochs`` passes.

    An option left out (None) is the task's own, from its row of ``tasks.TASK_SETTINGS``, the
    one table of training settings (``train`` has no defaults of its own): for copy,
    previous, repeat, lookup and trigram 3 epochs of 2048 rows in batches of 32 at lr 1e-2
    (with ``TinyLM()``'s defaults, n_heads=4, d_model=32, T=12, vocab 64, the copy loss falls
    from about ln 64 = 4.16 to below 0.01); for induction one epoch of 16,000 rows in batches
    of 64 at lr 3e-3. The data and its order come from ``seed``; seed the model's
    initialisation yourself.

    The losses before and after are measured on one evaluation batch (512 rows, seed 1234)
    from which every row of the training set has been removed -- a real held-out set --
    unless no row is left (the copy task has only ``vocab_size`` different rows): then on
    the whole fresh batch. ``history.held_out`` says which.

    ``threads`` is how many CPU threads torch uses while training (restored afterwards;
    ``None`` leaves it alone). A model this small trains fastest on one: with the other
    core busy, this setting took 1.3 s on one thread and 9.9 s on two.

    ``on_step(step, model)``, if given, is called once before the first optimiser step
    (step 0) and after every step (1, 2, ...): a place to measure the model while it trains
    (``induction.InductionRecorder``). It must leave the training alone: no change to the
    model's weights or mode and no draw from torch's global random generator (the data order
    has its own generator); then the run is bitwise the one without it (tested).
    """
    return _train_run(
        model, task, epochs=epochs, n_rows=n_rows, batch_size=batch_size, lr=lr, seed=seed,
        progress=progress, threads=threads, on_step=on_step,
    )  # fmt: skip


def _train_run(
    model, task, *, epochs, n_rows, batch_size, lr, seed, progress, threads, on_step, tick=None
) -> TrainHistory:
    """``train``; ``tick(n)``, if given, is told of every ``n`` steps done (one bar that counts
    several runs). In a test run that keeps finished runs (``train_once.py``: off unless
    ATTENTION_LAB_TRAIN_ONCE is set) the result of exactly this run may be loaded instead."""
    options = _train_options(task, epochs=epochs, n_rows=n_rows, batch_size=batch_size, lr=lr)
    check_on_step(on_step)

    def fresh() -> TrainHistory:
        return _train(
            model, task, seed=seed, progress=progress, on_step=on_step, tick=tick, **options
        )

    with cpu_threads(threads):
        history, loaded = train_once.run(
            model, fresh, TrainHistory, on_step=on_step, task=task, seed=seed, **options
        )
    if loaded:  # the bars count the steps as if it had trained
        steps = len(history.step_losses)
        if tick is not None:
            tick(steps)
        if progress:
            from tqdm.auto import tqdm  # imported here: it pulls in IPython and ipywidgets

            with tqdm(total=steps, desc=task_name(task)) as bar:
                bar.update(steps)
                bar.set_postfix(loss=f"{history.step_losses[-1]:.3f}")
    return history


def _train_options(task: str, **given) -> dict:
    """``train``'s budget options (epochs, n_rows, batch_size, lr): each one given, or else
    the task's own from its row of ``tasks.TASK_SETTINGS``."""
    row = task_settings(task)
    names = ("epochs", "n_rows", "batch_size", "lr")
    return {k: row[k] if given.get(k) is None else given[k] for k in names}


def check_on_step(on_step) -> None:
    """A clear error for an ``on_step`` that is neither a function nor None."""
    if on_step is not None and not callable(on_step):
        raise TypeError(
            error_text(
                "on_step must be a function on_step(step, model) or None, got {type}; pass "
                "e.g. on_step=InductionRecorder(rows)"
            ).format(type=type(on_step).__name__)
        )


def _train(
    model, task, *, epochs, n_rows, batch_size, lr, seed, progress, on_step=None, tick=None
) -> TrainHistory:
    for name, value in (("epochs", epochs), ("n_rows", n_rows), ("batch_size", batch_size)):
        check_positive(name, value)
    from tqdm.auto import tqdm  # imported here: it pulls in IPython and ipywidgets

    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    x, y = make_batch(task, n_rows, model.context_length, model.vocab_size, generator=g)
    x_eval, y_eval, held_out = _eval_batch(model, task, EVAL_ROWS, EVAL_SEED, exclude=x)
    history = TrainHistory(
        task=task,
        initial_loss=_evaluate_rows(model, x_eval, y_eval)[0],
        eval_rows=len(x_eval),
        held_out=held_out,
    )
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    steps_per_epoch = math.ceil(n_rows / batch_size)
    bar = tqdm(total=epochs * steps_per_epoch, desc=task_name(task), disable=not progress)
    model.train()
    if on_step is not None:
        on_step(0, model)
    start = time.perf_counter()
    step = 0
    for _epoch in range(epochs):
        order = torch.randperm(n_rows, generator=g)
        epoch_sum = 0.0
        for i in range(steps_per_epoch):
            rows = order[i * batch_size : (i + 1) * batch_size]
            loss, accuracy = _loss_and_accuracy(model(x[rows].to(device)), y[rows].to(device))
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            history.step_losses.append(loss.item())
            history.step_accuracies.append(accuracy)
            epoch_sum += loss.item()
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}")
            step += 1
            if tick is not None:
                tick(1)
            if on_step is not None:
                on_step(step, model)
        history.epoch_losses.append(epoch_sum / steps_per_epoch)
    history.seconds = time.perf_counter() - start
    bar.close()
    model.eval()
    history.final_loss, history.final_accuracy = _evaluate_rows(model, x_eval, y_eval)
    return history


def train_tiny_lm(
    task: str = "copy",
    config: TinyLMConfig | None = None,
    *,
    seed: int = 0,
    device: torch.device | str = "cpu",
    **kwargs,
) -> tuple[TinyLM, TrainHistory]:
    """Seed, build a ``TinyLM`` and ``train`` it on ``task``: one call per notebook result.

    With no other argument it trains the chapter's setting of that task (its row of
    ``tasks.TASK_SETTINGS``: vocabulary, context length, epochs, rows, batch size, lr; the
    other sizes are ``TinyLMConfig``'s defaults). Keywords change it: those that name a
    ``TinyLMConfig`` field (``n_heads=1``, ``positions=False``) change the model, the
    others (``epochs``, ``n_rows``, ``progress``, ...) go to ``train``. A ``config``
    replaces the table's model fields (the table's training options still apply).
    """
    model, options = _seeded_model(task, config, seed, device, kwargs)
    return model, train(model, task, seed=seed, **options)


def _seeded_model(
    task: str, config: TinyLMConfig | None, seed: int, device, kwargs: dict
) -> tuple[TinyLM, dict]:
    """``train_tiny_lm``'s model, seeded and built, and the options for ``train``."""
    settings = task_settings(task)
    table_fields = {k: settings.pop(k) for k in list(settings) if k in FIELDS}
    kwargs = dict(kwargs)
    fields = {k: kwargs.pop(k) for k in list(kwargs) if k in FIELDS}
    if config is None:
        config = TinyLMConfig(**table_fields)
    torch.manual_seed(seed)
    model = TinyLM(config.replace(**fields)).to(device)
    return model, {**settings, **kwargs}


def train_tiny_lms(
    runs: Iterable[Mapping],
    *,
    progress: bool = True,
    workers: int | None = None,
    **shared,
) -> list[tuple[TinyLM, TrainHistory]]:
    """``[train_tiny_lm(**shared, **run) for run in runs]``, with the trainings side by side
    on the machine's cores (``parallel_map``): the results are bitwise those of the loop, in
    less time (lesson 10's eleven models: 69 s in a loop, 47 s side by side on 2 cores).

    Each run is a dict of ``train_tiny_lm`` keywords: ``task``, ``seed``, config fields
    (``n_layers=1``) and ``train`` options (``n_rows``, ``on_step``); ``shared`` holds those
    common to every run (``task="induction"``). The models are seeded and built one after
    another in the order of ``runs``, as the loop builds them, so torch's global generator
    ends where the loop leaves it. The longest runs start first, so that no core idles at the
    end. One bar counts the steps of all runs.
    """
    runs = list(runs)
    for i, run in enumerate(runs):
        if not isinstance(run, Mapping) or "progress" in run:
            raise TypeError(
                error_text(
                    "each run must be a dict of train_tiny_lm keywords without 'progress' "
                    "(one bar counts every run), got {value!r} at index {i}; write e.g. "
                    "runs=[dict(seed=0), dict(seed=1, n_layers=1)]"
                ).format(value=run, i=i)
            )
    jobs = []  # train's arguments, the model's included, built in the order of runs
    for run in runs:
        options = {**shared, **run}
        task, seed = options.pop("task", "copy"), options.pop("seed", 0)
        device = options.pop("device", "cpu")
        model, options = _seeded_model(task, options.pop("config", None), seed, device, options)
        check_on_step(options.get("on_step"))
        try:  # train's keywords, checked before any run starts, with train's defaults
            call = inspect.signature(train).bind(model, task, seed=seed, progress=False, **options)
        except TypeError as error:
            raise TypeError(f"train() {error}") from None  # Python's words, as train's own call
        call.apply_defaults()
        jobs.append(call.arguments)
    from tqdm.auto import tqdm  # imported here: it pulls in IPython and ipywidgets

    def rows_seen(job: dict) -> tuple[int, int]:  # (steps, rows per step)
        o = _train_options(job["task"], **{k: job[k] for k in ("epochs", "n_rows", "batch_size")})
        return o["epochs"] * math.ceil(o["n_rows"] / o["batch_size"]), o["batch_size"]

    seen = [rows_seen(job) for job in jobs]
    lock = threading.Lock()
    bar = tqdm(
        total=sum(steps for steps, _ in seen),
        desc=_("{n} models").format(n=len(jobs)),
        disable=not progress,
    )

    def tick(n: int) -> None:
        with lock:
            bar.update(n)

    def one(i: int) -> TrainHistory:
        return _train_run(**jobs[i], tick=tick)

    cost = [  # token-layers computed: what a step costs, roughly, times the steps
        steps * rows * job["model"].context_length * len(job["model"].attention_layers())
        for (steps, rows), job in zip(seen, jobs)
    ]
    longest_first = sorted(range(len(jobs)), key=lambda i: -cost[i])
    histories = dict(zip(longest_first, parallel_map(one, longest_first, workers=workers)))
    bar.close()
    return [(job["model"], histories[i]) for i, job in enumerate(jobs)]


def parallel_map(fn: Callable, items: Iterable, workers: int | None = None) -> list:
    """``[fn(item) for item in items]``, computed on up to ``workers`` threads at once (default:
    the machine's CPU count), the results in the order of ``items``.

    For training several small models side by side. torch lets go of Python's lock while an
    operation computes, so two models train on two cores in about half the time of a loop
    (2.08 times faster, four of lesson 12's models on 2 cores). torch runs on one CPU thread
    for the whole map (then the old number is put back), so each model computes exactly as it
    would in the loop: the results are bitwise the same (tests/library/test_training.py).

    ``fn`` must not draw from torch's global random generator: threads would take its numbers
    in whatever order they happen to run. Make and seed each model first, in the loop that
    builds ``items``, and give the data a ``torch.Generator`` of its own. A map whose ``fn``
    drew from it raises an error instead of returning results that depend on timing.
    """
    items = list(items)
    workers = (os.cpu_count() or 1) if workers is None else check_positive("workers", workers)
    before = torch.random.get_rng_state()
    with cpu_threads(1):
        if workers == 1 or len(items) <= 1:
            results = [fn(item) for item in items]
        else:
            with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
                results = list(pool.map(fn, items))
    if not torch.equal(torch.random.get_rng_state(), before):
        raise RuntimeError(
            error_text(
                "the function given to parallel_map drew from torch's global random generator, "
                "so its results depend on which thread ran first; make and seed each model "
                "before parallel_map, and give the data its own torch.Generator"
            )
        )
    return results


def compare_n_heads(
    task: str = "previous",
    n_heads: tuple[int, ...] = (4, 8),
    seeds: range | tuple[int, ...] = range(5),
    config: TinyLMConfig | None = None,
    metric: str = "loss",
    **train_kwargs,
) -> dict[int, list[float]]:
    """Train one model per (n_heads, seed); return ``{n_heads: [final loss per seed]}``.

    ``metric="accuracy"`` returns the held-out accuracies instead of the losses.

    One seed is one anecdote: a claim such as "8 heads end lower than 4" holds only if it
    holds across seeds. ``seed`` sets both the initialisation and the data order, so the
    two head counts see the same data for the same seed. Keywords go to
    ``train_tiny_lm`` (config fields such as ``d_model``, or ``train`` options).
    """
    if metric not in ("loss", "accuracy"):
        raise ValueError(
            error_text("metric={metric} is not known; use 'loss' or 'accuracy'").format(
                metric=repr(metric)
            )
        )
    train_kwargs.setdefault("progress", False)
    return {
        h: [
            getattr(
                train_tiny_lm(task, config, n_heads=h, seed=s, **train_kwargs)[1],
                f"final_{metric}",
            )
            for s in seeds
        ]
        for h in n_heads
    }
