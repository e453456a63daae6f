"""MoE model shapes that ``candidate_models`` matches config files against.

The checked-in ``model_shapes.csv`` is the offline truth; ``source`` records the evidence
for each row (configs.md §7: R = read in the repos, P = a config file plus a PR naming
the model, K = from memory) and ``verified`` is false until a Hub ``config.json`` has
confirmed it. ``refresh_model_shapes`` re-reads each model's ``config.json`` through a
caller-supplied fetcher (the asset passes ``huggingface_hub``), so this module stays
offline and testable.

``shared_experts`` counts only shared experts as wide as a routed expert: those are what
SGLang (and vLLM's ROCm AITER path) fuse into the routed GEMM as extra experts, turning
E=256 into E=257. A wider shared expert (Qwen1.5/Qwen2-MoE) runs as a separate MLP.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

import polars as pl

#: Version of model-shape snapshot handling. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "1"

SHAPES_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "hf_repo_id": pl.String(),
    "experts": pl.Int64(),
    "moe_intermediate_size": pl.Int64(),
    "hidden_size": pl.Int64(),
    "top_k": pl.Int64(),
    "shared_experts": pl.Int64(),
    "source": pl.String(),
    "verified": pl.Boolean(),
    "notes": pl.String(),
}

SNAPSHOT_FILE = "model_shapes.csv"


def load_model_shapes_snapshot() -> pl.DataFrame:
    """The checked-in snapshot table (one row per MoE model)."""
    data = resources.files("dagster_project.mining.configs").joinpath(SNAPSHOT_FILE).read_bytes()
    df = pl.read_csv(data, schema=SHAPES_SCHEMA)
    return df.with_columns(pl.col("notes").fill_null(""))


# Key names differ per architecture; the first present wins, in this order. The order
# matters: Qwen/DeepSeek configs carry both a dense ``intermediate_size`` and the expert
# ``moe_intermediate_size``; LongCat has a dense ``ffn_hidden_size`` and the expert
# ``expert_ffn_hidden_size``.
EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
INTER_KEYS = (
    "moe_intermediate_size",
    "expert_ffn_hidden_size",
    "intermediate_size",
    "ffn_hidden_size",
)
HIDDEN_KEYS = ("hidden_size", "d_model", "n_embd")
TOPK_KEYS = (
    "num_experts_per_tok",
    "moe_top_k",
    "moe_topk",
    "experts_per_token",
    "top_k",
    "moe_k",
    "num_experts_per_token",
)
SHARED_COUNT_KEYS = (
    "n_shared_experts",
    "num_shared_experts",
    "moe_num_shared_experts",
    "num_shared_expert",
)
SHARED_WIDTH_KEYS = ("shared_expert_intermediate_size", "shared_intermediate_size")
# Sub-configs that hold the language model of multimodal / nested configs.
NESTED_KEYS = ("text_config", "language_config", "llm_config", "thinker_config", "ffn_config")


def _flatten(config: Mapping[str, Any]) -> dict[str, Any]:
    """Merge nested sub-configs under the top level (inner values win for MoE keys)."""
    flat = dict(config)
    stack = [config]
    while stack:
        cur = stack.pop()
        for key in NESTED_KEYS:
            sub = cur.get(key)
            if isinstance(sub, Mapping):
                flat.update(sub)
                stack.append(sub)
    return flat


def _scalar(value: Any) -> int | None:
    """An int from a config value; per-layer lists (ERNIE, Hunyuan) give their maximum."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list | tuple) and value:
        ints = [v for v in (_scalar(x) for x in value) if v is not None]
        return max(ints) if ints else None
    return None


def _first(flat: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        if key in flat:
            value = _scalar(flat[key])
            if value is not None:
                return value
    return None


def shape_from_config(config: Mapping[str, Any]) -> dict[str, int]:
    """experts / moe_intermediate_size / hidden_size / top_k / shared_experts of a config.

    Raises ``ValueError`` if the config does not describe an MoE model.
    """
    flat = _flatten(config)
    experts = _first(flat, EXPERT_KEYS)
    inter = _first(flat, INTER_KEYS)
    hidden = _first(flat, HIDDEN_KEYS)
    top_k = _first(flat, TOPK_KEYS)
    if not (experts and inter and hidden and top_k):
        missing = [
            n
            for n, v in (
                ("experts", experts),
                ("intermediate", inter),
                ("hidden", hidden),
                ("top_k", top_k),
            )
            if not v
        ]
        raise ValueError(f"config.json lacks {', '.join(missing)}")
    shared = _first(flat, SHARED_COUNT_KEYS) or 0
    width = _first(flat, SHARED_WIDTH_KEYS)
    if width:  # Qwen-style: one shared expert, fusable only if as wide as a routed one
        shared = (shared or 1) if width == inter else 0
    if "text_config" in config and flat.get("model_type", "").startswith("llama4"):
        shared = 1  # Llama 4 always has one routed-size shared expert
    return {
        "experts": experts,
        "moe_intermediate_size": inter,
        "hidden_size": hidden,
        "top_k": top_k,
        "shared_experts": shared,
    }


def refresh_model_shapes(
    fetch_config: Callable[[str], dict], snapshot: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Re-read every model's Hub ``config.json``; keep the snapshot row where that fails.

    ``fetch_config(hf_repo_id)`` returns the parsed config.json (the caller decides how:
    ``huggingface_hub.hf_hub_download`` online, a dict in tests). Any exception or an
    unusable config falls back to the snapshot values for that model only, and says so
    in ``source``.
    """
    base = load_model_shapes_snapshot() if snapshot is None else snapshot
    rows = []
    for row in base.iter_rows(named=True):
        repo_id = row["hf_repo_id"]
        if not repo_id:
            rows.append(row)
            continue
        try:
            shape = shape_from_config(fetch_config(repo_id))
        except Exception as exc:  # noqa: BLE001 - any fetch/parse failure means "use snapshot"
            reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            rows.append({**row, "source": f"{row['source']} | refresh failed: {reason}"})
            continue
        rows.append({**row, **shape, "source": f"hf:{repo_id}/config.json", "verified": True})
    return pl.DataFrame(rows, schema=SHAPES_SCHEMA)
