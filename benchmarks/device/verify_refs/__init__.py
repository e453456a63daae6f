"""References of the ops ``sim_verify_rungs.py`` did not cover at first, one module per op
family. Each module's ``SETUPS`` maps an op name to its setup: ``setup(case, e)`` fills
``e.d`` with the inputs and outputs by the names the CUDA wrapper and the Triton entry
point use (``e.outs``: outputs in the Triton return order; ``e.inplace``; ``e.aliases``;
``e.tol``) and returns ``ref(pristine) -> {output name: fp32 tensor}``.

Torch only, imported lazily through ``e.torch``: ``prepare`` runs without torch, the
device runs without the project."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verify_refs import attention, other, quant

SETUPS: dict[str, Callable[[dict[str, Any], Any], Any]] = {
    **attention.SETUPS,
    **quant.SETUPS,
    **other.SETUPS,
}
