"""Hugging Face Hub reads for model shapes (no dagster import).

``HF_HUB_OFFLINE`` is honoured by huggingface_hub itself; ``hub_reachable`` asks once,
with a short timeout, so an offline build does not pay one network timeout per model.
"""

from __future__ import annotations

import json
import os
from typing import Any


def hub_reachable(timeout_s: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    try:
        from huggingface_hub import HfApi

        HfApi().model_info("Qwen/Qwen3-30B-A3B", timeout=timeout_s)
    except Exception:  # noqa: BLE001 - any failure means "use the snapshot"
        return False
    return True


def fetch_model_config(repo_id: str) -> dict[str, Any]:
    """The parsed ``config.json`` of a Hub model (cached by huggingface_hub)."""
    from huggingface_hub import hf_hub_download

    with open(hf_hub_download(repo_id, "config.json")) as f:
        return json.load(f)
