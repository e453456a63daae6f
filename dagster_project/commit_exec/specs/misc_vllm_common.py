"""Helpers shared by the misc vLLM spec modules (issue 35): torch imported lazily, seeded
permutations, and the CPU stand-ins for the CUDA queries launchers make (the CPU
interpreter runs the same launchers as the H100)."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any


def _torch() -> Any:
    import torch

    return torch


def _cpu_gen(gen: Any, device: Any) -> Any:
    """A CPU generator seeded from ``gen`` (for ``randperm``, which CUDA generators refuse
    when the tensor lives on the CPU)."""
    torch = _torch()
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=device).item())
    return torch.Generator().manual_seed(seed)


def _perm(n: int, gen: Any, device: Any) -> Any:
    torch = _torch()
    return torch.randperm(n, generator=_cpu_gen(gen, device)).to(device)


@contextlib.contextmanager
def _cpu_device_properties(device: Any) -> Iterator[None]:
    """On the CPU interpreter only: ``torch.cuda.get_device_properties`` answers an H100's
    SM count and ``get_device_capability`` sm_90 (launchers size grids and tiles with them;
    a CPU build of torch has no CUDA to ask). On a GPU nothing is replaced."""
    torch = _torch()
    if device.type == "cuda":
        yield
        return
    saved = torch.cuda.get_device_properties, torch.cuda.get_device_capability
    torch.cuda.get_device_properties = lambda *_a, **_k: types.SimpleNamespace(
        multi_processor_count=132
    )
    torch.cuda.get_device_capability = lambda *_a, **_k: (9, 0)
    try:
        yield
    finally:
        torch.cuda.get_device_properties, torch.cuda.get_device_capability = saved


def _sm_count(device: Any) -> int:
    torch = _torch()
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return 132  # CPU interpreter: an H100's count, so the grid is what the GPU would see


class DeferredOutputs(dict[str, Any]):
    """A launcher's outputs built on first read. The runner reads a call's outputs only to
    compare them (``items()``) and discards them when timing, so a costly view of the
    outputs (an order-free gather, say) stays out of the timed call."""

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        super().__init__()
        self._build: Callable[[], dict[str, Any]] | None = build

    def _fill(self) -> None:
        if self._build is not None:
            build, self._build = self._build, None
            self.update(build())

    def items(self) -> Any:
        self._fill()
        return super().items()

    def keys(self) -> Any:
        self._fill()
        return super().keys()

    def values(self) -> Any:
        self._fill()
        return super().values()

    def __getitem__(self, key: str) -> Any:
        self._fill()
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._fill()
        return super().get(key, default)

    def __iter__(self) -> Iterator[str]:
        self._fill()
        return super().__iter__()

    def __len__(self) -> int:
        self._fill()
        return super().__len__()

    def __contains__(self, key: object) -> bool:
        self._fill()
        return super().__contains__(key)
