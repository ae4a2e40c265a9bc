"""The command-line demo: ``attention-lab demo`` (or ``make demo``).

Trains ``TinyLM`` on the copy task, prints the loss per epoch (starting near
ln 64 = 4.16), prints one head's weights as a text heatmap and saves a PNG of all heads
(to ``artifacts/``, which the repository ignores).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from .config import TinyLMConfig
from .i18n import N_, _, error_text
from .tasks import MIN_VOCAB, TASK_SETTINGS, TASKS, make_batch, task_name, token_labels
from .training import train_tiny_lm

DEFAULT_OUT = Path("artifacts") / "attention_heads.png"
DESCRIPTION = N_(
    """The command-line demo: ``attention-lab demo`` (or ``make demo``).

Trains ``TinyLM`` on the copy task, prints the loss per epoch (starting near
ln 64 = 4.16), prints one head's weights as a text heatmap and saves a PNG of all heads
(to ``artifacts/``, which the repository ignores).
"""
)  # the module's docstring, for --help in the reader's language


def run(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="attention-lab demo", description=_(DESCRIPTION))
    parser.add_argument("--task", default="copy", choices=TASKS)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--context-length", type=int, default=12)
    parser.add_argument(
        "--vocab-size", type=int, default=None, help=_("default: the task's own (64; trigram 68)")
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--head", type=int, default=0, help=_("which head to print as text"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=_("where to save the PNG"))
    args = parser.parse_args(argv)
    if args.vocab_size is None:
        args.vocab_size = TASK_SETTINGS[args.task]["vocab_size"]
    if args.vocab_size < MIN_VOCAB[args.task]:
        parser.error(
            error_text(
                "--vocab-size={vocab} is too small for the {task} task's token ids; "
                "use --vocab-size={least} or more"
            ).format(vocab=args.vocab_size, task=args.task, least=MIN_VOCAB[args.task])
        )
    if not 0 <= args.head < args.n_heads:
        parser.error(
            error_text(
                "--head={head} does not exist with --n-heads={n_heads}; "
                "pick a head from 0 to {last}"
            ).format(head=args.head, n_heads=args.n_heads, last=args.n_heads - 1)
        )

    print(
        _(
            "TinyLM on the {task}: n_heads={n_heads}, d_model={d_model}, "
            "T={T}, vocab={vocab}, {epochs} epochs, CPU"
        ).format(
            task=task_name(args.task),
            n_heads=args.n_heads,
            d_model=args.d_model,
            T=args.context_length,
            vocab=args.vocab_size,
            epochs=args.epochs,
        )
    )
    config = TinyLMConfig(
        vocab_size=args.vocab_size,
        d_model=args.d_model,
        n_heads=args.n_heads,
        context_length=args.context_length,
    )
    model, history = train_tiny_lm(
        args.task, config, seed=args.seed, epochs=args.epochs, progress=False
    )
    print(
        _("loss before training: {loss:.3f}  (chance = ln {vocab} = {chance:.3f})").format(
            loss=history.initial_loss, vocab=args.vocab_size, chance=math.log(args.vocab_size)
        )
    )
    for epoch, loss in enumerate(history.epoch_losses, 1):
        print(_("epoch {epoch}: mean training loss {loss:.4f}").format(epoch=epoch, loss=loss))
    if history.held_out:
        final = _("held-out loss {loss:.4f}, accuracy {accuracy:.1%}, trained in {seconds:.2f} s")
    else:
        final = _(
            "fresh-batch loss {loss:.4f}, accuracy {accuracy:.1%}, trained in {seconds:.2f} s"
        )
    print(
        final.format(
            loss=history.final_loss, accuracy=history.final_accuracy, seconds=history.seconds
        )
    )

    g = torch.Generator().manual_seed(args.seed + 99)
    x, _targets = make_batch(args.task, 1, args.context_length, args.vocab_size, generator=g)
    with torch.no_grad():
        _logits, weights = model(x, return_weights=True)  # (1, H, T, T)
    from .viz.heatmaps import plot_heads, text_heatmap

    tokens = token_labels(args.task, x[0])
    print()
    print(
        _("head {head}, weights on one sequence (rows: query, columns: key):").format(
            head=args.head
        )
    )
    print(text_heatmap(weights[0, args.head], tokens=[str(i) for i in range(len(tokens))]))
    fig = plot_heads(
        weights[0],
        tokens=tokens,
        suptitle=_("TinyLM, {task}").format(task=task_name(args.task)),
        causal=True,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, facecolor="white")
    print(_("saved the per-head heatmaps to {path}").format(path=args.out))
