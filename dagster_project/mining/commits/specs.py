"""Where the kernels live in each engine, over the whole of its history.

Kernel directories moved several times (SGLang's ``sgl-kernel/src/sgl-kernel/csrc`` became
``sgl-kernel/csrc``; FlashInfer's ``python/csrc`` became ``csrc``; vLLM's
``vllm/attention/ops`` moved under ``vllm/v1/attention``), so a spec lists every location a
kernel ever had, measured in ``shared/reference/commits.md`` §1. A path counts only when it is
under a *native* glob with a C/C++/CUDA extension, or under a *python* glob and its content
is Triton or CuTe DSL (see ``languages.py``). Tests, benchmarks, examples, docs and vendored
trees are excluded everywhere with one regex, because their "kernels" are harnesses or
someone else's code (``sgl-kernel/3rdparty`` is vendored TensorRT-LLM).

Globs use git's ``:(glob)`` syntax (``*`` stops at ``/``, ``**`` crosses directories) so the
same strings drive ``git log`` pathspecs and the Python-side classification.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from dagster_project.mining.commits.license import APACHE_2
from dagster_project.mining.commits.perf_filter import DEFAULT_RULE

#: Version of kernel path globs and binding-file rules per repo. Bump it whenever mined
#: output changes: it is part of the miner version (``mining/versions.py``); a bump
#: re-mines.
RULES_VERSION = "1"

# Directories whose files are never kernels, at any depth (reference §1), plus test and
# benchmark basenames (FlashInfer's old ``src/bench_*.cu`` / ``src/test_*.cu``).
EXCLUDE_PATH_RE = re.compile(
    r"(^|/)(tests?|testing|benchmarks?|bench|examples?|docs?|3rdparty|third_party)/"
    r"|(^|/)(test|bench)[^/]*$"
    r"|_test\.(cu|cc|cpp|py)$"
)

NATIVE_EXT_RE = re.compile(r"\.(cu|cuh|cpp|cc|cxx|c|h|hpp|inl|inc|hip|mu|muh)$")

# Registration / binding files: they declare or register ops, they are not kernels.
# Rows are kept (users filter on ``is_binding_file``) because the card keeps them.
BINDING_FILE_RE = re.compile(
    r"(^|/)("
    r"torch_bindings\.(cpp|cc)"
    r"|ops\.h"
    r"|cache\.h"
    r"|sgl_kernel_ops\.h"
    r"|[^/]*_extension[^/]*\.(cc|cpp|cu)"
    r"|[^/]*pybind[^/]*\.(cc|cpp|cu)"
    r"|[^/]*_binding\.(cc|cpp|cu)"
    r"|flashinfer_ops[^/]*\.(cc|cpp|cu)"
    r"|registration\.h"
    r")$"
)


def glob_to_regex(glob: str) -> str:
    """Translate one git ``:(glob)`` pattern into an anchored regular expression.

    ``**/`` matches zero or more directories, a trailing ``/**`` everything below, ``*``
    and ``?`` never cross ``/`` — exactly git's wildmatch rules for the forms we use.
    """
    out: list[str] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "^" + "".join(out) + "$"


def _compile(globs: tuple[str, ...]) -> re.Pattern[str]:
    if not globs:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?:{glob_to_regex(g)})" for g in globs))


@dataclass(frozen=True)
class RepoSpec:
    """Everything repo-specific the commit miner needs; plain data so settings can override.

    ``stop_at``: an optional commit to treat as the newest one to mine (used when a clone
    carries fork commits above upstream); ignored unless it is an ancestor of the mined head.
    ``trim_unnumbered_tip``: mine only up to the newest first-parent commit whose subject
    ends in ``(#N)``. Upstream tips are always squash merges, so this is a no-op there, and
    on the local-inference-lab fork it drops the 53 PR-less "b12x" commits (it resolves to
    ``9aaf83ef5``, the cut the reference analysis used) without hard-coding a sha that would
    freeze a real upstream clone.
    """

    name: str
    native_globs: tuple[str, ...]
    python_globs: tuple[str, ...]
    pr_url_template: str
    stop_at: str | None = None
    trim_unnumbered_tip: bool = False
    default_license: str = APACHE_2
    title_rule: str = DEFAULT_RULE
    extra_excludes: tuple[str, ...] = field(default_factory=tuple)

    def pr_url(self, number: int | None) -> str | None:
        return None if number is None else self.pr_url_template.format(n=number)

    def with_(self, **changes: Any) -> RepoSpec:
        """A copy with some fields replaced (settings use this for overrides)."""
        return replace(self, **changes)

    @cached_property
    def _native_re(self) -> re.Pattern[str]:
        return _compile(self.native_globs)

    @cached_property
    def _python_re(self) -> re.Pattern[str]:
        return _compile(self.python_globs)

    @cached_property
    def _extra_exclude_re(self) -> re.Pattern[str]:
        return _compile(self.extra_excludes)

    def pathspecs(self) -> list[str]:
        """``git log`` pathspecs covering every kernel glob (a superset; ``kernel_kind``
        stays the authority).

        ``dir/**`` becomes the plain directory ``dir``: git prunes whole trees by literal
        prefix, while ``:(glob)`` runs wildmatch on every path (vLLM: 1.0 s vs 2.3 s).
        Exclusions are left to Python for the same reason (``:(exclude)`` cost +0.5 s).
        """
        out: list[str] = []
        for g in dict.fromkeys(self.native_globs + self.python_globs):
            prefix = g[:-3] if g.endswith("/**") else None
            if prefix and not any(ch in prefix for ch in "*?[\\"):
                out.append(prefix)
            else:
                out.append(f":(glob){g}")
        return out

    def kernel_kind(self, path: str) -> str | None:
        """``"native"`` (language known from the extension), ``"python"`` (needs a content
        check) or None when the path can never hold a kernel row."""
        if EXCLUDE_PATH_RE.search(path) or self._extra_exclude_re.match(path):
            return None
        if NATIVE_EXT_RE.search(path) and self._native_re.match(path):
            return "native"
        if path.endswith(".py") and self._python_re.match(path):
            return "python"
        return None


def is_binding_file(path: str) -> bool:
    """Registration/binding files (``torch_bindings.cpp``, ``ops.h``, ``*_extension*.cc`` …)."""
    return BINDING_FILE_RE.search(path) is not None


def _expand(prefix: str, names: str, suffix: str = "/**") -> tuple[str, ...]:
    return tuple(f"{prefix}{n}{suffix}" for n in names.split(","))


VLLM = RepoSpec(
    name="vllm",
    native_globs=("csrc/**",),
    python_globs=(
        "vllm/attention/ops/**",
        "vllm/attention/backends/**",
        "vllm/v1/attention/**",
        "vllm/model_executor/layers/**",
        "vllm/model_executor/kernels/**",
        "vllm/kernels/**",
        "vllm/lora/ops/**",
        "vllm/v1/worker/gpu/**",
        "vllm/v1/sample/**",
        "vllm/v1/spec_decode/**",
        "vllm/models/**/ops/**",
    ),
    pr_url_template="https://github.com/vllm-project/vllm/pull/{n}",
    trim_unnumbered_tip=True,
)

SGLANG = RepoSpec(
    name="sglang",
    native_globs=(
        *_expand("sgl-kernel/", "csrc,include"),
        *_expand("sgl-kernel/src/sgl-kernel/", "csrc,include"),
        "python/sglang/jit_kernel/**",
        "python/sglang/kernels/**",
    ),
    python_globs=(
        *_expand(
            "python/sglang/srt/",
            "layers,lora,speculative,mem_cache,model_executor,constrained,"
            "hardware_backend,batch_invariant_ops",
        ),
        "python/sglang/jit_kernel/**",
        "python/sglang/kernels/**",
        "python/sglang/multimodal_gen/runtime/layers/**",
        "sgl-kernel/python/**",
    ),
    pr_url_template="https://github.com/sgl-project/sglang/pull/{n}",
)

FLASHINFER = RepoSpec(
    name="flashinfer",
    native_globs=(
        "include/**",
        "csrc/**",
        "python/csrc/**",
        "python/csrc_aot/**",
        "flashinfer-aot/csrc_aot/**",
        "src/**",
        "flashinfer/**",  # it ships .cuh headers next to the Python package
    ),
    python_globs=("flashinfer/**", "python/flashinfer/**"),
    pr_url_template="https://github.com/flashinfer-ai/flashinfer/pull/{n}",
)

DEFAULT_SPECS: dict[str, RepoSpec] = {s.name: s for s in (VLLM, SGLANG, FLASHINFER)}

# The newest upstream commit in the local-inference-lab/vllm fork mirror (2026-05-19);
# ``trim_unnumbered_tip`` finds it by itself, this is here for settings that pin it.
VLLM_FORK_UPSTREAM_TIP = "9aaf83ef502fc37bc647f6e474314d48ba36cd1c"
