"""Hardware, model and shape mentions in free text, and GPU-name matching.

PR descriptions name GPUs loosely ("8xH100", "H100 SXM", "an A100-80G box") while tuned
config files use the driver's device name (``NVIDIA_H100_80GB_HBM3``,
``NVIDIA_A100-SXM4-80GB``, ``AMD_Instinct_MI300X``). :func:`canonical_gpu` reduces both to
a :class:`GpuName` (family, form factor, memory size) and :func:`gpu_matches` compares
them with one rule: the families must be equal, and a form factor or memory size counts
only when *both* sides state it. So "H100" matches ``NVIDIA_H100_80GB_HBM3`` and
``NVIDIA_H100_PCIe``, but "H100 PCIe" does not match ``NVIDIA_H100_80GB_HBM3`` (HBM3
is the SXM part), and "A100 40GB" does not match ``NVIDIA_A100-SXM4-80GB``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dagster_project import gpus

#: The GPU names come from the one vocabulary (``dagster_project/gpus.py``, prose terms).
_GPU_CORE = (
    gpus.PROSE_VENDOR_PREFIX
    + "(?P<family>"
    + gpus.PROSE_FAMILIES
    + ")"
    + "(?P<suffix>"
    + gpus.PROSE_SUFFIX
    + ")"
)
GPU_RE = re.compile(
    r"(?<![A-Za-z0-9])(?:\d+\s*[x×]\s*)?" + _GPU_CORE + r"(?:s)?(?![A-Za-z0-9])", re.I
)


@dataclass(frozen=True, slots=True)
class GpuName:
    """A GPU reduced to what distinguishes tuned-config files."""

    family: str
    form: str | None = None  # "SXM", "PCIE", "NVL"
    memory_gb: int | None = None

    def __str__(self) -> str:
        parts = [self.family]
        if self.form:
            parts.append(self.form)
        if self.memory_gb:
            parts.append(f"{self.memory_gb}GB")
        return " ".join(parts)


def canonical_gpu(name: str | None) -> GpuName | None:
    """Parse a GPU name from prose or a device name; ``None`` if it names no known GPU."""
    if not name:
        return None
    m = GPU_RE.search(name.replace("_", " "))
    if not m:
        return None
    family = re.sub(r"[ _-]", "", m.group("family")).upper()
    family = family.replace("GAUDI", "GAUDI")
    suffix = m.group("suffix") or ""
    form = None
    if re.search(r"pcie", suffix, re.I):
        form = "PCIE"
    elif re.search(r"nvl", suffix, re.I):
        form = "NVL"
    elif (
        re.search(r"sxm|hbm3", suffix, re.I)
        and family in gpus.HBM3_IS_SXM
        or re.search(r"sxm", suffix, re.I)
    ):
        form = "SXM"
    mem = re.search(r"(\d{2,3})\s?G", suffix, re.I)
    return GpuName(family, form, int(mem.group(1)) if mem else None)


def gpu_matches(a: str | GpuName | None, b: str | GpuName | None) -> bool:
    """True when two GPU names can denote the same device (see module docstring)."""
    ga = a if isinstance(a, GpuName) else canonical_gpu(a)
    gb = b if isinstance(b, GpuName) else canonical_gpu(b)
    if ga is None or gb is None or ga.family != gb.family:
        return False
    if ga.form and gb.form and ga.form != gb.form:
        return False
    return not (ga.memory_gb and gb.memory_gb and ga.memory_gb != gb.memory_gb)


def find_gpus(text: str) -> list[str]:
    """GPU mentions in order of appearance, as written (minus a leading ``8x``)."""
    out: list[str] = []
    for m in GPU_RE.finditer(text):
        raw = m.group(0)
        raw = re.sub(r"^\d+\s*[x×]\s*", "", raw).strip()
        out.append(raw)
    return out


def distinct_gpus(text: str) -> list[str]:
    """One representative spelling per GPU family mentioned, in order of appearance."""
    seen: dict[str, str] = {}
    for raw in find_gpus(text):
        g = canonical_gpu(raw)
        if g and g.family not in seen:
            seen[g.family] = raw
    return list(seen.values())


_MODEL_FAMILIES = (
    r"llama|mixtral|mistral|qwen|deepseek|gemma|phi-?\d|glm|kimi|gpt-oss|minimax|mimo|grok|"
    r"dbrx|jamba|falcon|olmoe?|granite|hunyuan|ernie|arctic|internlm|baichuan|nemotron|"
    r"step-?\d|ling|bailing|dots|seed-oss|command-r"
)
_HF_ID_RE = re.compile(
    r"(?<![\w./-])([A-Za-z0-9][\w.-]*/(?=[\w.-]*(?:" + _MODEL_FAMILIES + r"))[\w.-]*[A-Za-z0-9])",
    re.I,
)
_MODEL_NAME_RE = re.compile(
    r"(?<![\w/-])("
    r"DeepSeek-(?:V\d(?:\.\d)?|R1|Coder-V2)(?:-[A-Za-z0-9.]+)*|"
    r"Qwen\d?(?:\.\d)?-[A-Za-z0-9.]+(?:-[A-Za-z0-9.]+)*|"
    r"Llama-?\d(?:\.\d)?-[A-Za-z0-9.]+(?:-[A-Za-z0-9.]+)*|"
    r"Mixtral-8x\d+B(?:-[A-Za-z0-9.]+)*|"
    r"gpt-oss-\d+b|Kimi-K2(?:-[A-Za-z0-9.]+)*|GLM-4(?:\.\d)?(?:-[A-Za-z0-9.]+)*|"
    r"Gemma-?\d(?:-[A-Za-z0-9.]+)*|MiniMax-[A-Za-z0-9.]+(?:-[A-Za-z0-9.]+)*"
    r")(?![\w/])",
    re.I,
)


def find_models(text: str) -> list[str]:
    """Model mentions (Hub ids first-class, then well-known family names), in order."""
    hits: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []
    for m in _HF_ID_RE.finditer(text):
        name = m.group(1)
        if re.search(r"\.(py|json|sh|md|yaml|yml|txt|cu|cuh|cpp|h)$", name, re.I):
            continue
        hits.append((m.start(1), name))
        taken.append((m.start(1), m.end(1)))
    for m in _MODEL_NAME_RE.finditer(text):
        if any(s <= m.start(1) < e for s, e in taken):
            continue
        hits.append((m.start(1), m.group(1)))
    hits.sort()
    return [h for _, h in hits]


_SHAPE_RE = re.compile(r"(?<![A-Za-z0-9_])(E|N|K|topk|top_k)\s*=\s*(\d+)(?![\d.])")


def find_shape(text: str) -> str | None:
    """``E=…, N=…, K=…`` assignments in ``text`` (first value of each), or ``None``.

    ``M`` is deliberately excluded: in kernel tables it is the batch size, which goes to
    ``batch_size``, never to ``shape``.
    """
    found: dict[str, str] = {}
    for m in _SHAPE_RE.finditer(text):
        key = "topk" if m.group(1).lower() in ("topk", "top_k") else m.group(1)
        found.setdefault(key, m.group(2))
    if not found:
        return None
    return ", ".join(f"{k}={v}" for k, v in found.items())


def parse_shape(shape: str | None) -> dict[str, int]:
    """``{"E": 8, "N": 14336}`` from a shape string such as ``"E=8, N=14336"``."""
    if not shape:
        return {}
    out: dict[str, int] = {}
    for m in re.finditer(r"(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z_0-9]*)\s*[=:]\s*([\d,]+)", shape):
        try:
            out[m.group(1)] = int(m.group(2).replace(",", ""))
        except ValueError:
            continue
    return out
