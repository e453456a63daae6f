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
