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
from .tasks import MIN_VOCAB, TASK_SETTINGS, TASKS, make_batch, token_labels
from .training import train_tiny_lm

DEFAULT_OUT = Path("artifacts") / "attention_heads.png"


def run(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="attention-lab demo", description=__doc__)
    parser.add_argument("--task", default="copy", choices=TASKS)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--context-length", type=int, default=12)
    parser.add_argument(
        "--vocab-size", type=int, default=None, help="default: the task's own (64; trigram 68)"
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--head", type=int, default=0, help="which head to print as text")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to save the PNG")
    args = parser.parse_args(argv)
    if args.vocab_size is None:
        args.vocab_size = TASK_SETTINGS[args.task]["vocab_size"]
    if args.vocab_size < MIN_VOCAB[args.task]:
        parser.error(
            f"--vocab-size={args.vocab_size} is too small for the {args.task} task's token ids; "
            f"use --vocab-size={MIN_VOCAB[args.task]} or more"
        )
    if not 0 <= args.head < args.n_heads:
        parser.error(
            f"--head={args.head} does not exist with --n-heads={args.n_heads}; "
            f"pick a head from 0 to {args.n_heads - 1}"
        )

    print(
        f"TinyLM on the {args.task} task: n_heads={args.n_heads}, d_model={args.d_model}, "
        f"T={args.context_length}, vocab={args.vocab_size}, {args.epochs} epochs, CPU"
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
        f"loss before training: {history.initial_loss:.3f}  "
        f"(chance = ln {args.vocab_size} = {math.log(args.vocab_size):.3f})"
    )
    for epoch, loss in enumerate(history.epoch_losses, 1):
        print(f"epoch {epoch}: mean training loss {loss:.4f}")
    print(
        f"{'held-out' if history.held_out else 'fresh-batch'} loss {history.final_loss:.4f}, "
        f"accuracy {history.final_accuracy:.1%}, "
        f"trained in {history.seconds:.2f} s"
    )

    g = torch.Generator().manual_seed(args.seed + 99)
    x, _ = make_batch(args.task, 1, args.context_length, args.vocab_size, generator=g)
    with torch.no_grad():
        _, weights = model(x, return_weights=True)  # (1, H, T, T)
    from .plotting import plot_heads, text_heatmap

    tokens = token_labels(args.task, x[0])
    print(f"\nhead {args.head}, weights on one sequence (rows: query, columns: key):")
    print(text_heatmap(weights[0, args.head], tokens=[str(i) for i in range(len(tokens))]))
    fig = plot_heads(weights[0], tokens=tokens, suptitle=f"TinyLM, {args.task} task", causal=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, facecolor="white")
    print(f"saved the per-head heatmaps to {args.out}")
