"""The GPU naming vocabulary: every GPU name, alias and family the code recognises, once.

Three readers name GPUs, each with its own matching rule, and each reader's output is
pinned (mined rows carry a rules version, gains and the simulator a row hash), so they do
not share one list; they share this file. Change a name here and nowhere else.

* **Prose** (``gains.mentions``): PR descriptions and driver device names, case-blind,
  separators ``[ _-]``, a vendor prefix and form-factor / memory suffixes
  (:data:`PROSE_FAMILIES`, :data:`PROSE_VENDOR_PREFIX`, :data:`PROSE_SUFFIX`).
  Open-ended families (``[BH]\\d{3}``, ``MI\\d{3}[XA]?``) so a new SKU matches.
* **Commit text** (``mining.commits.mentions``): commit messages, lower-cased, separators
  ``[\\s-]``. Distinctive names match in any case (:data:`TEXT_GPUS`); short names that are
  also ordinary tokens (``L4``, ``T4``, ``Thor``) only as written (:data:`EXACT_GPUS`);
  file-path tokens are a short literal list (:data:`PATH_GPUS`).
* **Device names** (``mining.configs.names``): how a driver device name is split into
  vendor and model (:data:`NVIDIA_MODEL_PREFIXES`, :data:`PACKAGING_TOKEN`) and the two
  capability classes the default heuristics branch on (:data:`BLACKWELL_DATACENTER`,
  :data:`LOW_SHARED_MEMORY`).
* **Simulator** (``sim.hardware``): the display names of the simulated GPUs
  (:data:`SIM_GPU_NAMES`); their specs stay in ``sim/hardware.py``.

The vocabularies differ on purpose and stay apart: commit text lists ``H100`` / ``B200``
/ ``B300`` by name (``[HB][12]00``) while prose takes any ``[BH]\\d{3}``; only commit text
knows ``DGX Spark``, ``GB10``, ``Jetson``, ``Thor``, ``H80``; only prose knows ``Arc`` and
``A[456]000``. Making them agree would change mined rows (a ``RULES_VERSION`` bump and a
re-mine) and gains attribution; that is a decision of its own, not a move.

Pure Python, no Dagster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

#: The vocabulary's own version: every name list here decides mined rows (commit mentions,
#: device names) and gains attribution, so a change bumps it, and the assets that apply it
#: (``mining/versions.py`` rule ``gpu_names``; the ``pr_gains`` extractor version) go stale.
RULES_VERSION = 1

PROSE = "prose"
TEXT = "text"
EXACT = "exact"
PATH = "path"


@dataclass(frozen=True, slots=True)
class Term:
    """One GPU name or family as a regex fragment, and the vocabularies that use it.

    ``pattern`` is written as the name is spelt (``Thor``, ``Gaudi``); ``{sep}`` stands for
    the vocabulary's separator between words. Commit text and path tokens lower-case it
    (they match lower-cased text); exact names are matched as written; prose is case-blind.
    """

    pattern: str
    where: frozenset[str]


def _t(pattern: str, *where: str) -> Term:
    return Term(pattern, frozenset(where))


#: Every GPU term, in the order the alternations are tried (the prose order is the
#: historic one; the others match the same strings in this order, see
#: ``tests/unit/test_gpus.py``).
TERMS: tuple[Term, ...] = (
    _t(r"GB[23]00", PROSE, TEXT, PATH),
    _t(r"GH200", PROSE, TEXT),
    _t(r"[BH]\d{3}", PROSE),
    _t(r"[HB][12]00", TEXT),
    _t(r"H100", PATH),
    _t(r"H200", PATH),
    _t(r"B200", PATH),
    _t(r"B300", TEXT, PATH),
    _t(r"H20", PROSE, TEXT, PATH),
    _t(r"H800", PROSE, TEXT, PATH),
    _t(r"A100", PROSE, TEXT, PATH),
    _t(r"A800", PROSE, TEXT),
    _t(r"A10G?", PROSE),
    _t(r"A10G", TEXT),
    _t(r"A10", EXACT),
    _t(r"A6000", TEXT),
    _t(r"A30", PROSE, EXACT),
    _t(r"A40", PROSE, EXACT),
    _t(r"L40S?", PROSE, TEXT),
    _t(r"L20", PROSE, EXACT),
    _t(r"L4", PROSE, EXACT),
    _t(r"T4", PROSE, EXACT),
    _t(r"V100", PROSE, TEXT),
    _t(r"RTX{sep}PRO{sep}\d{4}", PROSE),
    _t(r"RTX{sep}A?\d{4}(?:{sep}Ti)?", PROSE),
    _t(r"RTX{sep}(?:PRO{sep})?\d{4}(?:\s?Ti)?", TEXT),
    _t(r"A[456]000", PROSE),
    _t(r"MI\d{3}[XA]?", PROSE),
    _t(r"MI[23]\d{2}X?", TEXT),
    _t(r"MI300X?", PATH),
    _t(r"MI325X?", PATH),
    _t(r"MI35\dX?", PATH),
    _t(r"Gaudi{sep}\d", PROSE),
    _t(r"Gaudi\s?\d?", TEXT),
    _t(r"Arc{sep}[AB]\d{3}", PROSE),
    _t(r"DGX{sep}Spark", TEXT),
    _t(r"GB10", TEXT),
    _t(r"Jetson", TEXT),
    _t(r"H80", TEXT),
    _t(r"Thor", EXACT),
)

#: Separator between the words of a name, per vocabulary (prose device names use ``_``).
_SEP = MappingProxyType({PROSE: r"[ _-]?", TEXT: r"[\s-]?", EXACT: "", PATH: ""})


def alternation(vocabulary: str) -> str:
    """The ``a|b|…`` regex of one vocabulary's terms (lower-cased for text and path)."""
    parts = []
    for term in TERMS:
        if vocabulary in term.where:
            p = term.pattern.replace("{sep}", _SEP[vocabulary])
            parts.append(p.lower() if vocabulary in (TEXT, PATH) else p)
    return "|".join(parts)


#: Prose: the family group of ``gains.mentions.GPU_RE`` (used with ``re.I``).
PROSE_FAMILIES = alternation(PROSE)
#: Prose: vendor and product-line words that may precede a family (``NVIDIA GeForce RTX
#: 4090``, ``AMD Instinct MI300X``), each optional, in this order.
VENDOR_WORDS: tuple[str, ...] = ("NVIDIA", "GeForce", "AMD", "Instinct")
PROSE_VENDOR_PREFIX = "".join(f"(?:{w}{_SEP[PROSE]})?" for w in VENDOR_WORDS)
#: Prose: form-factor and memory tokens that may follow a family (``H100 SXM 80GB``).
PROSE_SUFFIX_TOKENS: tuple[str, ...] = (
    r"SXM\d?",
    "PCIe",
    "NVL",
    r"HBM\d?e?",
    r"\d{2,3}\s?GB",
    r"\d{2,3}G(?![A-Za-z])",
)
PROSE_SUFFIX = f"(?:{_SEP[PROSE]}(?:" + "|".join(PROSE_SUFFIX_TOKENS) + "))*"
#: Prose: families whose ``HBM3`` suffix names the SXM part (``NVIDIA_H100_80GB_HBM3``).
HBM3_IS_SXM: tuple[str, ...] = ("H100", "H800")

#: Commit text: distinctive names, matched in any case (on lower-cased text).
TEXT_GPUS = alternation(TEXT)
#: Commit text: short names that are also ordinary tokens, matched only as written.
EXACT_GPUS = alternation(EXACT)
#: File-path tokens (lower case, whole token) that name a GPU.
PATH_GPUS = alternation(PATH)

# -- device names (tuned-config files) ---------------------------------------------------
#: First word of an NVIDIA model when the driver left the vendor out (``H100_80GB_HBM3``).
NVIDIA_MODEL_PREFIXES: tuple[str, ...] = (
    "A",
    "B",
    "H",
    "L",
    "GB",
    "GH",
    "RTX",
    "GEFORCE",
    "TESLA",
    "QUADRO",
    "JETSON",
    "THOR",
)
#: First word of an AMD model when the driver left the vendor out: a series word, or a
#: word starting with an Instinct model number (``MI300X``).
AMD_SERIES_WORDS: frozenset[str] = frozenset({"INSTINCT", "RADEON"})
AMD_MODEL_HEAD = r"^MI\d{3}"
#: Tokens that describe memory size or packaging, not the chip: dropped so that
#: ``NVIDIA_H100_80GB_HBM3`` and ``NVIDIA_H100`` are one GPU model, while form factors
#: that change clocks/bandwidth (PCIe, NVL, Max-Q, Server/Workstation Edition) are kept.
#: (Prose keeps PCIe/NVL/SXM as a form and memory as a size instead: it compares them.)
PACKAGING_TOKEN = r"^(\d+GB|HBM\d+e?|SXM\d*|AC)$"
#: sm_100 datacenter Blackwell (what vLLM's ``is_device_capability_family(100)`` is true for).
BLACKWELL_DATACENTER: tuple[str, ...] = ("B100", "B200", "B300", "GB200", "GB300")
#: Models (or their first word) of CUDA GPUs with < 128 KiB opt-in shared memory per
#: block (sm_86/89/120/121): SGLang's ``_use_low_smem_fp8_default``.
LOW_SHARED_MEMORY: tuple[str, ...] = (
    "L4",
    "L20",
    "L20Y",
    "L40",
    "L40S",
    "A10",
    "A10G",
    "A16",
    "A2",
    "A40",
    "GB10",
    "RTX",
    "GeForce",
    "Jetson",
    "Thor",
)


def leading_name_re(names: tuple[str, ...]) -> re.Pattern[str]:
    """A model name that starts with one of ``names`` as a whole word."""
    return re.compile(r"^(" + "|".join(names) + r")\b")


# -- simulator ---------------------------------------------------------------------------
#: Display names of the simulated GPUs, by simulator id (specs: ``sim/hardware.py``).
SIM_GPU_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "h100": "NVIDIA H100 SXM5 80GB",
        "h200": "NVIDIA H200 SXM 141GB",
        "a100": "NVIDIA A100-SXM4-80GB",
        "a10": "NVIDIA A10",
        "rtx_a6000": "NVIDIA RTX A6000",
        "rtx_5090": "NVIDIA GeForce RTX 5090",
    }
)


# -- measured ground truth -----------------------------------------------------------------
#: The ``gpu`` value (the card's normalised name) of the GPU the shipped measurements were
#: taken on: the default of ``kernelhouse gpu plan/status/report`` and of the measured-configs
#: tables (``rewards/measured.py``).
MEASURED_GPU = "NVIDIA H200"
