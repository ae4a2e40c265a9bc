"""Lesson 11 · attention on real text (notebooks/11_attention_on_real_text.ipynb): the loss of a
``CharLM`` with chosen heads replaced by their mean output, written with forward hooks and
checked against ``interventions.ablate_heads(..., how="mean")``; and the copy test (is a
random string's second copy easier?) with ids between the copies, checked on a model made to
copy and on one that cannot.
"""

from __future__ import annotations

import math

import torch

from ..charlm import CharLM, CharLMConfig, evaluate_loss
from ..i18n import N_, _
from ..interventions import ablate_heads
from .core import Wrong, call, checker

_TOLERANCE = 1e-4  # nats: the same model, the same sums in another order


def _checker_model() -> CharLM:
    """A small CharLM (2 blocks of 4 heads), seeded by the checker, whose value vectors have a
    mean far from 0 (a zero and a mean ablation differ) and whose logits are sharp (a small
    change of one head moves the loss by more than the tolerance)."""
    model = CharLM(CharLMConfig(vocab_size=11, context_length=8, d_model=16, n_heads=4))
    with torch.no_grad():
        for block in model.blocks:
            D = block.attn.d_model
            block.attn.qkv.bias[2 * D :] += torch.randn(D)  # the V part of the fused bias
        model.lm_head.weight *= 10.0
    return model.eval()


def _variant_loss(
    model: CharLM,
    ids: torch.Tensor,
    reference: torch.Tensor,
    heads,
    *,
    how: str = "mean",
    means_from: str = "reference",
    place: str = "input",
    part: str = "head",
) -> float:
    """The loss over ``ids`` with ``heads`` replaced, with one of the checker's mistakes built
    in: ``how`` "mean", "zero", "position" (a mean per position) or "scalar" (one number per
    head); ``means_from`` "reference", "ids" (the evaluated text) or "ablated" (each layer's
    mean taken with the earlier layers already replaced); ``place`` "input" or "output" of
    out_proj; ``part`` "head" (columns h·d_head onwards) or "unscaled" (columns h onwards)."""
    attns = [block.attn for block in model.blocks]
    source = reference
    if means_from == "ids":
        T = model.context_length
        n = (len(ids) - 1) // T
        source = ids[: n * T].view(n, T)  # (n, T): the windows evaluate_loss reads
    chosen: dict[int, list[int]] = {}
    for layer, head in heads:
        chosen.setdefault(layer, []).append(head)

    def columns(layer: int, head: int) -> slice:
        d = attns[layer].d_head
        start = head * d if part == "head" else head
        return slice(start, start + d)

    def seen_by(layer: int) -> torch.Tensor:
        """(B, T, D): what out_proj of ``layer`` takes in (or gives out) on the source."""
        seen = []

        def grab(_module, args, output):
            seen.append(args[0] if place == "input" else output)

        handle = attns[layer].out_proj.register_forward_hook(grab)
        try:
            with torch.no_grad():
                model(source)
        finally:
            handle.remove()
        return seen[0]

    def hook_for(layer: int, value: torch.Tensor | None):
        def replace(merged: torch.Tensor) -> torch.Tensor:
            merged = merged.clone()  # (B, T, D)
            for head in chosen[layer]:
                cols = columns(layer, head)
                merged[..., cols] = 0.0 if value is None else value[..., cols]
            return merged

        if place == "input":
            return attns[layer].out_proj.register_forward_pre_hook(
                lambda _module, args: (replace(args[0]), *args[1:])
            )
        return attns[layer].out_proj.register_forward_hook(
            lambda _module, _args, output: replace(output)
        )

    handles = []
    try:
        values = {}
        for layer in sorted(chosen):
            if how == "zero":
                values[layer] = None
            else:
                merged = seen_by(layer)  # (B, T, D)
                if how == "mean":
                    values[layer] = merged.mean(dim=(0, 1))  # (D,)
                elif how == "position":
                    values[layer] = merged.mean(dim=0)  # (T, D)
                else:
                    d = attns[layer].d_head
                    per_head = merged.unflatten(-1, (-1, d)).mean(dim=(0, 1, 3))  # (H,)
                    values[layer] = per_head.repeat_interleave(d)  # (D,)
            if means_from == "ablated":  # the next layer's mean is taken with this one replaced
                handles.append(hook_for(layer, values[layer]))
        if means_from != "ablated":
            handles += [hook_for(layer, values[layer]) for layer in sorted(chosen)]
        return evaluate_loss(model, ids)
    finally:
        for handle in handles:
            handle.remove()


def _number(value, what: str) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise Wrong(
        _("{what} should be one number, but your function returned a {type}").format(
            what=what, type=type(value).__name__
        ),
        _("did you forget the `return` line?")
        if value is None
        else _("return the loss as a float: evaluate_loss(model, ids)"),
    )


def _hooks_left(model: CharLM) -> int:
    return sum(
        len(module._forward_pre_hooks) + len(module._forward_hooks) for module in model.modules()
    )


@checker("11", N_("return the validation loss as a float, and remove your hooks"))
def check_mean_ablated_loss(fn) -> str:
    """``fn(model, ids, reference, heads) -> float``: ``evaluate_loss(model, ids)`` with each
    (layer, head) of ``heads`` handing out_proj its mean output over the ``reference`` windows
    (mean over batch and positions, taken from the model as it is); the model unchanged after."""
    model = _checker_model()
    ids = torch.randint(0, 11, (8 * 16 + 1,))  # 16 windows of 8 characters, and one target
    reference = torch.randint(0, 11, (24, 8))  # (B, T): the windows the means come from
    state = {name: p.detach().clone() for name, p in model.state_dict().items()}
    base = evaluate_loss(model, ids)
    every = [(layer, head) for layer in range(2) for head in range(4)]
    for heads in ([(0, 1)], [(1, 2)], [(0, 3), (1, 0)], []):
        with ablate_heads(model, heads, how="mean", reference=reference):
            want = evaluate_loss(model, ids)
        got = call(fn, model, ids.clone(), reference.clone(), list(heads))
        where = _("with heads={heads}").format(heads=heads)
        got = _number(got, _("the loss {where}").format(where=where))
        left = _hooks_left(model)
        if left:
            raise Wrong(
                _("{where}, your function left {n} hook(s) on the model").format(
                    where=where, n=left
                ),
                _(
                    "keep the handle register_forward_pre_hook returns and call "
                    "handle.remove() once the loss is measured (try/finally)"
                ),
            )
        changed = [
            name for name, p in model.state_dict().items() if not torch.equal(p, state[name])
        ]
        if changed:
            raise Wrong(
                _("{where}, your function changed the model's {names}").format(
                    where=where, names=", ".join(changed[:3])
                ),
                _("change what out_proj receives with a hook, not the parameters"),
            )
        if math.isclose(got, want, abs_tol=_TOLERANCE):
            continue
        _diagnose(got, want, base, where, model, ids, reference, heads, every)
    return _(
        "the loss with chosen heads replaced by their mean output over the reference windows, "
        "the model left as it was"
    )


def _diagnose(got, want, base, where, model, ids, reference, heads, every) -> None:
    """Raise Wrong naming the variant whose loss matches ``got``, or the gap."""

    def matches(**options) -> bool:
        return math.isclose(
            got, _variant_loss(model, ids, reference, **options), abs_tol=_TOLERANCE
        )

    if heads and math.isclose(got, want - base, abs_tol=_TOLERANCE):
        raise Wrong(
            _("{where}, you returned the rise of the loss, {rise:.4f}, not the loss").format(
                where=where, rise=want - base
            ),
            _("return the loss itself; the rise is the loss minus evaluate_loss(model, ids)"),
        )
    if heads and math.isclose(got, base, abs_tol=_TOLERANCE):
        raise Wrong(
            _(
                "{where}, your loss is the model's own, {base:.4f}: nothing was replaced "
                "while the loss was measured"
            ).format(where=where, base=base),
            _(
                "register the hook on model.blocks[layer].attn.out_proj before evaluate_loss, "
                "and remove it only after"
            ),
        )
    mistakes = (
        (
            dict(how="zero"),
            _("the heads' outputs were set to zero, not to their mean"),
            _(
                "a zero output is a state the model never trained in; use the mean over the "
                "reference windows: .mean(dim=(0, 1))"
            ),
        ),
        (
            dict(how="position"),
            _("the mean was taken over the batch only, one per position, not over positions too"),
            _("average over the batch and the positions: merged.mean(dim=(0, 1))"),
        ),
        (
            dict(how="scalar"),
            _("each head was replaced by one number, the mean of all its d_head entries"),
            _("keep one mean per entry: a (d_head,) vector, averaged over batch and positions"),
        ),
        (
            dict(means_from="ids"),
            _("the means come from the evaluated text, not from the reference windows"),
            _("run the model on `reference` to record what out_proj receives, then average that"),
        ),
        (
            dict(means_from="ablated"),
            _(
                "a later block's mean was taken with an earlier block's head already replaced; "
                "every mean comes from the model as it is"
            ),
            _("record every mean first, with no replacement hook on, then install the hooks"),
        ),
        (
            dict(place="output"),
            _(
                "you replaced columns of out_proj's output; a head's slice is in out_proj's "
                "input, before W_o mixes the heads"
            ),
            _("use register_forward_pre_hook on out_proj: its args[0] is the heads side by side"),
        ),
        (
            dict(part="unscaled"),
            _("the slice starts at column h, not at h · d_head"),
            _("head h owns columns h * d_head to (h + 1) * d_head of out_proj's input"),
        ),
    )
    for options, label, hint in mistakes:
        if matches(heads=heads, **options):
            raise Wrong(_("{where}: {label}").format(where=where, label=label), hint)
    if len(heads) == 1:
        for other in every:
            if other != heads[0] and matches(heads=[other]):
                raise Wrong(
                    _("{where}: you replaced head {head} of block {layer} instead").format(
                        where=where, head=other[1], layer=other[0]
                    ),
                    _(
                        "heads are (layer, head) pairs: block `layer` of model.blocks, columns "
                        "head * d_head onwards"
                    ),
                )
    raise Wrong(
        _("{where}, your loss {got:.4f} differs from {want:.4f}").format(
            where=where, got=got, want=want
        ),
        _(
            "record out_proj's input on the reference windows, average it over dim=(0, 1), "
            "and hand each chosen head's slice of that mean to out_proj"
        ),
    )


# --- exercise 11.2: the copy test, with ids between the copies -------------------------------


class _Copier(torch.nn.Module):
    """A language model made for the check, (N, T) ids -> (N, T, vocab) logits: a fixed random
    score per (id, next id) and per position, plus, when ``bonus`` > 0, ``bonus`` on the id
    that followed the latest earlier occurrence of the current id: the rule an induction
    head runs. With ``bonus=0`` it cannot copy."""

    def __init__(self, vocab_size: int, context_length: int, bonus: float):
        super().__init__()
        self.register_buffer("table", torch.randn(vocab_size, vocab_size))  # (V, V)
        self.register_buffer("place", torch.randn(context_length, vocab_size) * 0.5)  # (T, V)
        self.bonus, self.vocab_size = bonus, vocab_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        N, T = x.shape
        logits = self.table[x] + self.place[:T]  # (N, T, V)
        if self.bonus:
            earlier = (x[:, :, None] == x[:, None, :]) & torch.ones(T, T).tril(-1).bool()
            latest = torch.where(earlier, torch.arange(T), -1).amax(dim=-1)  # (N, T), -1: none
            after = x.gather(1, latest + 1)  # (N, T): the id after it (latest + 1 <= t)
            copy = torch.nn.functional.one_hot(after, self.vocab_size) * (latest >= 0)[..., None]
            logits = logits + self.bonus * copy  # (N, T, V)
        return logits


def _copy_variant(
    model,
    strings: torch.Tensor,
    between: torch.Tensor,
    *,
    rows: str = "right",
    columns: str = "right",
    shifted: bool = True,
    sign: int = 1,
    spread: str = "se",
) -> tuple[float, float]:
    """(mean gap, its spread) of the copy test, or of one of the checker's mistakes:
    ``rows`` "right" (string, between, string) or "no between" (string, string; the same for
    a causal model as string, string, between); ``columns`` "right", "second from 0" (the
    second copy's character 0 counted), "first too far" (the first copy's slice one column
    longer) or "between in first" (the ids between counted with the first copy);
    ``shifted=False``
    scores each position's logits against its own id; ``sign=-1`` first - second; ``spread``
    "se" (std over strings / sqrt(N)), "sd" (std over strings) or "chars" (over characters);
    ``spread="losses"`` returns the mean loss on each copy instead."""
    N, m = strings.shape
    f = between.shape[1]
    if rows == "no between":
        x = torch.cat([strings, strings], dim=1)
        f = 0
    else:
        x = torch.cat([strings, between, strings], dim=1)  # (N, 2m + f)
    with torch.no_grad():
        logits = model(x).double()  # (N, T, V)
    if shifted:  # column t predicts id t + 1
        ce = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2), x[:, 1:], reduction="none"
        )  # (N, T - 1)
    else:
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x, reduction="none")
        ce = ce[:, 1:]  # (N, T - 1): position t + 1 scored against its own id
    first = ce[:, : m - 1]  # (N, m - 1): the first copy's ids 1 .. m - 1
    second = ce[:, m + f : 2 * m + f - 1]  # (N, m - 1): the second copy's ids 1 .. m - 1
    if columns == "second from 0":
        second = ce[:, m + f - 1 : 2 * m + f - 1]  # (N, m)
    elif columns == "first too far":
        first = ce[:, :m]  # (N, m)
    elif columns == "between in first":
        first = ce[:, : m + f - 1]  # (N, m + f - 1)
    if spread == "losses":
        return first.mean().item(), second.mean().item()
    gaps = sign * (second.mean(dim=1) - first.mean(dim=1))  # (N,)
    if spread == "chars":
        per_char = sign * (second - first)  # (N, m - 1)
        return per_char.mean().item(), (per_char.std() / per_char.numel() ** 0.5).item()
    size = gaps.std().item()
    return gaps.mean().item(), size if spread == "sd" else size / math.sqrt(N)


def _two_numbers(answer, where: str) -> tuple[float, float]:
    if not (isinstance(answer, (tuple, list)) and len(answer) == 2):
        if isinstance(answer, torch.Tensor) and answer.numel() > 2:
            raise Wrong(
                _("{where}, you returned a tensor of shape {shape}, not two numbers").format(
                    where=where, shape=tuple(answer.shape)
                ),
                _("average the per-string gaps: return gaps.mean().item(), its standard error"),
            )
        raise Wrong(
            _("{where}, your function returned a {type}, not (mean gap, standard error)").format(
                where=where, type=type(answer).__name__
            ),
            _("did you forget the `return` line?")
            if answer is None
            else _("return two floats: the mean gap and its standard error"),
        )
    values = []
    for value in answer:
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Wrong(
                _("{where}, the two values are not numbers").format(where=where),
                _("turn a one-number tensor into a float with .item()"),
            )
        values.append(float(value))
    return values[0], values[1]


@checker("11", N_("return two floats: the mean gap (second copy - first) and its standard error"))
def check_copy_gap(fn) -> str:
    """``fn(model, strings, between) -> (mean gap, standard error)``: rows made of each string
    (N, m), its ids between (N, f) and the string again; per row, the mean cross-entropy on the
    second copy's ids 1 .. m - 1 minus that on the first copy's; their mean over the N rows and
    its standard error (std over the rows / √N)."""
    vocab, context = 32, 32
    cases = [
        (_Copier(vocab, context, bonus=6.0), 200, 8, 6, True),
        (_Copier(vocab, context, bonus=6.0), 150, 6, 0, True),
        (_Copier(vocab, context, bonus=0.0), 120, 8, 4, False),
    ]
    for model, N, m, f, copies in cases:
        strings = torch.randint(vocab, (N, m))  # (N, m)
        between = torch.randint(vocab, (N, f))  # (N, f)
        want = _copy_variant(model, strings, between)
        if copies:
            where = _(
                "on a model that copies the id after the latest earlier occurrence, {N} "
                "strings of {m} ids with {f} between"
            ).format(N=N, m=m, f=f)
        else:
            where = _(
                "on a model that cannot copy, {N} strings of {m} ids with {f} between"
            ).format(N=N, m=m, f=f)
        got = _two_numbers(call(fn, model, strings.clone(), between.clone()), where)

        def same(a, b) -> bool:
            return all(math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-5) for x, y in zip(a, b))

        if same(got, want):
            continue
        mistakes = (
            (
                dict(rows="no between"),
                _(
                    "your second copy follows the first at once: the ids between are not "
                    "between the copies (left out, or put after them)"
                ),
                _(
                    "each row is string, between, string: "
                    "torch.cat([strings, between, strings], dim=1)"
                ),
            ),
            (
                dict(shifted=False),
                _(
                    "you scored each position's logits against its own id; the logits at t "
                    "predict the id at t + 1"
                ),
                _("cross_entropy(logits[:, :-1] ..., rows[:, 1:]): column t predicts id t + 1"),
            ),
            (
                dict(sign=-1),
                _("your gap has the wrong sign: first copy minus second"),
                _("the gap is second - first: negative when the second copy is easier"),
            ),
            (
                dict(columns="second from 0"),
                _(
                    "you counted the second copy's first id; nothing before it says what it is, "
                    "so a model that copies cannot know it either"
                ),
                _("score each copy's ids 1 .. m - 1: nothing before a copy's id 0 says what it is"),
            ),
            (
                dict(columns="first too far"),
                _("the first copy's slice runs one column too far, into the id after it"),
                _("the first copy's ids 1 .. m - 1 are predicted at columns 0 .. m - 2"),
            ),
            (
                dict(columns="between in first"),
                _("you counted the ids between the copies with the first copy"),
                _("the first copy's ids 1 .. m - 1 are predicted at columns 0 .. m - 2"),
            ),
            (
                dict(spread="losses"),
                _(
                    "you returned the mean loss on each copy, first then second; the test "
                    "returns their difference and its standard error"
                ),
                _("per string: second copy's mean loss - first copy's; then mean and std / √N"),
            ),
            (
                dict(spread="sd"),
                _("your spread is the standard deviation of the gaps, not its standard error"),
                _("divide the standard deviation over the strings by √N"),
            ),
            (
                dict(spread="chars"),
                _(
                    "your standard error counts every character as a sample; the strings are "
                    "the independent samples (one gap each)"
                ),
                _("one gap per string, then gaps.std() / √N"),
            ),
        )
        for options, message, hint in mistakes:
            if same(got, _copy_variant(model, strings, between, **options)):
                raise Wrong(_("{where}: {message}").format(where=where, message=message), hint)
        raise Wrong(
            _(
                "{where}, you return a gap of {got:+.3f} ± {got_se:.3f}; the test gives "
                "{want:+.3f} ± {want_se:.3f}"
            ).format(where=where, got=got[0], got_se=got[1], want=want[0], want_se=want[1]),
            _(
                "rows = string, between, string; per row, the mean loss on the second copy's ids "
                "1 .. m - 1 minus that on the first copy's; then the mean and std / √N"
            ),
        )
    return _(
        "the copy test: a model that copies finds the second copy easier, one that cannot does "
        "not, with the ids between the copies or without"
    )
