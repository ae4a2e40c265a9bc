"""The induction circuit read from the weights: OV and QK circuits, composition scores
(issue 40; notebook 10's two-layer ``TinyLM``), after Elhage et al. 2021, "A Mathematical
Framework for Transformer Circuits", and Olsson et al. 2022.

**Notation** (the chapter's; ``nn.Linear`` computes y = x Wᵀ + b on row vectors x). Head h of a
layer owns rows h*d_head:(h+1)*d_head of the Q, K and V blocks of ``qkv.weight`` and columns
h*d_head:(h+1)*d_head of ``out_proj.weight``:

    W_Q, W_K, W_V: (d_head, D)     W_O: (D, d_head)      (as stored, ``head_weights``)
    q_i = x_i W_Qᵀ,  k_j = x_j W_Kᵀ,  s_ij = q_i · k_j / √d_head = x_i W_QK x_jᵀ / √d_head
    the head writes (Σ_j a_ij x_j) W_Vᵀ W_Oᵀ = y_i W_OV,   y_i = Σ_j a_ij x_j
    W_QK = W_Qᵀ W_K   (D, D): query input on the left, key input on the right
    W_OV = W_Vᵀ W_Oᵀ  (D, D): a row vector read -> the row vector written (path order V, O)

``TinyLM``: x = tok_emb + pos_emb; with n_layers > 1 each layer adds its heads' writes to the
residual stream; ``lm_head`` reads the stream. E = ``tok_emb.weight`` (vocab, D), P =
``pos_emb.weight`` (context_length, D), U = ``lm_head.weight`` (vocab, D). With no MLP and no
layer norm every path is a product of these matrices, exact up to the biases.

**The OV circuit** of a head, ``ov_circuit``: E W_OV Uᵀ, (vocab, vocab); row t holds the logits
the head adds when it reads token t with all its weight (the direct path, stream -> head ->
``lm_head``). A copying head has its row maximum on the diagonal: ``copying_scores`` gives the
share of rows whose top-1 is the own id, and Elhage's eigenvalue score Σλ / Σ|λ| (1: every
eigenvalue positive, copying; -1: anti-copying).

**The QK circuit**, ``qk_circuit``: E W_QK Eᵀ / √d_head (query token x key token), or with
positions (P instead of E on either side), or with the key side read through an earlier
head: E W_QK (E W_OV⁽ʰ⁰⁾)ᵀ / √d_head, the score of a query holding token a for a key into which
head h0 wrote token b. For an induction head reading a previous-token head: a diagonal.

**The orientation of the K-composition score** (derived here, tested in
tests/library/test_circuits.py
against the model's own forward). Layer 1 reads the stream r_j = x_j + Σ_h0 y⁽ʰ⁰⁾_j W_OV⁽ʰ⁰⁾ (+
the biases). A layer-1 head h1 scores s_ij = r_i W_QK⁽ʰ¹⁾ r_jᵀ / √d_head. Its *key* side reads
r_j, so the part of the score that runs through head h0's write at the key is

    r_i W_QK⁽ʰ¹⁾ (y_j W_OV⁽ʰ⁰⁾)ᵀ = r_i [W_QK⁽ʰ¹⁾ W_OV⁽ʰ⁰⁾ᵀ] y_jᵀ

and the K-composition score is ‖W_QK⁽ʰ¹⁾ W_OV⁽ʰ⁰⁾ᵀ‖_F / (‖W_QK⁽ʰ¹⁾‖_F ‖W_OV⁽ʰ⁰⁾‖_F). In the stored
weights the matrix is W_Q⁽ʰ¹⁾ᵀ W_K⁽ʰ¹⁾ W_O⁽ʰ⁰⁾ W_V⁽ʰ⁰⁾: the reading side's W_K sits next to the
writer's W_O. Elhage et al. write W_QK W_OV because their vectors are columns, and their W_OV
= W_O W_V is the transpose of ours; the row-vector product W_QK W_OV (no transpose) is *not* the
K-composition (on a head whose key reads exactly what h0 writes it gives 0). The other two:

    Q-composition (the query side reads h0's write at i):  y_i W_OV⁽ʰ⁰⁾ W_QK⁽ʰ¹⁾ r_jᵀ
        -> ‖W_OV⁽ʰ⁰⁾ W_QK⁽ʰ¹⁾‖ = ‖W_K⁽ʰ¹⁾ᵀ W_Q⁽ʰ¹⁾ W_O⁽ʰ⁰⁾ W_V⁽ʰ⁰⁾‖ (stored weights)
    V-composition (the value reads h0's write at j):       y_j W_OV⁽ʰ⁰⁾ W_OV⁽ʰ¹⁾
        -> ‖W_OV⁽ʰ⁰⁾ W_OV⁽ʰ¹⁾‖ = ‖W_O⁽ʰ¹⁾ W_V⁽ʰ¹⁾ W_O⁽ʰ⁰⁾ W_V⁽ʰ⁰⁾‖

(in each, the reading side's weight sits next to W_O⁽ʰ⁰⁾). The score is at most 1, and at most
‖A‖₂/‖A‖_F for either factor A: a rank-r factor with r equal singular values caps it at 1/√r,
reached when the reader reads exactly the writer's subspace. Random matrices score far lower
but not 0 (about 1/√D): ``composition_baseline`` draws Gaussian matrices of the same shapes,
seeded, and gives their mean and spread, so a score can be read against chance. What the score
measures is an overlap of subspaces: a key that reads token identity composes with *any*
layer-0 head that writes token identity, so it says "could read", not "reads, on this task".

**The biases** are left out everywhere, as in Elhage et al. In the OV circuit b_V W_Oᵀ + b_O
(and ``lm_head``'s bias) add the same logits whatever token the head reads (the weights a_ij
sum to 1); the positional part of what the head reads, P W_OV Uᵀ, is another path
(``ov_circuit`` reads tokens). In a score, (x_i W_Qᵀ + b_Q)(W_K x_jᵀ + b_Kᵀ) = x_i W_QK x_jᵀ +
b_Q W_K x_jᵀ + (terms without j): softmax cancels the terms without j exactly; b_Q W_K x_jᵀ, a
preference for some keys whatever the query holds, is not part of the bilinear circuit. The
composition scores use the weights only.

``_qkv_rows`` is the one place that says which rows of ``qkv.weight`` make a head's Q, K and V
(with grouped-query attention, n_kv_heads < n_heads, a group of query heads shares one key/value
head's rows). Rotary positions (``rope=True``) put a rotation that depends on j - i between the
query and the key, so such a layer has no single W_QK: its QK circuit and Q/K-composition are
refused; its OV circuit and V-composition are unchanged (values are never rotated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn

from .._checks import as_size, check_positive
from ..i18n import error_text

KINDS = ("k", "q", "v")
SIDES = ("token", "position")
# normalisations whose paths are not linear (nn.RMSNorm exists from torch 2.4 on)
NORMS = tuple(getattr(nn, name) for name in ("LayerNorm", "RMSNorm") if hasattr(nn, name))


@dataclass(frozen=True)
class HeadWeights:
    """One head's slices of its layer's weights, as stored (see the module docstring)."""

    W_Q: torch.Tensor  # (d_head, D): rows of qkv.weight's Q block
    W_K: torch.Tensor  # (d_head, D)
    W_V: torch.Tensor  # (d_head, D)
    W_O: torch.Tensor  # (D, d_head): columns of out_proj.weight

    @property
    def W_QK(self) -> torch.Tensor:
        """(D, D) = W_Qᵀ W_K: s_ij = x_i W_QK x_jᵀ / √d_head (biases left out)."""
        return self.W_Q.T @ self.W_K  # (D, D)

    @property
    def W_OV(self) -> torch.Tensor:
        """(D, D) = W_Vᵀ W_Oᵀ: a row vector y the head reads -> y W_OV, what it writes."""
        return self.W_V.T @ self.W_O.T  # (D, D)

    @property
    def d_head(self) -> int:
        return self.W_Q.shape[0]


@dataclass(frozen=True)
class CopyingScores:
    """Whether a square circuit (row t, column t = the same token) favours its diagonal.

    ``top1_share``: the share of rows whose largest entry is on the diagonal (1/n by chance);
    ``eigenvalue_score``: Σλ / Σ|λ| over the eigenvalues λ (1 copying, -1 anti-copying).
    From ``copying_baseline``, each field is a ``Baseline`` instead of a number.
    """

    top1_share: float
    eigenvalue_score: float


@dataclass(frozen=True)
class Baseline:
    """A score on random matrices: one value per seeded draw, and their mean and spread."""

    draws: torch.Tensor  # (n_draws,) float64

    @property
    def mean(self) -> float:
        return self.draws.mean().item()

    @property
    def std(self) -> float:
        return self.draws.std().item()

    def z(self, score: float | torch.Tensor):
        """How many spreads ``score`` lies above the random mean: (score - mean) / std."""
        return (score - self.mean) / self.std


# ---------------------------------------------------------------- reading the weights


def _qkv_rows(block: nn.Module, head: int) -> tuple[slice, slice, slice]:
    """The rows of ``block.qkv.weight`` that make head ``head``'s Q, K and V.

    The one place that knows the layout (fused.py's): Q is the first H*d_head rows, K the next
    n_kv*d_head, V the last n_kv*d_head; in each block a head owns d_head rows. With
    grouped-query attention (n_kv_heads < n_heads) query head h reads key/value head
    h // (n_heads // n_kv_heads), so the heads of one group share those rows. With
    n_kv_heads == n_heads (the chapter's block; also a block that has no ``n_kv_heads``) the
    rows are h*d_head, D + h*d_head and 2D + h*d_head.
    """
    H, d = block.n_heads, block.d_head
    n_kv = getattr(block, "n_kv_heads", None) or H
    kv = head // (H // n_kv)  # the key/value head of this query head's group
    q0, k0, v0 = head * d, H * d + kv * d, H * d + n_kv * d + kv * d
    return slice(q0, q0 + d), slice(k0, k0 + d), slice(v0, v0 + d)


def _no_rope(block: nn.Module, layer: int) -> None:
    """Refuse a layer with rotary positions where a circuit needs W_QK (see the docstring)."""
    if getattr(block, "rope", False):
        raise ValueError(
            error_text(
                "layer {layer} rotates its queries and keys by position (rope=True), so its "
                "scores have no single W_QK: the QK circuit and Q/K-composition are not "
                "defined for it; the OV circuit and V-composition are"
            ).format(layer=layer)
        )


def _layers(model: nn.Module) -> list[nn.Module]:
    """``model.attention_layers()``, after checking that the circuits are exact for it."""
    needed = ("attention_layers", "tok_emb", "lm_head")
    missing = [name for name in needed if not hasattr(model, name)]
    if missing:
        raise TypeError(
            error_text(
                "{model} has no {missing}; the circuits read a TinyLM (attention_layers(), "
                "tok_emb, lm_head): pass TinyLM(n_layers=2) or a trained one"
            ).format(model=type(model).__name__, missing=", ".join(missing))
        )
    if any(isinstance(m, NORMS) for m in model.modules()):
        raise ValueError(
            error_text(
                "{model} has a layer norm, so its paths are not products of weight matrices "
                "and these circuits would not be exact; use a TinyLM (no MLP, no layer norm)"
            ).format(model=type(model).__name__)
        )
    return list(model.attention_layers())


def _layer(model: nn.Module, layer) -> tuple[int, nn.Module]:
    layers, index = _layers(model), as_size(layer)
    if index is None or not 0 <= index < len(layers):
        raise ValueError(
            error_text(
                "layer={layer} is out of range: this model has {n} attention layer(s); "
                "pass layer=0..{last}"
            ).format(layer=repr(layer), n=len(layers), last=len(layers) - 1)
        )
    block = layers[index]
    if not isinstance(getattr(block, "qkv", None), nn.Linear):
        raise ValueError(
            error_text(
                "layer {layer} is a {type} with no fused qkv projection (latent attention, "
                "for one, makes its keys and values from a latent vector); the circuits read "
                "layers whose heads are slices of qkv and out_proj, as MultiHeadSelfAttention's"
            ).format(layer=index, type=type(block).__name__)
        )
    return index, block


def head_weights(model: nn.Module, layer: int, head: int) -> HeadWeights:
    """Head ``head`` of layer ``layer``: W_Q, W_K, W_V (d_head, D) and W_O (D, d_head), detached."""
    layer, block = _layer(model, layer)
    index = as_size(head)
    if index is None or not 0 <= index < block.n_heads:
        raise ValueError(
            error_text(
                "head {head} is out of range: layer {layer} has {n_heads} heads; "
                "pass heads numbered 0..{last}"
            ).format(head=repr(head), layer=layer, n_heads=block.n_heads, last=block.n_heads - 1)
        )
    q, k, v = _qkv_rows(block, index)
    w = block.qkv.weight.detach()  # (D + 2 n_kv d_head, D)
    cols = slice(index * block.d_head, (index + 1) * block.d_head)
    return HeadWeights(w[q], w[k], w[v], block.out_proj.weight.detach()[:, cols])


# ---------------------------------------------------------------- OV and QK circuits


def ov_circuit(model: nn.Module, layer: int, head: int) -> torch.Tensor:
    """(vocab, vocab) = E W_OV Uᵀ: row t, the logits the head adds when it reads token t.

    The direct path token embedding -> W_V, W_O -> LM head (biases and positions left out:
    see the module docstring). In a model without a residual stream only the last layer has
    such a path.
    """
    index, _ = _layer(model, layer)
    last = len(_layers(model)) - 1
    if index < last and not getattr(model, "residual", True):
        raise ValueError(
            error_text(
                "layer {layer} reaches the LM head only through the layers after it (this "
                "model has no residual stream), so it has no direct path; ask for layer={last} "
                "or use a model with residual=True"
            ).format(layer=index, last=last)
        )
    W = head_weights(model, layer, head)
    E, U = model.tok_emb.weight.detach(), model.lm_head.weight.detach()  # (vocab, D) each
    return E @ W.W_OV @ U.T  # (vocab, vocab)


def _side(model: nn.Module, side: str, name: str) -> torch.Tensor:
    if side not in SIDES:
        raise ValueError(
            error_text(
                "{name}={side} is not known; use {name}='token' or {name}='position'"
            ).format(name=name, side=repr(side))
        )
    if side == "token":
        return model.tok_emb.weight.detach()  # (vocab, D)
    if getattr(model, "pos_emb", None) is None:
        raise ValueError(
            error_text(
                "{name}='position' needs a learned position table (pos_emb), and this model "
                "has none; use {name}='token'"
            ).format(name=name)
        )
    return model.pos_emb.weight.detach()  # (context_length, D)


def qk_circuit(
    model: nn.Module,
    layer: int,
    head: int,
    *,
    query: str = "token",
    key: str = "token",
    key_via: tuple[int, int] | None = None,
) -> torch.Tensor:
    """The head's scores between embeddings: (rows, W_QK, keys) / √d_head, biases left out.

    ``query``, ``key``: ``"token"`` (E, one row per id) or ``"position"`` (P, one per
    position). Entry [a, b] is the score, before the mask and softmax, of a query whose
    input is row a against a key whose input is row b. ``key_via=(layer0, head0)``: the key
    side is what head0 of an earlier layer writes when it reads row b, (rows b) W_OV⁽ʰ⁰⁾; for
    an induction head read through a previous-token head, [a, b] is the score of a query
    holding a against a key whose previous token is b (an induction head: a diagonal).
    """
    index, block = _layer(model, layer)
    _no_rope(block, index)
    W = head_weights(model, layer, head)
    rows_q, rows_k = _side(model, query, "query"), _side(model, key, "key")  # (n_q, D), (n_k, D)
    if key_via is not None:
        writer = _pair(model, key_via, "key_via")
        if writer[0] >= index:
            raise ValueError(
                error_text(
                    "key_via={via} must name a head of a layer before layer {layer}: a key "
                    "reads only what earlier layers wrote; pass e.g. key_via=(0, 1)"
                ).format(via=repr(key_via), layer=index)
            )
        rows_k = rows_k @ head_weights(model, *writer).W_OV  # (n_k, D): what head0 writes
    return rows_q @ W.W_QK @ rows_k.T / math.sqrt(W.d_head)  # (n_q, n_k)


def _pair(model: nn.Module, pair, name: str) -> tuple[int, int]:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise ValueError(
            error_text(
                "{name}={pair} is not a head: name it by a (layer, head) pair, e.g. (0, 1)"
            ).format(name=name, pair=repr(pair))
        )
    head_weights(model, *pair)  # checks the layer and the head
    return as_size(pair[0]), as_size(pair[1])


def copying_scores(circuit: torch.Tensor) -> CopyingScores:
    """``top1_share`` and ``eigenvalue_score`` of a square circuit (``ov_circuit``, or
    ``qk_circuit`` with the same side twice): see ``CopyingScores``. Eigenvalues in float64."""
    shape = tuple(getattr(circuit, "shape", ()))
    if not isinstance(circuit, torch.Tensor) or len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(
            error_text(
                "a copying score needs a square (n, n) matrix whose row i and column i are the "
                "same token, got shape {shape}; pass ov_circuit(model, layer, head)"
            ).format(shape=shape)
        )
    m = circuit.detach().double()  # (n, n)
    top1 = (m.argmax(dim=1) == torch.arange(shape[0], device=m.device)).double().mean().item()
    eigenvalues = torch.linalg.eigvals(m)  # (n,) complex
    score = (eigenvalues.sum().real / eigenvalues.abs().sum()).item()
    return CopyingScores(top1_share=top1, eigenvalue_score=score)


# ---------------------------------------------------------------- composition


def composition_matrix(model: nn.Module, kind: str, reader, writer) -> torch.Tensor:
    """(D, D): the bilinear form through which head ``reader`` reads head ``writer``'s output.

    ``reader``, ``writer``: (layer, head) pairs, the writer in an earlier layer. ``kind``:
    ``"k"`` W_QK⁽ʳ⁾ W_OV⁽ʷ⁾ᵀ (the score's part r_i M y_jᵀ), ``"q"`` W_OV⁽ʷ⁾ W_QK⁽ʳ⁾ (y_i M r_jᵀ),
    ``"v"`` W_OV⁽ʷ⁾ W_OV⁽ʳ⁾ (y_j M, written). The module docstring derives each.
    """
    kind = _kind(kind)
    r_layer, r_head = _pair(model, reader, "reader")
    w_layer, w_head = _pair(model, writer, "writer")
    _order(r_layer, w_layer)
    if kind != "v":
        _no_rope(_layer(model, r_layer)[1], r_layer)
    R, W = head_weights(model, r_layer, r_head), head_weights(model, w_layer, w_head)
    if kind == "k":
        return R.W_QK @ W.W_OV.T  # (D, D)
    if kind == "q":
        return W.W_OV @ R.W_QK  # (D, D)
    return W.W_OV @ R.W_OV  # (D, D)


def composition_scores(
    model: nn.Module, kind: str = "k", *, reader_layer: int = 1, writer_layer: int = 0
) -> torch.Tensor:
    """(H_reader, H_writer): ‖M‖_F / (‖A‖_F ‖B‖_F) for every pair of heads, M =
    ``composition_matrix`` and A, B its two factors (W_QK or W_OV of the reader, W_OV of the
    writer). Compare with ``composition_baseline(model)``."""
    kind = _kind(kind)
    _order(_layer(model, reader_layer)[0], _layer(model, writer_layer)[0])
    readers = range(_layer(model, reader_layer)[1].n_heads)
    writers = range(_layer(model, writer_layer)[1].n_heads)
    scores = torch.zeros(len(readers), len(writers), dtype=torch.float64)  # (H_r, H_w)
    for r in readers:
        R = head_weights(model, reader_layer, r)
        A = R.W_OV if kind == "v" else R.W_QK  # (D, D)
        for w in writers:
            B = head_weights(model, writer_layer, w).W_OV  # (D, D)
            M = composition_matrix(model, kind, (reader_layer, r), (writer_layer, w))
            scores[r, w] = _ratio(M, A, B)
    return scores


def composition_baseline(
    model: nn.Module,
    *,
    reader_layer: int = 1,
    writer_layer: int = 0,
    draws: int = 200,
    seed: int = 0,
) -> Baseline:
    """The composition score of random matrices of the same shapes: ``draws`` draws, seeded.

    Each draw takes fresh Gaussian W_Q, W_K (or W_V, W_O) of a reader head and W_V, W_O of a
    writer head, with the shapes of those layers' heads. The score ignores scale, and the
    factors are independent, so the draws hold for K-, Q- and V-composition alike.
    """
    _order(_layer(model, reader_layer)[0], _layer(model, writer_layer)[0])
    r = head_weights(model, reader_layer, 0)
    w = head_weights(model, writer_layer, 0)
    n, g = _draws(draws), torch.Generator().manual_seed(seed)
    scores = torch.empty(n, dtype=torch.float64)  # (draws,)
    for i in range(n):
        # the reader's W_Q, W_K and the writer's W_V, W_O: four independent draws
        drawn = HeadWeights(*(_randn(t, g) for t in (r.W_Q, r.W_K, w.W_V, w.W_O)))
        scores[i] = _ratio(drawn.W_QK @ drawn.W_OV.T, drawn.W_QK, drawn.W_OV)
    return Baseline(scores)


def copying_baseline(
    model: nn.Module, *, layer: int = 0, draws: int = 200, seed: int = 0
) -> CopyingScores:
    """``copying_scores`` of OV circuits drawn at random, one ``Baseline`` per field.

    Each draw takes Gaussian E, W_V, W_O and U of the shapes of ``model``'s embedding, a head
    of ``layer`` and the LM head, and scores E W_Vᵀ W_Oᵀ Uᵀ.
    """
    W = head_weights(model, layer, 0)
    E, U = model.tok_emb.weight.detach(), model.lm_head.weight.detach()  # (vocab, D) each
    n, g = _draws(draws), torch.Generator().manual_seed(seed)
    top1, eig = torch.empty(n, dtype=torch.float64), torch.empty(n, dtype=torch.float64)
    for i in range(n):
        e, v, o, u = (_randn(t, g) for t in (E, W.W_V, W.W_O, U))
        scores = copying_scores(e @ v.T @ o.T @ u.T)  # (vocab, vocab) circuit
        top1[i], eig[i] = scores.top1_share, scores.eigenvalue_score
    return CopyingScores(top1_share=Baseline(top1), eigenvalue_score=Baseline(eig))


def _ratio(M: torch.Tensor, A: torch.Tensor, B: torch.Tensor) -> float:
    return (M.double().norm() / (A.double().norm() * B.double().norm())).item()


def _randn(like: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return torch.randn(like.shape, generator=g, dtype=torch.float64)


def _draws(draws) -> int:
    n = check_positive("draws", draws)
    if n < 2:
        raise ValueError(
            error_text(
                "draws={draws} gives no spread: a baseline needs at least 2 draws; pass e.g. "
                "draws=200"
            ).format(draws=n)
        )
    return n


def _kind(kind) -> str:
    if kind not in KINDS:
        raise ValueError(
            error_text(
                "kind={kind} is not known; use kind='k' (a key reads the earlier head's "
                "output), kind='q' (a query reads it) or kind='v' (a value reads it)"
            ).format(kind=repr(kind))
        )
    return kind


def _order(reader: int, writer: int) -> None:
    if not writer < reader:
        raise ValueError(
            error_text(
                "the reader (layer {reader}) must come after the writer (layer {writer}): a head "
                "reads only what earlier layers wrote; pass e.g. reader_layer=1, writer_layer=0"
            ).format(reader=reader, writer=writer)
        )
