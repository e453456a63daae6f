"""The execution census: for every kernel_commits row, can it run here, and if not, why.

Computed from the row's code alone (no GPU). ``census_row`` returns the row's
``exec_status`` before any run, with a ``reason`` in words, ``import_tier`` (how a Triton
file imports: ``self_contained``, ``shims`` for the trivial engine helpers, ``stubs`` for
other engine or compiled-extension names) and ``claim_hardware`` (``amd``/``blackwell``/
``other`` when the title or path targets hardware other than the Hopper GPU we run on).
Statuses, in the order they are decided:

* ``unparseable``; ``amd_only`` (a ROCm/AITER path: the code is written for AMD);
  ``blackwell_only`` (tcgen05/TMEM/SM100 code); ``needs_cuda_extension_build`` (CUDA and
  binding C++: they build only inside the package's extension); ``cpu_kernel`` (C++ host
  code); ``cute_dsl_no_harness`` (CuTe DSL that could run on Hopper: no harness yet);
* Triton: ``host_side_only`` (no ``@triton`` function changed and no launch site changed),
  ``no_launcher_found`` (kernels changed but no top-level function in both versions launches
  them: methods of engine classes, or kernels only added), ``harness_ready`` (a spec covers
  the row, also when the kernel's only launcher is an engine method: the spec launches
  it with that call site's grid and arguments; or when only host code on the launch path
  changed: the spec calls through it) or ``no_harness_spec`` (runnable in principle, no
  spec written);
* a row its spec covers but marks ``not_runnable`` gets the spec's status and reason
  instead (``needs_cuda_extension_build`` where the commit's change is a CUDA kernel of the
  package's extension; ``broken_at_sha`` where a side cannot run as committed, e.g. a call
  whose callee's signature the same commit changed, fixed upstream later): the reason a
  device run would record, known without one.

A run later turns ``harness_ready`` into ``executed`` / ``not_equivalent`` / ``run_error``
/ ``load_error`` (``commit_exec.ingest``). ``CENSUS_VERSION`` is stored with the census.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .specs import spec_for

#: Bump when any decision below changes. 2: a row a spec covers is ``harness_ready`` also when
#: census 1 found no launcher (the spec launches the changed kernel with its call site's grid
#: and arguments) or only host-side changes (the spec calls the changed host code's launcher).
#: 3: a row its spec marks ``not_runnable`` (the commit's change is a compiled CUDA op the
#: harness cannot build) gets the spec's status and reason, not ``harness_ready``.
#: 4: ``broken_at_sha`` joins the spec-given statuses, and the specs of 35f cover rows whose
#: change reaches the kernels through sibling modules (SGLang's KDA chunked prefill, vLLM's KDA
#: decode), a launcher only added (vLLM's packed GDN decode, run against the path it replaces)
#: or a ``torch.compile`` region (SGLang's mrope): census answers change for them.
CENSUS_VERSION = "4"
#: The name ``mining/versions.py`` reads: the census is part of kernel_commits' rules, so a
#: new census version makes the dataset stale.
RULES_VERSION = CENSUS_VERSION

_AMD_PATH = re.compile(r"(rocm|aiter|/hip|_hip|amd)", re.IGNORECASE)
_AMD_TITLE = re.compile(r"\[(amd|rocm|hip)\]|\b(mi300|mi325|mi355|mi250|rocm)\b", re.IGNORECASE)
_BLACKWELL_CODE = re.compile(
    r"tcgen05|\btmem\b|TMEM|sm_?100|sm_?103|sm_?120|SM100|Sm100|sm100|blackwell|Blackwell|"
    r"__CUDA_ARCH__\s*>=\s*1000|nvfp4|NVFP4"
)
_BLACKWELL_TITLE = re.compile(r"blackwell|\bb200\b|\bgb200\b|\bb300\b|sm100|sm_100|5090", re.I)
#: Engine names whose stand-ins are trivial (``loader.SHIMS`` provides them).
TRIVIAL_NAMES = frozenset(
    {
        "tl",
        "triton",
        "cdiv",
        "next_power_of_2",
        "current_platform",
        "init_logger",
        "is_hip",
        "is_cuda",
        "_is_hip",
        "_is_cuda",
        "is_rocm",
        "ceil_div",
        "round_up",
        "logger",
        "direct_register_custom_op",
        "get_device_capability",
        "input_guard",
    }
)
_STD_ROOTS = frozenset(
    {
        "torch",
        "triton",
        "numpy",
        "typing",
        "math",
        "functools",
        "os",
        "dataclasses",
        "enum",
        "__future__",
        "itertools",
        "collections",
        "logging",
        "contextlib",
        "abc",
        "warnings",
        "inspect",
        "sys",
        "re",
        "time",
        "typing_extensions",
        "operator",
        "copy",
        "json",
    }
)


@dataclass(frozen=True)
class Census:
    """One row's census."""

    status: str
    reason: str
    import_tier: str | None
    claim_hardware: str | None
    changed_kernels: tuple[str, ...] = ()
    launchers: tuple[str, ...] = ()


def claim_hardware(title: str, path: str) -> str | None:
    """Hardware other than Hopper that the title or path targets, or None."""
    if _AMD_TITLE.search(title or "") or _AMD_PATH.search(path):
        return "amd"
    if _BLACKWELL_TITLE.search(title or ""):
        return "blackwell"
    return None


def _decorated_triton(fn: ast.FunctionDef) -> bool:
    for dec in fn.decorator_list:
        text = ast.unparse(dec)
        if text.startswith(("triton.", "jit", "tl.")) or text in ("jit", "triton_op"):
            return True
    return False


def _functions(tree: ast.Module) -> tuple[dict[str, str], dict[str, ast.FunctionDef]]:
    """(jit kernels name -> source, top-level plain functions)."""
    kernels: dict[str, str] = {}
    plain: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            if _decorated_triton(node):
                kernels[node.name] = ast.unparse(node)
            else:
                plain[node.name] = node
    return kernels, plain


def _launched(fn: ast.FunctionDef) -> set[str]:
    """Names launched as ``name[grid](...)`` inside ``fn``, plus plain names it calls."""
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name):
                out.add(f.value.id)
            elif isinstance(f, ast.Name):
                out.add(f.id)
    return out


def _import_tier(tree: ast.Module) -> str:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            root = (node.module or "").split(".")[0]
            if node.level or root not in _STD_ROOTS:
                names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] not in _STD_ROOTS:
                    names.add(a.asname or a.name)
    if not names:
        return "self_contained"
    return "shims" if names <= TRIVIAL_NAMES else "stubs"


def _non_triton(language: str, code: str, path: str) -> tuple[str, str] | None:
    if language == "CuTe DSL":
        if _BLACKWELL_CODE.search(code):
            return "blackwell_only", "CuTe DSL using tcgen05/TMEM/SM100 features"
        return "cute_dsl_no_harness", "CuTe DSL that may run on Hopper; no harness written"
    if language == "CUDA":
        if _BLACKWELL_CODE.search(code):
            return "blackwell_only", "CUDA code guarded for or using Blackwell features"
        return "needs_cuda_extension_build", "CUDA source built only inside the package extension"
    if language == "C++":
        if "cpu" in path.lower() or not re.search(r"cuda|__global__|at::cuda|c10::cuda", code):
            return "cpu_kernel", "host C++ (CPU kernel or binding without device code)"
        return "needs_cuda_extension_build", "C++ of the CUDA extension (bindings, dispatch)"
    return None


def _triton(before: str, after: str, title: str, path: str) -> Census:
    hw = claim_hardware(title, path)
    try:
        tb, ta = ast.parse(before), ast.parse(after)
    except SyntaxError as exc:
        return Census("unparseable", f"python does not parse: {exc.msg}", None, hw)
    tier = _import_tier(ta)
    kb, pb = _functions(tb)
    ka, pa = _functions(ta)
    changed = tuple(sorted(n for n in ka if n in kb and ka[n] != kb[n]))
    added = tuple(sorted(n for n in ka if n not in kb))
    touched = set(changed) | set(added)
    launch_changed = [
        n
        for n in pa
        if n in pb and ast.unparse(pa[n]) != ast.unparse(pb[n]) and _launched(pa[n]) & set(ka)
    ]
    if not touched and not launch_changed:
        return Census("host_side_only", "no @triton function or launch site changed", tier, hw)
    launchers = tuple(
        sorted(n for n in pa if n in pb and (_launched(pa[n]) & touched or n in launch_changed))
    )
    if not launchers:
        return Census(
            "no_launcher_found",
            "changed kernels are launched only from methods or from functions added by the commit",
            tier,
            hw,
            changed,
        )
    return Census(
        "no_harness_spec", "runnable in principle; no spec written", tier, hw, changed, launchers
    )


#: Statuses a spec can turn into ``harness_ready``, with the reason it gives.
_SPEC_CAN_RUN = {
    "no_harness_spec": "a spec covers the row",
    "no_launcher_found": "a spec launches the changed kernel with its call site's grid and "
    "arguments (the launcher is an engine method)",
    "host_side_only": "a spec calls the launcher through the changed host code (helpers that "
    "pick the configs or split the launches)",
}


def census_row(
    repo: str, sha: str, path: str, language: str, title: str, before: str, after: str
) -> Census:
    """The census of one row (see the module docstring for the order of decisions)."""
    hw = claim_hardware(title, path)
    if _AMD_PATH.search(path) and language != "CUDA":
        return Census("amd_only", "ROCm/AITER path: code written for AMD GPUs", None, "amd")
    other = _non_triton(language, after, path)
    if other is not None:
        return Census(
            other[0], other[1], None, hw or ("blackwell" if other[0] == "blackwell_only" else None)
        )
    census = _triton(before, after, title, path)
    spec = spec_for(repo, sha, path)
    cannot = spec.not_runnable_for(sha) if spec is not None else None
    if cannot is not None:
        return Census(cannot[0], cannot[1], census.import_tier, hw, census.changed_kernels)
    if census.status in _SPEC_CAN_RUN and spec is not None:
        return Census(
            "harness_ready",
            _SPEC_CAN_RUN[census.status],
            census.import_tier,
            census.claim_hardware,
            census.changed_kernels,
            census.launchers,
        )
    return census
