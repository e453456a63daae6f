"""Triton helpers the lora specs hand to a loaded file whose ``@triton.jit`` helper lives in
a sibling file the loader does not import (it stubs the whole engine package).

Imported lazily by ``specs.lora`` on the device side only (it imports triton at the top).
Each helper is our own writing of the sibling's contract, stated in its docstring; a helper
that got the contract wrong makes the ``after`` side miss the oracle, never pass silently.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def token_rows(sorted_token_ids, seg_start, s_offset, seg_len, SORTED_BY_ADAPTER: tl.constexpr):
    """SGLang's ``_resolve_token_positions`` (lora/triton_ops/kernel_utils.py from 32d9fe5a):
    the physical row of each logical offset ``s_offset`` in a segment starting at
    ``seg_start``: through the permutation ``sorted_token_ids`` when segments are merged by
    adapter, else the offset itself; int64, as the callers index with it."""
    rows = seg_start + s_offset
    if SORTED_BY_ADAPTER:
        rows = tl.load(sorted_token_ids + rows, mask=s_offset < seg_len, other=0)
    return rows.to(tl.int64)
