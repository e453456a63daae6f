"""Importing one engine file alone: stubbed engine modules, trivial shims, relative imports,
stub base classes and decorators; the ``packaging`` fallback. Files written here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dagster_project.commit_exec.device.loader import (
    Stub,
    StubModule,
    load_file,
    package_of,
)

ENGINE_FILE = """
import functools
from vllm.platforms import current_platform
from vllm.utils import cdiv, next_power_of_2
from sglang.srt.utils import is_hip, get_bool_env_var, custom_decorator
from .sibling import helper
import sgl_kernel
from packaging.version import Version

_is_hip = is_hip()
HAS_NEW = Version("3.6.0+cu130") >= Version("3.4")


class Layer(helper.BaseLayer):
    pass


@custom_decorator
def launcher(n):
    return cdiv(n, 128), next_power_of_2(n)


FLAG = bool(get_bool_env_var("X"))
ROCM = current_platform.is_rocm()
CUDA = current_platform.is_cuda()
"""


def test_engine_file_imports_with_stubs(tmp_path: Path) -> None:
    f = tmp_path / "engine_file.py"
    f.write_text(ENGINE_FILE)
    mod = load_file(f, "_test_engine_file", "sglang.srt.layers")
    assert mod.launcher(300) == (3, 512)  # the decorator stub returned the function
    assert mod._is_hip is False
    assert mod.HAS_NEW is True
    assert mod.FLAG is False
    assert mod.ROCM is False and mod.CUDA is True
    assert issubclass(mod.Layer, object)
    assert isinstance(sys.modules["sgl_kernel"], StubModule)
    assert isinstance(mod.sgl_kernel.anything, Stub)


def test_a_file_that_fails_raises(tmp_path: Path) -> None:
    f = tmp_path / "bad.py"
    f.write_text("import definitely_not_a_module_here\n")
    try:
        load_file(f, "_test_bad", "vllm")
    except ModuleNotFoundError as exc:
        assert "definitely_not_a_module_here" in str(exc)
    else:
        raise AssertionError("expected the import error")


def test_package_of() -> None:
    assert package_of("python/sglang/srt/layers/x.py") == "sglang.srt.layers"
    assert package_of("vllm/attention/ops/y.py") == "vllm.attention.ops"


TYPE_LEVEL_FILE = """
from typing import Optional, Union
from vllm.model_executor.layers.quantization import QuantConfig, Fp8Config
from vllm.utils.deep_gemm import get_tma_aligned_size
from .config import MoeConfig


def launcher(x: QuantConfig | None = None, y: None | QuantConfig = None) -> QuantConfig | None:
    return "called"


Alias = dict[str, QuantConfig | None]
Indexed = QuantConfig[int]
Either = Optional[QuantConfig] | Union[Fp8Config, None]


class Both(QuantConfig, Fp8Config):
    kind = "both"


class WithInt(MoeConfig, int):
    pass


IS_CONFIG = isinstance(3, QuantConfig) or issubclass(int, QuantConfig)
TMA_ROWS = get_tma_aligned_size(130, 4)
"""


def test_stubs_support_type_level_use(tmp_path: Path) -> None:
    """s01's four load errors (``Stub | None`` in annotations) and their relatives: stubs in
    unions, subscripts, several stub bases or a stub beside a real base, isinstance tests,
    all evaluated at import time."""
    f = tmp_path / "typed_file.py"
    f.write_text(TYPE_LEVEL_FILE)
    mod = load_file(f, "_test_typed_file", "vllm.model_executor.layers.quantization.utils")
    assert mod.launcher() == "called"
    assert isinstance(mod.Indexed, Stub) and isinstance(mod.Either, Stub | object)
    assert mod.Both.kind == "both" and mod.Both.__mro__ == (mod.Both, object)
    assert mod.WithInt(5) + 1 == 6  # the real base kept, the stub dropped
    assert mod.IS_CONFIG is False
    assert mod.TMA_ROWS == 132  # 130 rows rounded up to 16 bytes of fp32 (4 per 16 B)


def test_fp8_range_shim_is_cudas_e4m3fn(tmp_path: Path) -> None:
    """vLLM's ``get_fp8_min_max()`` (quant_utils, stubbed) is unpacked at call time: a stub
    there was d08b356e's run error on the CPU check (nothing to unpack)."""
    pytest.importorskip("torch")
    f = tmp_path / "fp8_range.py"
    f.write_text(
        "from vllm.model_executor.layers.quantization.utils.quant_utils import "
        "get_fp8_min_max\nLO, HI = get_fp8_min_max()\n"
    )
    mod = load_file(f, "_test_fp8_range", "vllm.model_executor.layers.quantization.utils")
    assert (mod.LO, mod.HI) == (-448.0, 448.0)


def test_compiler_backend_shim_is_sglangs_cuda_answer(tmp_path: Path) -> None:
    """SGLang decorates helpers with ``torch.compile(backend=get_compiler_backend())`` at
    import; a stub there reached dynamo as a backend name (KeyError at the first call)."""
    f = tmp_path / "compiled_file.py"
    f.write_text("from sglang.srt.utils import get_compiler_backend\nB = get_compiler_backend()\n")
    assert load_file(f, "_test_compiled_file", "sglang.srt.layers").B == "inductor"


FAKES_FILE = """
import torch


@torch.library.register_fake("sgl_kernel::moe_fused_gate")
def _fake_gate(x):
    return x


torch.library.register_fake("_C::per_token_group_fp8_quant", _fake_gate)
NAME = _fake_gate.__name__
"""


def test_fake_kernels_of_stubbed_extensions_are_skipped(tmp_path: Path) -> None:
    """SGLang's topk.py registers fakes for sgl_kernel ops at import; those ops do not exist
    here, and torch raised ("operator ... does not exist") before the loader skipped them.
    Outside the import torch's own register_fake is back."""
    torch = pytest.importorskip("torch")
    original = torch.library.register_fake
    f = tmp_path / "fakes_file.py"
    f.write_text(FAKES_FILE)
    assert load_file(f, "_test_fakes_file", "sglang.srt.layers.moe").NAME == "_fake_gate"
    assert torch.library.register_fake is original
