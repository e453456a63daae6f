"""The GPU vocabulary (``dagster_project/gpus.py``) derives exactly the patterns it replaced.

The ``OLD_*`` strings are the hand-written patterns as they stood before the vocabulary
moved into one module (commit 15fcd48). They are pins, not a second vocabulary: every
pattern derived from :data:`dagster_project.gpus.TERMS` must match the same strings, at the
same places, with the same groups, on a broad corpus of GPU names, case variants, contexts
and near misses, plus seeded random strings over the letters GPU names are made of.
"""

from __future__ import annotations

import random
import re

import pytest

from dagster_project import gpus
from dagster_project.gains import mentions as prose
from dagster_project.mining.commits import mentions as commits
from dagster_project.mining.configs import names
from dagster_project.sim.hardware import GPUS

OLD_PROSE_CORE = (
    r"(?:NVIDIA[ _-]?)?(?:GeForce[ _-]?)?(?:AMD[ _-]?)?(?:Instinct[ _-]?)?"
    r"(?P<family>"
    r"GB[23]00|GH200|[BH]\d{3}|H20|H800|A100|A800|A10G?|A30|A40|L40S?|L20|L4|T4|V100|"
    r"RTX[ _-]?PRO[ _-]?\d{4}|RTX[ _-]?A?\d{4}(?:[ _-]?Ti)?|A[456]000|"
    r"MI\d{3}[XA]?|Gaudi[ _-]?\d|Arc[ _-]?[AB]\d{3}"
    r")"
    r"(?P<suffix>(?:[ _-]?(?:SXM\d?|PCIe|NVL|HBM\d?e?|\d{2,3}\s?GB|\d{2,3}G(?![A-Za-z])))*)"
)
OLD_PROSE_RE = re.compile(
    r"(?<![A-Za-z0-9])(?:\d+\s*[x×]\s*)?" + OLD_PROSE_CORE + r"(?:s)?(?![A-Za-z0-9])", re.I
)
OLD_TEXT_RE = re.compile(
    r"(gb[23]00|gh200|[hb][12]00|b300|h800|a100|a800|a10g|a6000|l40s?|v100"
    r"|rtx[\s-]?(?:pro[\s-]?)?\d{4}(?:\s?ti)?|mi[23]\d{2}x?|gaudi\s?\d?|dgx[\s-]?spark|gb10"
    r"|jetson|h20|h80)(?![\w-])"
)
OLD_EXACT_RE = re.compile(r"(A10|A30|A40|L4|L20|T4|Thor)(?![\w-])")
OLD_PATH_RE = re.compile(
    r"(h100|h200|h20|h800|b200|b300|gb200|gb300|a100|mi300x?|mi325x?|mi35\dx?)"
)
OLD_BLACKWELL_DC = r"^(B100|B200|B300|GB200|GB300)\b"
OLD_LOW_SMEM = r"^(L4|L20|L20Y|L40|L40S|A10|A10G|A16|A2|A40|GB10|RTX|GeForce|Jetson|Thor)\b"
OLD_PACKAGING = r"^(\d+GB|HBM\d+e?|SXM\d*|AC)$"
OLD_NVIDIA_HEAD = r"^(A|B|H|L|GB|GH|RTX|GEFORCE|TESLA|QUADRO|JETSON|THOR)\d*"
OLD_AMD_HEAD = r"^MI\d{3}"
OLD_SIM_NAMES = {
    "h100": "NVIDIA H100 SXM5 80GB",
    "h200": "NVIDIA H200 SXM 141GB",
    "a100": "NVIDIA A100-SXM4-80GB",
    "a10": "NVIDIA A10",
    "rtx_a6000": "NVIDIA RTX A6000",
    "rtx_5090": "NVIDIA GeForce RTX 5090",
}

NAMES = [
    # every name in the old patterns, and their family members
    "GB200",
    "GB300",
    "GB100",
    "GB10",
    "GH200",
    "GH100",
    "H100",
    "H200",
    "H300",
    "H999",
    "B100",
    "B200",
    "B300",
    "B123",
    "H20",
    "H80",
    "H800",
    "A100",
    "A800",
    "A10",
    "A10G",
    "A30",
    "A40",
    "A16",
    "A2",
    "L40",
    "L40S",
    "L20",
    "L20Y",
    "L4",
    "T4",
    "V100",
    "A4000",
    "A5000",
    "A6000",
    "RTX 4090",
    "RTX-4090 Ti",
    "RTX_4090Ti",
    "RTX4090 Ti",
    "RTX A6000",
    "RTX PRO 6000",
    "RTXPRO6000",
    "RTX-PRO-6000",
    "RTX PRO 6000 Blackwell",
    "RTX PRO 6000 Blackwell Server Edition",
    "RTX 5090",
    "GeForce RTX 5090",
    "NVIDIA GeForce RTX 5090",
    "MI300",
    "MI300X",
    "MI300A",
    "MI325X",
    "MI325",
    "MI355X",
    "MI350",
    "MI350X",
    "MI359x",
    "MI250X",
    "MI210",
    "MI100",
    "MI400",
    "Gaudi",
    "Gaudi2",
    "Gaudi 3",
    "Gaudi-3",
    "Arc A770",
    "Arc B580",
    "Arc_A770",
    "DGX Spark",
    "DGX-Spark",
    "DGXSpark",
    "Jetson",
    "Jetson Orin",
    "Thor",
    "Tesla V100",
    "Quadro RTX 8000",
    # near misses
    "H2O",
    "H2",
    "A1000",
    "B2000",
    "L40X",
    "T40",
    "A10X",
    "H20X",
    "L4S",
    "A1",
    "V10",
    "GB30",
    "MI30",
    "MI3000",
    "Gaudi32",
    "Arc A7",
    "gfx942",
    "gfx90a",
    "sm90",
    "sm_100a",
    "Hopper",
    "Blackwell",
    "Radeon",
    "Instinct",
    "Intel(R) Graphics",
    # device names and prose spellings
    "NVIDIA_H100_80GB_HBM3",
    "NVIDIA_H100",
    "NVIDIA_H100_PCIe",
    "NVIDIA_H100_NVL",
    "NVIDIA_A100-SXM4-80GB",
    "NVIDIA_A100-SXM4-40GB",
    "A100-SXM4-40GB",
    "AMD_Instinct_MI300X",
    "AMD_Instinct_MI325_OAM",
    "AMD_Radeon_8060S_Graphics",
    "NVIDIA_H200",
    "NVIDIA_H200_NVL",
    "NVIDIA_H20_down",
    "NVIDIA_B200",
    "NVIDIA_GB200",
    "NVIDIA_L40S",
    "NVIDIA_GeForce_RTX_4090",
    "H100 SXM",
    "H100 SXM5",
    "H100-PCIe",
    "H100 NVL",
    "A100 40GB",
    "A100-80G",
    "an A100-80G box",
    "H200 141GB HBM3e",
    "H100 80 GB",
    "H100 HBM3",
    "H800 HBM3",
    "8xH100",
    "8x H100",
    "8 x A100",
    "8×H200",
    "2xB200s",
    "H100s",
    "A100s",
]
CONTEXTS = [
    "{}",
    "the {} box",
    "8x{}",
    "8 × {}",
    "{}s",
    "{}-based",
    "{}_x",
    "x{}",
    "({})",
    "{}.",
    "foo/{}/bar",
    "{} SXM 80GB",
    "{}_PCIe",
    "on {}, {} and {}",
    "[{}]",
    "{}ti",
    "a{}",
    "{}1",
]


def _variants(name: str) -> list[str]:
    return list(dict.fromkeys([name, name.lower(), name.upper(), name.swapcase(), name.title()]))


def _corpus() -> list[str]:
    out = [ctx.format(v, v, v) for n in NAMES for v in _variants(n) for ctx in CONTEXTS]
    rng = random.Random(23)
    alphabet = "ABGHLMTXIRPOSVDNaghlmtxirpos0123456789 _-x×"
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14))) for _ in range(20000)]
    return out


CORPUS = _corpus()


def _hits(rx: re.Pattern[str], text: str) -> list[tuple[tuple[int, int], tuple[str | None, ...]]]:
    return [(m.span(), m.groups()) for m in rx.finditer(text)]


def test_prose_pattern_is_the_old_one() -> None:
    assert prose._GPU_CORE == OLD_PROSE_CORE
    assert prose.GPU_RE.pattern == OLD_PROSE_RE.pattern
    for text in CORPUS:
        assert _hits(prose.GPU_RE, text) == _hits(OLD_PROSE_RE, text), text


@pytest.mark.parametrize(
    ("new", "old"),
    [(commits.GPU_RE, OLD_TEXT_RE), (commits.GPU_EXACT_RE, OLD_EXACT_RE)],
    ids=["text", "exact"],
)
def test_commit_text_patterns_match_what_the_old_ones_did(
    new: re.Pattern[str], old: re.Pattern[str]
) -> None:
    for text in CORPUS:
        for t in (text, commits._lower(text)):
            assert _hits(new, t) == _hits(old, t), t


def test_path_tokens_match_what_the_old_ones_did() -> None:
    tokens = {t for text in CORPUS for t in re.split(r"[/_.\-\s]+", text.lower()) if t}
    tokens |= {n.lower().replace(" ", "") for n in NAMES}
    assert len(tokens) > 1000
    for t in tokens:
        assert bool(commits._GPU_TOKEN_RE.fullmatch(t)) == bool(OLD_PATH_RE.fullmatch(t)), t


def test_device_name_rules_are_the_old_ones() -> None:
    assert names._BLACKWELL_DC.pattern == OLD_BLACKWELL_DC
    assert names._LOW_SMEM.pattern == OLD_LOW_SMEM
    assert names._PACKAGING.pattern == OLD_PACKAGING and names._PACKAGING.flags & re.I
    assert names._NVIDIA_HEAD.pattern == OLD_NVIDIA_HEAD
    assert names._AMD_HEAD.pattern == OLD_AMD_HEAD
    assert frozenset({"INSTINCT", "RADEON"}) == gpus.AMD_SERIES_WORDS


def test_simulated_gpu_names_are_the_old_ones() -> None:
    assert {g: GPUS[g].name for g in GPUS} == OLD_SIM_NAMES
    assert dict(gpus.SIM_GPU_NAMES) == OLD_SIM_NAMES


def test_every_term_is_used_and_the_hbm3_rule_is_kept() -> None:
    known = {gpus.PROSE, gpus.TEXT, gpus.EXACT, gpus.PATH}
    assert all(t.where and t.where <= known for t in gpus.TERMS)
    assert len({t.pattern for t in gpus.TERMS}) == len(gpus.TERMS)
    assert gpus.HBM3_IS_SXM == ("H100", "H800")
    assert str(prose.canonical_gpu("NVIDIA_H100_80GB_HBM3")) == "H100 SXM 80GB"
    assert str(prose.canonical_gpu("NVIDIA_H200_141GB_HBM3")) == "H200 141GB"
