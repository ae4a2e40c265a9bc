"""The attention sizes of real LLMs, as their published configurations give them (lesson
``12_attention_in_todays_llms``, "Real models").

Data only: one ``PublishedModel`` per model, in ``PUBLISHED_MODELS``. The lesson hands each
entry to the library's cache function to print its KV cache per token and at 8k and 128k tokens;
``tests/library/test_published.py`` checks the entries against each other and against a cache size
worked out by hand (Llama 3.1 8B: 32 layers x 2 x 8 kv heads x 128 x 2 bytes = 131,072 bytes
per token in bf16).

Notation is the chapter's: L = ``n_layers``, H = ``n_heads`` (query heads), ``n_kv_heads``,
``d_head``, D = ``d_model``, ``context_length``, ``window``. Each field's docstring says which key
of the configuration file it comes from.

Every entry lists, in ``sources``, the files its numbers were read from (a GitHub file at a fixed
commit, or the Hugging Face page as it was read), and, in ``notes``, what a config leaves out
(a value derived, e.g. d_head = D / H), where two sources disagree, and what the numbers do not
say by themselves. The official ``config.json`` pages of the Hugging Face repositories
``meta-llama/Llama-3.1-8B``, ``mistralai/Mistral-7B-v0.1``, ``Qwen/Qwen2.5-7B``,
``google/gemma-2-9b`` and ``deepseek-ai/DeepSeek-V3`` were not among the stored pages we could
read; where a Hugging Face config is cited, it is a re-upload of the official file (its name
says whose), and the architecture comes from the maker's own repository where one exists.
"""

from __future__ import annotations

from dataclasses import dataclass

_LLAMA_MODELS = (
    "https://github.com/meta-llama/llama-models/blob/364ed4ec2bdcc13ab3acb08e364e843b6322b9ae"
)
_GEMMA_PYTORCH = (
    "https://github.com/google/gemma_pytorch/blob/014acb7ac4563a5f77c76d7ff98f31b568c16508"
)
_DEEPSEEK_V3 = (
    "https://github.com/deepseek-ai/DeepSeek-V3/blob/4c2fdb8f55e049553b9f4f1a3241f86d739c8cf8"
)
_DEEPSEEK_V3_HEAD = (
    "https://github.com/deepseek-ai/DeepSeek-V3/blob/9b4e9788e4a3a731f7567338ed15d3ec549ce03b"
)


@dataclass(frozen=True)
class PublishedModel:
    """One model's attention, in the chapter's notation (the config's own key in brackets).

    Attributes:
        name: the model, as its makers name it.
        n_layers: L, the attention layers [num_hidden_layers, n_layers].
        n_heads: H, the query heads of a layer [num_attention_heads, n_heads].
        n_kv_heads: key/value heads [num_key_value_heads, n_kv_heads]; each serves
            n_heads // n_kv_heads query heads (grouped-query attention when fewer than H).
        d_head: the width of one head [head_dim]; where the config has no head_dim, the model
            code uses D // H, and a note says so.
        d_model: D, the width of the residual stream [hidden_size, dim]. Not always H * d_head
            (Gemma, DeepSeek): the query projection maps D to H * d_head.
        context_length: the longest sequence the config allows [max_position_embeddings];
            notes give the length the model was trained at where the sources say it.
        rope_base: the RoPE base [rope_theta] (of the global layers where they differ).
        window: the sliding window of the sliding layers [sliding_window]: a query sees itself
            and the window - 1 keys before it, so such a layer caches at most ``window``
            tokens. None: no layer slides.
        sliding_layers: the indices (from 0) of the layers that use the window; the others
            attend to the whole context.
        d_latent: MLA only, the width of the cached latent c_KV of one token [kv_lora_rank].
        d_rope: MLA only, the width of the decoupled RoPE key that all heads share, cached
            beside the latent [qk_rope_head_dim].
        d_nope: MLA only, the per-head query/key width without RoPE [qk_nope_head_dim];
            a query or key head is d_nope + d_rope wide.
        d_v: MLA only, the per-head value width [v_head_dim].
        sources: the files the numbers were read from (a commit's GitHub file, or a page's
            address); the first is the main one.
        notes: derived values, disagreements between sources, and caveats.
    """

    name: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_model: int
    context_length: int
    rope_base: float
    window: int | None = None
    sliding_layers: tuple[int, ...] = ()
    d_latent: int | None = None
    d_rope: int | None = None
    d_nope: int | None = None
    d_v: int | None = None
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def is_latent(self) -> bool:
        """True for multi-head latent attention (MLA): the cache holds d_latent + d_rope
        numbers per token and layer, not 2 * n_kv_heads * d_head."""
        return self.d_latent is not None

    @property
    def global_layers(self) -> tuple[int, ...]:
        """The layers that attend to the whole context (every layer that does not slide)."""
        return tuple(i for i in range(self.n_layers) if i not in self.sliding_layers)


def _llama3_1(name: str, dim: int, n_layers: int, n_heads: int, hf: str = "") -> PublishedModel:
    """Llama 3.1 8B and 70B share everything but these four sizes (sku_list.py)."""
    scaling = (
        f"; the Hugging Face config read ({hf}) has max_position_embeddings 131072 and "
        "rope_scaling 'llama3', factor 8 on original_max_position_embeddings 8192: trained at "
        "8,192 tokens, RoPE stretched 8 times"
        if hf
        else ""
    )
    return PublishedModel(
        name=name,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=8,
        d_head=dim // n_heads,
        d_model=dim,
        context_length=131_072,
        rope_base=500_000.0,
        sources=(
            f"{_LLAMA_MODELS}/models/sku_list.py",
            f"{_LLAMA_MODELS}/models/datatypes.py",
            f"{_LLAMA_MODELS}/models/llama3/reference_impl/model.py",
        )
        + ((f"https://huggingface.co/{hf}",) if hf else ()),
        notes=(
            f"sku_list.py's arch_args have no head_dim: d_head = dim / n_heads = {dim} / "
            f"{n_heads}, as reference_impl/model.py computes it.",
            "context_length is datatypes.py's max_seq_length for Llama 3.1 (131,072)"
            + scaling
            + ".",
        ),
    )


PUBLISHED_MODELS: tuple[PublishedModel, ...] = (
    _llama3_1(
        "Llama 3.1 8B",
        dim=4096,
        n_layers=32,
        n_heads=32,
        hf="mlx-community/Meta-Llama-3.1-8B-bf16/blob/refs%2Fpr%2F1/config.json",
    ),
    _llama3_1("Llama 3.1 70B", dim=8192, n_layers=80, n_heads=64),
    PublishedModel(
        name="Mistral 7B v0.1",
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        d_head=128,
        d_model=4096,
        context_length=32_768,
        rope_base=10_000.0,
        window=4096,
        sliding_layers=tuple(range(32)),
        sources=(
            "https://huggingface.co/dmayboroda/42_mistral_0.1/blob/main/config.json",
            "https://github.com/huggingface/transformers/blob/001f85b38fb432858ace93f18622f07cec46d874/src/transformers/models/mistral/configuration_mistral.py",
            "https://huggingface.co/mlx-community/mistral-7B-v0.1/blob/bd10b289a348d5c9b49bed31feb63c4b2e8c7089/config.json",
            "https://github.com/mistralai/mistral-inference/blob/c18d5b9166ffa16ce58827346ed56a28d2876e7e/one_file_ref.py",
            "https://huggingface.co/docs/transformers/v4.34.0/en/model_doc/mistral",
        ),
        notes=(
            "The Hugging Face config.json (a re-save whose _name_or_path is "
            "mistralai/Mistral-7B-v0.1) has no head_dim: d_head = 4096 / 32; Mistral's own "
            "params.json format (the mlx-community copy) states head_dim 128.",
            "Three context lengths: config.json's max_position_embeddings is 32,768; the "
            "transformers docs say 'trained with 8k context length'; MistralConfig's default "
            "is 4096 * 32 = 131,072, the window's 'theoretical attention span'.",
            "Every layer slides. Mistral's reference code (one_file_ref.py) caches exactly "
            "sliding_window = 4096 tokens per layer in a rolling buffer, but its prefill mask "
            "lets position i see i - 4096 .. i, one key more: an off-by-one between its "
            "prefill mask and its cache.",
        ),
    ),
    PublishedModel(
        name="Qwen2.5-7B",
        n_layers=28,
        n_heads=28,
        n_kv_heads=4,
        d_head=128,
        d_model=3584,
        context_length=131_072,
        rope_base=1_000_000.0,
        sources=(
            "https://huggingface.co/neuralmagic-ent/Qwen2.5-7B-quantized.w8a8/blob/main/config.json",
            "https://huggingface.co/DrNicefellow/Qwen2.5-7B-O1-Journey-1-5.0bpw-exl2/blob/main/config.json",
            "https://github.com/QwenLM/Qwen2.5/blob/2abc0f3243e20cf45b6a3ab60308db701c0c3111/docs/source/getting_started/concepts.md",
        ),
        notes=(
            "Read from re-saves of the base model's config.json: neuralmagic's names the "
            "official snapshot Qwen/Qwen2.5-7B d149729398750b98c0af14eb82c78cfe92750796 and "
            "gives the sizes and max_position_embeddings (the stored page stops before "
            "rope_theta); DrNicefellow's, from unsloth/Qwen2.5-7B, gives the same sizes, "
            "rope_theta and the sliding-window keys.",
            "The config has no head_dim: d_head = 3584 / 28 = 128.",
            "No layer slides: use_sliding_window is false (sliding_window is null in the "
            "re-saves, and max_window_layers = 28 = L would leave no layer sliding anyway).",
            "context_length is the base config's max_position_embeddings (131,072); Qwen's "
            "docs give 32,768 as the packed training length, extended to 131,072 with YaRN, "
            "and the Instruct model's config.json says 32,768.",
        ),
    ),
    PublishedModel(
        name="Gemma 2 9B",
        n_layers=42,
        n_heads=16,
        n_kv_heads=8,
        d_head=256,
        d_model=3584,
        context_length=8192,
        rope_base=10_000.0,
        window=4096,
        sliding_layers=tuple(range(0, 42, 2)),
        sources=(
            f"{_GEMMA_PYTORCH}/gemma/config.py",
            f"{_GEMMA_PYTORCH}/gemma/model.py",
            "https://huggingface.co/hfhugs/gemma-2-9b-it/blob/main/config.json",
        ),
        notes=(
            "get_config_for_9b sets head_dim = 256 explicitly: H * d_head = 16 * 256 = 4096 "
            "is wider than d_model = 3584.",
            "attn_types = [LOCAL_SLIDING, GLOBAL] * 21 and layer i uses attn_types[i % 2]: "
            "layers 0, 2, ..., 40 slide over 4096 tokens, layers 1, 3, ..., 41 are global.",
            "context_length (8192) and rope_base (10,000) are gemma_pytorch's defaults, the "
            "same as max_position_embeddings and rope_theta in the Hugging Face config "
            "(hfhugs/gemma-2-9b-it, an upload of google/gemma-2-9b-it), which also has "
            "sliding_window 4096.",
            "A sliding layer needs only its last 4096 keys and values, but gemma_pytorch "
            "allocates max_seq_len for every layer and only masks the rest: the saving is "
            "the cache's to take, not automatic.",
        ),
    ),
    PublishedModel(
        name="Gemma 3 12B",
        n_layers=48,
        n_heads=16,
        n_kv_heads=8,
        d_head=256,
        d_model=3840,
        context_length=131_072,
        rope_base=1_000_000.0,
        window=1024,
        sliding_layers=tuple(i for i in range(48) if i % 6 != 5),
        sources=(
            f"{_GEMMA_PYTORCH}/gemma/config.py",
            f"{_GEMMA_PYTORCH}/gemma/model.py",
            "https://huggingface.co/OpenPipe/gemma-3-12b-it-text-only/blob/main/config.json",
        ),
        notes=(
            "get_config_for_12b sets head_dim = 256 explicitly: H * d_head = 16 * 256 = 4096 "
            "is wider than d_model = 3840.",
            "attn_types repeats five LOCAL_SLIDING then one GLOBAL: layers 5, 11, ..., 47 "
            "(8 of 48) are global, the other 40 slide over 1024 tokens "
            "(sliding_window_pattern 6 in the Hugging Face config).",
            "Two RoPE bases: 1,000,000 on the global layers (scaled linearly by 8), 10,000 on "
            "the sliding ones (rope_local_base_freq in the Hugging Face config).",
            "The Hugging Face config read is OpenPipe's text-only re-save of "
            "google/gemma-3-12b-it; its numbers equal gemma_pytorch's.",
        ),
    ),
    PublishedModel(
        name="DeepSeek-V2",
        n_layers=60,
        n_heads=128,
        n_kv_heads=128,
        d_head=128,
        d_model=5120,
        context_length=163_840,
        rope_base=10_000.0,
        d_latent=512,
        d_rope=64,
        d_nope=128,
        d_v=128,
        sources=(
            f"{_DEEPSEEK_V3}/inference/configs/config_236B.json",
            "https://huggingface.co/deepseek-ai/DeepSeek-V2-Chat/blame/f1e9ce2c2c673fed87bbbfe625100c1589615c64/config.json",
            "https://github.com/deepseek-ai/DeepSeek-V2/blob/ec98ee3cbffc32104cd55dba8af884b3d772602a/README.md",
            f"{_DEEPSEEK_V3_HEAD}/inference/model.py",
        ),
        notes=(
            "The 236B config of DeepSeek's inference code (in the DeepSeek-V3 repository) has "
            "the same attention numbers as DeepSeek-V2-Chat's config.json.",
            "MLA caches, per token and layer, the latent c_KV (d_latent = 512) and one "
            "RoPE key shared by all heads (d_rope = 64): 576 numbers (model.py's kv_cache and "
            "pe_cache). n_kv_heads = 128 is num_key_value_heads: decompressed, every query "
            "head has its own key and value (no grouping).",
            "d_head = 128 = qk_nope_head_dim = v_head_dim; a query or key head is "
            "128 + 64 = 192 wide. H * d_head = 16384 is wider than d_model = 5120.",
            "context_length is max_position_embeddings, 163,840 = 4096 * 40 (YaRN "
            "factor 40 on original_max_position_embeddings 4096); the README says 128k.",
        ),
    ),
    PublishedModel(
        name="DeepSeek-V3",
        n_layers=61,
        n_heads=128,
        n_kv_heads=128,
        d_head=128,
        d_model=7168,
        context_length=163_840,
        rope_base=10_000.0,
        d_latent=512,
        d_rope=64,
        d_nope=128,
        d_v=128,
        sources=(
            f"{_DEEPSEEK_V3}/inference/configs/config_671B.json",
            f"{_DEEPSEEK_V3_HEAD}/inference/model.py",
            f"{_DEEPSEEK_V3_HEAD}/README.md",
            f"{_DEEPSEEK_V3_HEAD}/README_WEIGHTS.md",
        ),
        notes=(
            "config_671B.json has no num_key_value_heads; n_kv_heads = n_heads = 128 as in "
            "DeepSeek-V2 (MLA decompresses one key and value per head). The cache holds "
            "d_latent + d_rope = 576 numbers per token and layer (model.py's kv_cache and "
            "pe_cache).",
            "d_head = 128 = qk_nope_head_dim = v_head_dim; a query or key head is "
            "128 + 64 = 192 wide. H * d_head = 16384 is wider than d_model = 7168.",
            "context_length: model.py's YaRN settings give original_seq_len 4096 * "
            "rope_factor 40 = 163,840 (max_position_embeddings in Hugging Face-format copies "
            "of the config); the README says 128K.",
            "n_layers = 61 counts the main model; the weights add one multi-token-prediction "
            "layer (README_WEIGHTS.md), not used for ordinary generation.",
        ),
    ),
)
