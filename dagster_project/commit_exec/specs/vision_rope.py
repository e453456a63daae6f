"""Spec for SGLang 9a414b16 (issue 35): the vision tower's rotary embedding of Qwen2.5-VL
under ``torch.compile`` (``layers/rotary_embedding.py``'s ``apply_rotary_pos_emb_native``).

On CUDA ``apply_rotary_pos_emb`` is ``apply_rotary_pos_emb_native``, which the vision
attention (``layers/attention/vision.py``) calls on every layer with q, k as ``[tokens,
heads, head_size]`` and cos, sin as ``[tokens, head_size]`` (already doubled to the head
size there). Before the commit the function ran eagerly (a chain of fp32 elementwise ops and
two ``cat``s per tensor); the commit decorates it with ``torch.compile(dynamic=True)`` on
SGLang's CUDA backend (inductor: ``loader``'s ``get_compiler_backend`` shim), so inductor
fuses it into generated Triton kernels. The runner calls every side before timing, which
compiles it once per shape. Torch reference: the rotation in fp32, rounded once (our own
writing). No path is left unchanged: the runner times an A/A control.

Shapes: Qwen2.5-VL's vision tower (hidden 1280, 16 heads of 80; the same tower in the 3B,
7B and 72B models), images of 448 to 1792 pixels a side (patch 14: 1,024 to 16,384
patches), and the tower split over 2 GPUs (8 heads).
"""

from __future__ import annotations

from typing import Any

from .base import Inputs, Outputs, Shape, Spec

_TOWER = "Qwen2.5-VL vision tower (16 heads of 80)"


def _torch() -> Any:
    import torch

    return torch


def _rope_inputs(shape: Shape, gen: Any, device: Any) -> Inputs:
    """q, k as the vision attention hands them on; cos/sin of the 2-D rotary positions
    (a frequency per half head, doubled to the head size), in the activations' dtype."""
    torch = _torch()
    t, h, d = shape["tokens"], shape["heads"], shape.get("head", 80)
    dt = getattr(torch, shape.get("dtype", "bfloat16"))
    side = max(1, int(t**0.5))
    rows, cols = torch.arange(t, device=device) // side, torch.arange(t, device=device) % side
    inv = 1.0 / (10000 ** (torch.arange(0, d // 2, 2, device=device).float() / (d // 2)))
    half = torch.cat([rows[:, None] * inv, cols[:, None] * inv], -1)  # [t, d/2]
    angles = torch.cat([half, half], -1)
    return {
        "q": torch.randn(t, h, d, generator=gen, device=device).to(dt),
        "k": torch.randn(t, h, d, generator=gen, device=device).to(dt),
        "cos": angles.cos().to(dt),
        "sin": angles.sin().to(dt),
    }


def _rope_call(mod: Any, x: Inputs, sha: str) -> Outputs:
    q, k = mod.apply_rotary_pos_emb_native(x["q"], x["k"], x["cos"], x["sin"])
    return {"q": q, "k": k}


def _rope_reference(x: Inputs) -> Outputs:
    cos, sin = x["cos"].float()[:, None, :], x["sin"].float()[:, None, :]

    def rotate(v: Any) -> Any:
        torch = _torch()
        f = v.float()
        half = f.shape[-1] // 2
        turned = torch.cat([-f[..., half:], f[..., :half]], -1)
        return (f * cos + turned * sin).to(v.dtype)

    return {"q": rotate(x["q"]), "k": rotate(x["k"])}


def _shape(name: str, tokens: int, heads: int, why: str) -> Shape:
    return {"name": name, "source": f"{_TOWER}, {why}", "tokens": tokens, "heads": heads}


VISION_ROPE = Spec(
    name="sglang_vision_rope_native",
    launcher="apply_rotary_pos_emb_native",
    rows=(("sglang", "9a414b16", "python/sglang/srt/layers/rotary_embedding.py"),),
    shapes=(
        _shape("qwen25-vl-448px", 1024, 16, "a 448x448 image"),
        _shape("qwen25-vl-896px", 4096, 16, "an 896x896 image"),
        _shape("qwen25-vl-1792px", 16384, 16, "a 1792x1792 image"),
        _shape("qwen25-vl-tp2-896px", 4096, 8, "an 896x896 image, the tower at TP 2"),
    ),
    random_shape=lambda r: {
        "name": "random",
        "tokens": r.choice([4, 64, 300]),
        "heads": r.choice([1, 2, 4]),
        "head": r.choice([64, 80]),
    },
    make_inputs=_rope_inputs,
    call=_rope_call,
    reference=_rope_reference,
    tolerance_why="two products and a sum per element in fp32, rounded once to bf16 (inductor "
    "may contract them into an FMA): dtype defaults (4 ulp)",
)

SPECS: tuple[Spec, ...] = (VISION_ROPE,)
