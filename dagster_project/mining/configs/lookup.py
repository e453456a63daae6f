"""Would the engine's own lookup at the snapshot load this config file?

A tuned config only matters if the runtime finds it: it builds a file name from the
device, dtype and shape it runs with and opens exactly that name. Names that differ by one
space are never read, e.g. vLLM's block-INT8 lookup asks for ``block_shape=[128, 128]``
while every shipped block-INT8 file says ``[128,128]``. Rather than hard-coding what each
engine asks for (it changed over time), the rules are read from the engine's source at
the snapshot, from the functions that build the names:

* block-scaled matmul families: the ``json_file_name = f"N={N},K={K},…"`` template, turned
  into a regular expression the file's basename must match in full;
* MoE: ``get_config_file_name``: whether it strips spaces from the ``block_shape`` list
  (vLLM) or keeps Python's ``[128, 128]`` spelling (SGLang), and whether it folds every
  H200 variant into ``NVIDIA_H200`` (so a ``NVIDIA_H200_NVL`` file is never read); and
  ``(_)get_config_dtype_str``: the dtype strings it can return (vLLM's never returns
  ``int8_w8a8``, ``float8`` or ``bf16``, so such MoE files are never read).

``loaded_at_runtime`` is True/False with ``not_loaded_reason`` when False, and null (with
the reason) where the lookup is not modelled or not found in the source, never a guess.
Only the few lookup modules are read (one ``cat-file --batch``), never a tree-wide grep,
which on a blobless clone would fetch every blob.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dagster_project.mining.git import GitRepo

#: Version of the lookup model below. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "2"

#: Modules that build config file names, newest layout first (missing ones are skipped).
LOOKUP_MODULES: dict[str, tuple[str, ...]] = {
    "vllm": (
        "vllm/model_executor/layers/fused_moe/fused_moe.py",
        "vllm/model_executor/layers/fused_moe/config.py",
        "vllm/model_executor/layers/quantization/utils/fp8_utils.py",
        "vllm/model_executor/layers/quantization/utils/int8_utils.py",
    ),
    "sglang": (
        "python/sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py",
        "python/sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_kernels.py",
        "python/sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_config.py",
        "python/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py",
        "python/sglang/srt/layers/fused_moe_triton/fused_moe.py",
        "python/sglang/kernels/ops/quantization/fp8_kernel.py",
        "python/sglang/kernels/ops/quantization/int8_kernel.py",
        "python/sglang/srt/layers/quantization/fp8_kernel.py",
        "python/sglang/srt/layers/quantization/int8_kernel.py",
    ),
}

_TEMPLATE_RE = re.compile(r"""json_file_name\s*=\s*f["'](N=\{[^"']*\.json)["']""")
_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")
_DIGIT_FIELDS = {"N", "K", "E", "block_n", "block_k"}
_BLOCK_SHAPE_RE = re.compile(r"block_shape=\[([^\]]*)\]")
_RETURN_STR_RE = re.compile(r"""\breturn\s+["']([\w.]+)["']""")


def template_regex(template: str) -> re.Pattern[str]:
    """``N={N},K={K},…block_shape=[{block_n}, {block_k}].json`` as a full-match regex."""
    out, pos = [], 0
    for m in _PLACEHOLDER_RE.finditer(template):
        out.append(re.escape(template[pos : m.start()]))
        name = m.group(1).strip()
        out.append(r"\d+" if name in _DIGIT_FIELDS else r"[^,]+")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out))


def _function_body(text: str, name: str) -> str | None:
    m = re.search(rf"^def {name}\(", text, re.MULTILINE)
    if not m:
        return None
    end = re.search(r"^(def |@|class )", text[m.end() :], re.MULTILINE)
    return text[m.start() : m.end() + end.start()] if end else text[m.start() :]


@dataclass(frozen=True)
class LookupRules:
    """What the engine at one snapshot asks for (see the module docstring)."""

    block_templates: tuple[str, ...] = ()
    moe_found: bool = False
    moe_strips_spaces: bool = False
    moe_folds_h200: bool = False
    #: dtype strings the MoE dtype function returns (None: function not found).
    moe_dtypes: frozenset[str] | None = None
    sources: tuple[str, ...] = field(default_factory=tuple)


def read_lookup_rules(repo: GitRepo, repo_name: str, ref: str = "HEAD") -> LookupRules:
    """Read the lookup functions of ``repo_name`` at ``ref`` (one batched blob read)."""
    paths = LOOKUP_MODULES.get(repo_name, ())
    if not paths:
        return LookupRules()
    listing = {p: oid for _mode, typ, oid, p in repo.ls_tree(ref, list(paths)) if typ == "blob"}
    present = [p for p in paths if p in listing]
    if not present:
        return LookupRules()
    repo.prefetch_blobs([listing[p] for p in present])
    blobs = repo.read_blobs([listing[p] for p in present])
    templates: list[str] = []
    moe_body: str | None = None
    dtype_body: str | None = None
    for p in present:
        text = blobs.get(listing[p], b"").decode("utf-8", "replace")
        templates += [m.group(1) for m in _TEMPLATE_RE.finditer(text)]
        if moe_body is None:
            moe_body = _function_body(text, "get_config_file_name")
        if dtype_body is None:
            dtype_body = _function_body(text, "_get_config_dtype_str") or _function_body(
                text, "get_config_dtype_str"
            )
    return LookupRules(
        block_templates=tuple(dict.fromkeys(templates)),
        moe_found=moe_body is not None,
        moe_strips_spaces=moe_body is not None
        and 'replace(" ", "")' in moe_body.split("block_shape_selector", 1)[-1],
        moe_folds_h200=moe_body is not None and '"H200" in device_name' in moe_body,
        moe_dtypes=None if dtype_body is None else frozenset(_RETURN_STR_RE.findall(dtype_body)),
        sources=tuple(present),
    )


def _block_loaded(
    rules: LookupRules, basename: str, dtype: str | None
) -> tuple[bool | None, str | None]:
    """Block-scaled matmul families: the name must match one of the lookup's templates."""
    if not rules.block_templates:
        return None, "the engine's block-config lookup was not found at the snapshot"
    regexes = [template_regex(t) for t in rules.block_templates]
    if any(r.fullmatch(basename) for r in regexes):
        return True, None
    same_dtype = [t for t in rules.block_templates if dtype and f"dtype={dtype}" in t]
    asked = (same_dtype or list(rules.block_templates))[0]
    return False, f"the lookup asks for names like {asked!r}"


def _moe_loaded(
    rules: LookupRules, basename: str, device_name: str | None, dtype: str | None
) -> tuple[bool | None, str | None]:
    """MoE: the block_shape spelling, the dtype strings and the H200 folding of
    ``get_config_file_name`` decide."""
    if not rules.moe_found:
        return None, "the engine's get_config_file_name was not found at the snapshot"
    m = _BLOCK_SHAPE_RE.search(basename)
    if m and "," in m.group(1):
        spaced = ", " in m.group(1)
        if rules.moe_strips_spaces and spaced:
            return False, "the lookup strips spaces: it asks for block_shape=[n,k]"
        if not rules.moe_strips_spaces and not spaced:
            return False, "the lookup asks for block_shape=[n, k] (a Python list's str)"
    if dtype and rules.moe_dtypes is not None and dtype not in rules.moe_dtypes:
        asked = ", ".join(sorted(rules.moe_dtypes)) or "none"
        return (
            False,
            f"the lookup never asks for dtype={dtype} (it asks for: {asked}, or no dtype)",
        )
    if (
        rules.moe_folds_h200
        and device_name
        and device_name != "NVIDIA_H200"
        and "H200" in device_name.split("_")
    ):
        return False, "the lookup folds every H200 variant into device_name=NVIDIA_H200"
    return True, None


def is_loaded(
    rules: LookupRules,
    family: str | None,
    basename: str,
    device_name: str | None,
    dtype: str | None,
) -> tuple[bool | None, str | None]:
    """(loaded_at_runtime, reason): reason explains False, or why it is unknown (None)."""
    if family in ("block_fp8", "block_int8"):
        return _block_loaded(rules, basename, dtype)
    if family == "moe":
        return _moe_loaded(rules, basename, device_name, dtype)
    return None, f"lookup not modelled for the {family} family"
