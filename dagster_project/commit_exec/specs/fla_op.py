"""Spec for vLLM 9fce7bee's ``fla/ops/op.py`` row (issue 35): the helper module whose TMA
descriptor constructor ("Accelerate solve_tril with TMA") the commit's new ``solve_tril``
uses. The row's file holds no launcher; the launcher is ``solve_tril.py`` at the same commit
(a sibling, like ``index.py``), so each side runs its own commit's pair: before, the two-launch
solve of ``sha^`` (which does not use ``op.py``); after, the one-launch TMA solve through
this ``op.py``. Inputs, shapes, reference and tolerance are ``vllm_fla_solve_tril``'s
(``specs.more_vllm``), which runs the same commit's ``solve_tril.py`` row.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .base import Inputs, Outputs, Spec
from .more_vllm import SOLVE_TRIL, _tril_call

_FLA = "vllm/model_executor/layers/fla/ops"


def _op_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    """``solve_tril`` of this side's sibling, called as ``vllm_fla_solve_tril`` calls it
    (which also answers the sibling's ``is_tma_supported`` as ``fla/utils.py`` would)."""
    return _tril_call(mod._ce_sibling("vllm.model_executor.layers.fla.ops.solve_tril"), x, sha)


FLA_OP_SOLVE_TRIL = dataclasses.replace(
    SOLVE_TRIL,
    name="vllm_fla_op_via_solve_tril",
    rows=(("vllm", "9fce7bee", f"{_FLA}/op.py"),),
    siblings={"": (f"{_FLA}/solve_tril.py", f"{_FLA}/index.py")},
    call=_op_call,
)

SPECS: tuple[Spec, ...] = (FLA_OP_SOLVE_TRIL,)
