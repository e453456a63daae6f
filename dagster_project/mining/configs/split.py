"""The tuned_configs train/test split: one rule, keyed by the deployment a file tunes.

A row's group (``split_group``) is its parsed, normalised deployment: kernel family, the
shape numbers (E, N, K), the card's normalised ``gpu``, ``dtype`` and ``block_shape``.
Everything that names one deployment in different ways lands in one group, because the
key is built from parsed values, not from the file name:

- spelling: SGLang writes ``block_shape=[128, 128]`` where vLLM writes ``[128,128]`` (200
  of the 291 basenames the two repos share have identical content), and GPU names that
  the ``gpu`` column normalises to one model (``A100-SXM4-40GB`` / ``A100-SXM4-80GB``,
  ``NVIDIA_H100`` / ``NVIDIA_H100_80GB_HBM3``) are one deployment; a file-name key left 5
  (shape, GPU, dtype) tuples on both sides on the real clones;
- folder: the Triton-version folder and the repo are not part of the key, so one
  deployment re-tuned for another Triton version stays on one side;
- ``_down`` and ``per_channel_quant`` variants share their deployment's group: a
  down-projection (TMA) config is a different GEMM but the same deployment, tuned in the
  same run, and SGLang falls back to the up config when the down file is missing, so
  splitting the pair would show the model one half of the answer in training.

- content: deployments that share a file's content (``copies``: one table shipped under
  several device names, or the same table in vLLM and SGLang) are one group, so a copy
  never sits on the other side of its original; such a group is named by the smallest
  deployment key in it. A deployment that shares no content keeps its own key.

A group is ``test`` when SHA-256 of the salted key falls in the lowest ``TEST_FRACTION``
of the hash space: stable across runs, machines and refreshes, and independent of which
other files exist. ``dataset.build_tuned_configs`` applies it; the blocking gate checks
that no ``split_group`` has rows on both sides.
"""

from __future__ import annotations

import hashlib

import polars as pl

#: Version of the deployment split. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "2"

TEST_FRACTION = 0.09
SALT = "kernelhouse/tuned_configs/split/v1"

#: The columns of a tuned_configs row the group key is built from, in key order.
KEY_COLUMNS = ("family", "E", "N", "K", "gpu", "dtype", "block_shape")


def deployment_group(
    family: str | None,
    E: int | None,
    N: int | None,
    K: int | None,
    gpu: str | None,
    dtype: str | None,
    block_shape: list[int] | None,
) -> str:
    """The group key of one row (see the module docstring)."""
    block = "x".join(str(b) for b in block_shape) if block_shape else "-"
    return f"{family}|E={E}|N={N}|K={K}|gpu={gpu}|dtype={dtype}|block={block}"


def split_of(group: str, test_fraction: float = TEST_FRACTION) -> str:
    """``"test"`` for about ``test_fraction`` of groups, ``"train"`` otherwise."""
    digest = hashlib.sha256(f"{SALT}:{group}".encode()).digest()
    return "test" if int.from_bytes(digest[:8], "big") / 2**64 < test_fraction else "train"


def merge_by_content(keys: list[str], contents: list[str | None]) -> list[str]:
    """Each row's deployment key replaced by the smallest key of every deployment that
    shares a file content with it, transitively (union-find)."""
    parent: dict[str, str] = {}

    def find(k: str) -> str:
        while parent.get(k, k) != k:
            k = parent[k]
        return k

    first: dict[str, str] = {}
    for key, content in zip(keys, contents, strict=True):
        if content is None:
            continue
        other = first.setdefault(content, key)
        a, b = find(key), find(other)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return [find(k) for k in keys]


def apply_deployment_split(
    rows: pl.DataFrame, test_fraction: float = TEST_FRACTION
) -> pl.DataFrame:
    """Set ``split_group`` and ``split`` on tuned_configs rows (columns replaced in place
    when present, appended otherwise). With a ``content_key`` column, deployments that
    share a file content are one group."""
    keys = [deployment_group(*r) for r in rows.select(*KEY_COLUMNS).iter_rows()]
    if "content_key" in rows.columns:
        keys = merge_by_content(keys, rows["content_key"].to_list())
    cache: dict[str, str] = {}
    splits = [cache.setdefault(k, split_of(k, test_fraction)) for k in keys]
    return rows.with_columns(
        split_group=pl.Series(keys, dtype=pl.String), split=pl.Series(splits, dtype=pl.String)
    )
