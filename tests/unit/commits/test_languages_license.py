"""Language recognition by extension and content; licences per blob version."""

from __future__ import annotations

import pytest

from dagster_project.mining.commits.languages import (
    CUTE_RE,
    classify_language,
    is_cute_dsl,
    python_language,
)
from dagster_project.mining.commits.license import (
    NON_OSS,
    detect_license,
    exclusion_reason,
    row_license,
)
from dagster_project.mining.commits.specs import is_binding_file
from tests.fixtures.commit_history import (
    BSD3_TEXT,
    MIT_TEXT,
    NOT_PERMITTED_TEXT,
    PROPRIETARY_TEXT,
    TENSORRT_TEXT,
)


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("csrc/a.cu", "CUDA"),
        ("include/flashinfer/x.cuh", "CUDA"),
        ("csrc/cpu/a.cpp", "C++"),
        ("csrc/ops.h", "C++"),
        ("csrc/rocm/a.hip", "C++"),
        ("csrc/a.cc", "C++"),
        ("csrc/a.jinja", None),
    ],
)
def test_native_languages_by_extension(path: str, language: str | None) -> None:
    assert classify_language("native", path, None, None) == language


def test_python_needs_a_kernel_marker_in_either_version() -> None:
    triton = b"import triton\n\n@triton.jit\ndef k(x):\n    pass\n"
    autotune = b"@triton.autotune(configs=[])\n@triton.jit\ndef k(x):\n    pass\n"
    host = b"import torch\n\ndef f(x):\n    return x\n"
    assert python_language(triton, host) == "Triton"
    assert python_language(host, autotune) == "Triton"
    assert python_language(host, host) is None
    assert python_language(b"# uses @triton.jitter\n") is None


@pytest.mark.parametrize(
    "src",
    [
        b"import cutlass.cute as cute\n",
        b"  from cutlass.cute.runtime import from_dlpack\n",
        b"from cutlass import cute, const_expr\n",
        b"@cute.kernel\ndef k():\n    pass\n",
        b"import torch\n@cute.jit\ndef k():\n    pass\n",
    ],
)
def test_cute_dsl_markers(src: bytes) -> None:
    assert is_cute_dsl(src) and CUTE_RE.search(src)
    # CuTe wins over Triton when a file has both.
    assert python_language(src + b"\n@triton.jit\ndef t():\n    pass\n") == "CuTe DSL"


@pytest.mark.parametrize(
    "src",
    [
        b"import cutlass_library\n",  # vLLM's CUTLASS generator scripts
        b"x = 1  # import cutlass.cute later\n",
        b"from cutlass import epilogue\n",
        b"def execute(cutlass_op):\n    return cutlass_op\n",
    ],
)
def test_not_cute_dsl(src: bytes) -> None:
    assert not is_cute_dsl(src)
    assert bool(CUTE_RE.search(src)) == is_cute_dsl(src)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("// SPDX-License-Identifier: Apache-2.0\n", "Apache-2.0"),
        ("# SPDX-License-Identifier: BSD-3-Clause\n", "BSD-3-Clause"),
        (
            "/* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception */\n",
            "Apache-2.0 WITH LLVM-exception",
        ),
        (
            '/*\n * Licensed under the Apache License, Version 2.0 (the "License");\n */\n',
            "Apache-2.0",
        ),
        (BSD3_TEXT, "BSD-3-Clause"),
        (BSD3_TEXT.replace("Neither the name", "Nor"), "BSD"),
        (MIT_TEXT, "MIT"),
        (
            "# This file contains code copied from another project.\n# The original source"
            " code was licensed under the MIT license.\n",
            "MIT",
        ),
        (TENSORRT_TEXT, "NVIDIA-TensorRT"),
        (PROPRIETARY_TEXT, "NVIDIA-proprietary"),
        (NOT_PERMITTED_TEXT, "NVIDIA-proprietary"),
        ("// no header here\n", None),
        (
            "/*\n * SPDX-License-Identifier: NVIDIA TensorRT Source Code License Agreement\n */\n",
            "NVIDIA-TensorRT",
        ),
        (
            "/*\n * without an express license\n * agreement from NVIDIA CORPORATION\n */\n",
            "NVIDIA-proprietary",
        ),
    ],
)
def test_detect_license(header: str, expected: str | None) -> None:
    assert detect_license((header + "int x;\n").encode()) == expected


def test_trap_rules_run_before_spdx_and_bsd() -> None:
    # An Apache SPDX line cannot launder a TensorRT-licensed file.
    blob = ("// SPDX-License-Identifier: Apache-2.0\n" + TENSORRT_TEXT).encode()
    assert detect_license(blob) == "NVIDIA-TensorRT"
    # The NVIDIA "not permit-ted" header has every BSD phrase too.
    assert (
        "Redistribution and use" in NOT_PERMITTED_TEXT and "Neither the name" in NOT_PERMITTED_TEXT
    )
    assert detect_license(NOT_PERMITTED_TEXT.encode()) in NON_OSS


def test_only_the_header_counts() -> None:
    blob = b"// SPDX-License-Identifier: Apache-2.0\n" + b"x" * 5000 + TENSORRT_TEXT.encode()
    assert detect_license(blob) == "Apache-2.0"
    late = b"int a;\n" * 700 + b"// SPDX-License-Identifier: MIT\n"
    assert detect_license(late) is None


def test_licence_change_between_versions() -> None:
    before = detect_license((TENSORRT_TEXT + "int x;\n").encode())
    after = detect_license(b"// SPDX-License-Identifier: Apache-2.0\nint x;\n")
    assert (before, after) == ("NVIDIA-TensorRT", "Apache-2.0")
    assert exclusion_reason(before, after) == "license_tensorrt"
    assert exclusion_reason("Apache-2.0", "NVIDIA-proprietary") == "license_proprietary"
    assert exclusion_reason("NVIDIA-proprietary", "NVIDIA-TensorRT") == "license_tensorrt"
    assert exclusion_reason("Apache-2.0", None) is None
    assert row_license("BSD-3-Clause", "Apache-2.0") == "Apache-2.0"
    assert row_license("BSD-3-Clause", None) == "BSD-3-Clause"
    assert row_license(None, None) == "Apache-2.0"


@pytest.mark.parametrize(
    ("path", "binding"),
    [
        ("csrc/torch_bindings.cpp", True),
        ("csrc/moe/torch_bindings.cpp", True),
        ("csrc/ops.h", True),
        ("csrc/cache.h", True),
        ("sgl-kernel/include/sgl_kernel_ops.h", True),
        ("sgl-kernel/csrc/common_extension.cc", True),
        ("sgl-kernel/csrc/cpu/torch_extension_cpu.cpp", True),
        ("csrc/flashinfer_ops.cu", True),
        ("csrc/trtllm_fused_moe_routing_binding.cu", True),
        ("python/csrc/flashinfer_norm_pybind.cu", True),
        ("csrc/layernorm_kernels.cu", False),
        ("csrc/quantization/fp8/ops.cuh", False),
    ],
)
def test_binding_files(path: str, binding: bool) -> None:
    assert is_binding_file(path) is binding


def test_licence_outside_the_allow_list_is_excluded_by_the_miner() -> None:
    """One allow-list (``license.OPEN_SOURCE``): an id in neither it nor the NVIDIA labels
    is dropped by the miner (``license_unlisted``) instead of failing the blocking gate."""
    gpl = detect_license(b"// SPDX-License-Identifier: GPL-2.0-only\nint x;\n")
    assert gpl == "GPL-2.0-only"
    assert exclusion_reason("Apache-2.0", gpl) == "license_unlisted"
    assert exclusion_reason(gpl, None) == "license_unlisted"
    # NVIDIA labels keep their own reasons, whatever the other side says.
    assert exclusion_reason(gpl, "NVIDIA-TensorRT") == "license_tensorrt"
    # A side without a header is judged by the row's label (the repository default).
    assert exclusion_reason(None, None, row_license(None, None)) is None
    assert exclusion_reason(None, None, row_license(None, None, "GPL-3.0")) == "license_unlisted"


def test_gx_licence_value_sets_are_the_allow_list() -> None:
    """The kernel_commits suite names ``OPEN_SOURCE`` instead of copying it; once loaded,
    its three licence expectations hold exactly that list."""
    import json
    from pathlib import Path

    from dagster_project.mining.commits.license import OPEN_SOURCE
    from dagster_project.quality.suites import SUITES_DIR, load_suite

    raw = (SUITES_DIR / "kernel_commits.json").read_text()
    assert not any(json.dumps(x) in raw for x in OPEN_SOURCE)  # no copy in JSON
    suite = load_suite(Path(SUITES_DIR / "kernel_commits.json"))
    sets = {
        e["kwargs"]["column"]: e["kwargs"]["value_set"]
        for e in suite["expectations"]
        if e["kwargs"].get("column", "").startswith("license") and "value_set" in e["kwargs"]
    }
    assert sets == dict.fromkeys(("license", "license_before", "license_after"), list(OPEN_SOURCE))
