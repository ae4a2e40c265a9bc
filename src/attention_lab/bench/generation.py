"""``make bench``: generation with a KV cache against without, and the cache of every variant
(notebook 12_attention_in_todays_llms).

At notebook 11's model size (``CharLM``: d_model 64, 4 heads, 2 layers, its 62-character
vocabulary) with a context long enough for the longest run. Before anything is timed, each
model's cached generation must give the uncached ids (the gate, as for the attention blocks),
and each variant's measured cache bytes must equal the formula. Then, in one run:

* ``measure_generation``: ``generate(..., use_cache=False)`` and ``use_cache=True`` for
  several new-token counts, all timed in turn (``cost.interleaved_medians``), on one thread;
  tokens per second and their ratio;
* ``measure_variants``: MHA, GQA, MQA, a sliding window and MLA: the cache's bytes after T
  tokens (``KVCache.nbytes``, checked against ``cache_bytes``) as ratios to MHA, and each
  one's cached tokens per second.

Untrained weights: the time and the memory do not depend on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..charlm import CharLM, CharLMConfig
from ..cost import interleaved_medians
from ..kv_cache import cache_bytes
from .checks import ImplementationCheckError

SIZES = {"vocab_size": 62, "d_model": 64, "n_heads": 4, "n_layers": 2}  # notebook 11's CharLM
PROMPT = 32  # notebook 11's context length
NEW_TOKENS, QUICK_NEW_TOKENS = (32, 128, 512), (4, 8)
GOAL_TOKENS, GOAL_RATIO = 512, 5.0  # issue 39: cached at least 5x faster at 512 new tokens
# d_head = 16: GQA shares each kv head between 2 query heads, MQA one between all 4; the
# window is notebook 11's training context; d_latent = 4 d_head, DeepSeek-V2's ratio
VARIANTS = {
    "MHA (4 kv heads)": {},
    "GQA (2 kv heads)": {"n_kv_heads": 2},
    "MQA (1 kv head)": {"n_kv_heads": 1},
    "sliding window 32": {"window": 32},
    "MLA (d_latent 64)": {"d_latent": 64},
}


def generation_model(context_length: int, seed: int = 0, **switches) -> CharLM:
    torch.manual_seed(seed)
    return CharLM(CharLMConfig(**SIZES, context_length=context_length, **switches)).eval()


def _generate(model: CharLM, prompt: torch.Tensor, n: int, use_cache: bool):
    def call() -> torch.Tensor:
        gen = torch.Generator().manual_seed(0)
        return model.generate(prompt, n, generator=gen, use_cache=use_cache)

    return call


def check_cached_ids(name: str, model: CharLM, prompt: torch.Tensor, n: int) -> None:
    """The gate: cached generation must give exactly the uncached ids."""
    if not torch.equal(_generate(model, prompt, n, True)(), _generate(model, prompt, n, False)()):
        raise ImplementationCheckError(f"{name}: cached generation gives other ids than uncached")


@dataclass
class GenerationRow:
    """One new-token count: median milliseconds of each way, tokens per second, the ratio."""

    new_tokens: int
    uncached_ms: float
    cached_ms: float

    @property
    def ratio(self) -> float:
        return self.uncached_ms / self.cached_ms

    def tokens_per_s(self, ms: float) -> float:
        return self.new_tokens / (ms * 1e-3)


def measure_generation(
    new_tokens: tuple[int, ...] = NEW_TOKENS, repeats: int = 3, threads: int | None = 1
) -> list[GenerationRow]:
    """Cached against uncached ``generate`` after a prompt of ``PROMPT`` ids, every count
    timed in turn in one ``interleaved_medians`` call."""
    model = generation_model(PROMPT + max(new_tokens))
    prompt = torch.randint(
        SIZES["vocab_size"], (1, PROMPT), generator=torch.Generator().manual_seed(1)
    )
    calls = {}
    for n in new_tokens:
        check_cached_ids(f"{n} new tokens", model, prompt, n)
        calls[(n, False)] = _generate(model, prompt, n, False)
        calls[(n, True)] = _generate(model, prompt, n, True)
    ms = interleaved_medians(calls, repeats=repeats, warmup=1, threads=threads)
    return [GenerationRow(n, ms[(n, False)], ms[(n, True)]) for n in new_tokens]


@dataclass
class VariantRow:
    """One variant's cache after T tokens (bytes, measured = formula) and its cached speed."""

    name: str
    T: int
    per_token: int  # bytes one token adds while the cache grows
    nbytes: int
    cached_ms: float
    new_tokens: int


def measure_variants(
    T: int = PROMPT + max(NEW_TOKENS),
    new_tokens: int = max(NEW_TOKENS),
    repeats: int = 3,
    threads: int | None = 1,
) -> list[VariantRow]:
    """Every variant of ``VARIANTS``: its cache after ``T`` tokens, measured and checked
    against ``cache_bytes``, and its cached generation of ``new_tokens`` ids, timed in turn."""
    prompt = torch.randint(
        SIZES["vocab_size"], (1, PROMPT), generator=torch.Generator().manual_seed(1)
    )
    models, nbytes, calls = {}, {}, {}
    for name, switches in VARIANTS.items():
        model = models[name] = generation_model(max(T, PROMPT + new_tokens), **switches)
        ids = torch.randint(SIZES["vocab_size"], (1, T), generator=torch.Generator().manual_seed(2))
        cache = model.new_cache()
        with torch.inference_mode():
            model(ids[:, : T - 1], cache=cache)  # a prefill, then one token
            model(ids[:, T - 1 :], cache=cache)
        formula = cache_bytes(model.config, T, bytes_per_element=4)
        if cache.nbytes() != formula:
            raise ImplementationCheckError(
                f"{name}: the cache holds {cache.nbytes()} bytes, the formula says {formula}"
            )
        nbytes[name] = cache.nbytes()
        check_cached_ids(name, model, prompt, min(new_tokens, 8))
        calls[name] = _generate(model, prompt, new_tokens, True)
    ms = interleaved_medians(calls, repeats=repeats, warmup=1, threads=threads)
    return [
        VariantRow(
            name,
            T,
            cache_bytes(models[name].config, 1, bytes_per_element=4),
            nbytes[name],
            ms[name],
            new_tokens,
        )
        for name in VARIANTS
    ]


def format_generation(rows: list[GenerationRow], threads: int | None) -> str:
    sizes = ", ".join(f"{k}={v}" for k, v in SIZES.items())
    lines = [
        f"generation, cached against uncached: CharLM {sizes}, prompt {PROMPT} ids, "
        f"context {PROMPT + max(r.new_tokens for r in rows)}, untrained, "
        f"{threads or torch.get_num_threads()} thread(s); medians of interleaved repeats; "
        "cached ids checked equal to uncached first",
        f"{'new tokens':>10}{'uncached ms':>13}{'tok/s':>8}{'cached ms':>11}{'tok/s':>8}"
        f"{'cached speed-up':>17}",
    ]
    for r in rows:
        lines.append(
            f"{r.new_tokens:>10}{r.uncached_ms:>13.1f}{r.tokens_per_s(r.uncached_ms):>8.0f}"
            f"{r.cached_ms:>11.1f}{r.tokens_per_s(r.cached_ms):>8.0f}{r.ratio:>16.2f}x"
        )
    goal = next((r for r in rows if r.new_tokens == GOAL_TOKENS), None)
    if goal is not None:
        met = "met" if goal.ratio >= GOAL_RATIO else "MISSED"
        lines.append(
            f"  [{met}] cached >= {GOAL_RATIO:g}x faster than uncached at {GOAL_TOKENS} new "
            f"tokens: {goal.ratio:.2f}x"
        )
    return "\n".join(lines)


def format_variants(rows: list[VariantRow]) -> str:
    base = rows[0]
    lines = [
        f"KV cache of each variant after T={base.T} tokens (batch 1, float32; measured "
        "KVCache.nbytes, equal to cache_bytes), and its cached generation of "
        f"{base.new_tokens} tokens",
        f"{'variant':<22}{'B/token':>9}{'bytes at T':>12}{'x MHA':>8}{'cached tok/s':>14}"
        f"{'x MHA':>8}",
    ]
    for r in rows:
        speed, base_speed = r.new_tokens / r.cached_ms, base.new_tokens / base.cached_ms
        lines.append(
            f"{r.name:<22}{r.per_token:>9,}{r.nbytes:>12,}{r.nbytes / base.nbytes:>8.3f}"
            f"{speed * 1e3:>14.0f}{speed / base_speed:>8.2f}"
        )
    return "\n".join(lines)


def generation_report(quick: bool = False, repeats: int | None = None, log=print) -> None:
    """Both sections, measured and printed (``--quick``: tiny counts, one repeat)."""
    threads = 1
    new_tokens = QUICK_NEW_TOKENS if quick else NEW_TOKENS
    repeats = repeats or (1 if quick else 3)  # make bench's --repeats, if given
    log("")
    log("checking cached generation and timing it ...")
    log(format_generation(measure_generation(new_tokens, repeats, threads), threads))
    log("")
    T = PROMPT + max(new_tokens)
    log(format_variants(measure_variants(T, max(new_tokens), repeats, threads)))
