"""bench.py: every implementation is checked equal to the reference and causal before it is
timed, and a wrong one is rejected. No timings are asserted (speed belongs to `make bench`)."""

from __future__ import annotations

import csv

import pytest
import torch
import torch.nn.functional as F

from attention_lab import MultiHeadSelfAttention, causal_mask, merge_heads, split_heads
from attention_lab.bench import (
    COMPILED,
    FAST,
    REFERENCE,
    ImplementationCheckError,
    build_implementations,
    check_all,
    check_causal,
    check_matches_reference,
    run,
)
from attention_lab.bench.implementations import BareSDPABlock

EVERY_ROW = {
    "list of single heads",
    "MultiHeadAttention",
    "MHSA explicit path",
    FAST,
    COMPILED,
    "nn.MultiheadAttention",
    REFERENCE,
}


class InvertedMaskBlock(BareSDPABlock):
    """A deliberately wrong block: it hands our mask (True = blocked) to SDPA, whose boolean
    mask means the opposite (True = may attend). The bench must reject it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = (
            split_heads(t, self.n_heads) for t in self.qkv(x).split(D, dim=-1)
        )  # 3 x (B, H, T, d_head)
        mask = causal_mask(T, device=x.device)  # (T, T) True = blocked: wrong for SDPA
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, d_head)
        return self.out_proj(merge_heads(ctx))  # (B, T, D)


def _inverted(ref: MultiHeadSelfAttention) -> InvertedMaskBlock:
    block = InvertedMaskBlock(ref.d_model, ref.n_heads)
    block.load_state_dict({"qkv.weight": ref.qkv.weight, "out_proj.weight": ref.out_proj.weight})
    return block


def test_every_implementation_holds_the_same_weights_and_gives_the_reference_output():
    ref, impls = build_implementations(32, 4, 12)
    x = torch.randn(3, 12, 32)  # (B, T, D)
    expected = ref(x, return_weights=True)[0]  # (B, T, D)
    with torch.no_grad():
        for name, module in impls.items():
            torch.testing.assert_close(module(x), expected, rtol=1e-4, atol=1e-5, msg=name)
    check_all(impls, ref, x)  # and the bench's own checks pass


def test_inverted_mask_block_fails_the_reference_check():
    ref, _ = build_implementations(32, 4, 12)
    with pytest.raises(ImplementationCheckError, match="reference output"):
        check_matches_reference("inverted", _inverted(ref), ref, torch.randn(2, 12, 32))


def test_inverted_mask_block_fails_the_causality_check():
    ref, _ = build_implementations(32, 4, 12)
    with pytest.raises(ImplementationCheckError, match="inverted"):
        check_causal("inverted", _inverted(ref), torch.randn(2, 12, 32))


def test_a_block_that_sees_the_future_fails_the_causality_check():
    seeing = MultiHeadSelfAttention(32, 4, 12, mask_kind="none").eval()
    with pytest.raises(ImplementationCheckError, match="not causal"):
        check_causal("no mask", seeing, torch.randn(2, 12, 32))


def test_bench_refuses_to_time_an_inverted_mask_implementation(tmp_path):
    lines = []
    with pytest.raises(ImplementationCheckError, match="inverted mask"):
        run(
            ["--quick", "--out", str(tmp_path)],
            extra={"inverted mask": _inverted},
            log=lines.append,
        )
    assert not any("fwd ms" in line for line in lines)  # nothing was timed
    assert not (tmp_path / "bench.csv").exists()


def test_quick_bench_table_has_every_implementation_at_every_shape(tmp_path):
    lines = []
    rows = run(["--quick", "--repeats", "1", "--out", str(tmp_path)], log=lines.append)
    shapes = {r.shape for r in rows}
    assert len(shapes) == 2
    for shape in shapes:
        assert {r.implementation for r in rows if r.shape == shape} == EVERY_ROW
    text = "\n".join(lines)
    for name in EVERY_ROW:
        assert text.count(name) >= 2, name
    assert "goals at" in text
    with (tmp_path / "bench.csv").open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows) == 2 * len(EVERY_ROW)
    assert {row["implementation"] for row in table} == EVERY_ROW
    reference_rows = [row for row in table if row["implementation"] == REFERENCE]
    assert all(float(row["fwd_ms_ratio"]) == 1.0 for row in reference_rows)
    assert (tmp_path / "bench.png").stat().st_size > 0
