"""Train/test split grouped by config identity, so no deployment leaks across the split.

The group key is the file's basename with spaces removed and the ``_down`` suffix
stripped:

- spaces: SGLang writes ``block_shape=[128, 128]`` where vLLM writes ``[128,128]``; 200
  of the 291 basenames the two repos share have identical content, so without this the
  same answer would sit on both sides.
- directory: the Triton-version folder and the repo are not part of the key, so one
  (shape, GPU, dtype) re-tuned for another Triton version stays on one side.
- ``_down``: a down-projection (TMA) config goes with its up-projection twin. It is a
  different GEMM, but the same deployment, tuned in the same run, and SGLang falls back
  to the up config when the down file is missing; splitting the pair would let the model
  see one half of the answer in training.

The hash is SHA-256 of a salted key, so the assignment is stable across runs, machines
and refreshes, and independent of which other files exist.
"""

from __future__ import annotations

import hashlib

from dagster_project.mining.configs.names import normalised_basename

#: Version of the deployment split. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "1"

TEST_FRACTION = 0.09
SALT = "kernelhouse/tuned_configs/split/v1"


def split_group(basename: str) -> str:
    """The grouping key of a config file (see the module docstring)."""
    key = normalised_basename(basename)
    if key.endswith("_down.json"):
        key = key[: -len("_down.json")] + ".json"
    return key


def split_for(basename: str, test_fraction: float = TEST_FRACTION) -> str:
    """``"test"`` for about ``test_fraction`` of config groups, ``"train"`` otherwise."""
    digest = hashlib.sha256(f"{SALT}:{split_group(basename)}".encode()).digest()
    bucket = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if bucket < test_fraction else "train"


def deployment_group(
    family: str | None,
    E: int | None,
    N: int | None,
    K: int | None,
    gpu: str | None,
    dtype: str | None,
    block_shape: list[int] | None,
) -> str:
    """The group key actually used by ``apply_deployment_split``.

    Measured on the real clones, the file-name key alone leaks: GPU names that the card's
    ``gpu`` column normalises to one model (``A100-SXM4-40GB`` / ``A100-SXM4-80GB``,
    ``NVIDIA_H100`` / ``NVIDIA_H100_80GB_HBM3``) land in different groups, so the same
    (shape, GPU, dtype) appeared in both splits (5 tuples). Keying on the parsed,
    normalised deployment — which every spelling of one file name maps to identically —
    keeps the file-name guarantees above and closes that gap. ``per_channel_quant`` and
    ``_down`` variants share their deployment's group.
    """
    block = "x".join(str(b) for b in block_shape) if block_shape else "-"
    return f"{family}|E={E}|N={N}|K={K}|gpu={gpu}|dtype={dtype}|block={block}"


def apply_deployment_split(rows, test_fraction: float = TEST_FRACTION):  # noqa: ANN001, ANN201 - polars frames
    """Set ``split_group`` and ``split`` on tuned_configs rows by deployment group."""
    import polars as pl

    keys = [
        deployment_group(*r)
        for r in rows.select("family", "E", "N", "K", "gpu", "dtype", "block_shape").iter_rows()
    ]

    def bucket(key: str) -> str:
        digest = hashlib.sha256(f"{SALT}:{key}".encode()).digest()
        return "test" if int.from_bytes(digest[:8], "big") / 2**64 < test_fraction else "train"

    cache: dict[str, str] = {}
    splits = [cache.setdefault(k, bucket(k)) for k in keys]
    return rows.with_columns(
        split_group=pl.Series(keys, dtype=pl.String), split=pl.Series(splits, dtype=pl.String)
    )
