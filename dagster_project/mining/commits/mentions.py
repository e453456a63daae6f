"""Models, hardware and speedup claims named in a commit's text.

Regexes rather than an LLM: the fields are lists of names, cheap to recompute when the PR
body arrives (the pull-request step calls :func:`extract_mentions` again on title + commit
message + PR body). The patterns follow ``shared/reference/commits.md`` §7:

* GPUs are normalised to upper case without spaces or hyphens (``RTX PRO 6000`` →
  ``RTXPRO6000``). Short names that are also ordinary tokens (``L4``, ``T4``, ``A10``,
  ``Thor`` …) must be written exactly; the distinctive ones match in any case.
  A count prefix is allowed (``8xH100``).
* Architectures are normalised to lower case without separators (``SM_90a`` → ``sm90a``).
* Model families are normalised to lower case with ``-`` separators and no separator
  between a family and its version (``Llama 3.1`` → ``llama3.1``, ``DeepSeek V3`` →
  ``deepseek-v3``, ``DSv3`` → ``deepseek-v3``). Ambiguous tokens such as ``opt`` and
  ``yi`` are left out on purpose.
* Speedup claims are the matched phrases, in order, without duplicates. FlashInfer commit
  bodies quote whole benchmark tables ("1.00x" …), so a list is stored and nobody should
  read ``max()`` of it as *the* claim.

Trailer lines (``Signed-off-by:``, ``Co-authored-by:`` …) are dropped first: a person's
name is not a model or a GPU.

Speed: the case-blind patterns run on a lower-cased copy without ``IGNORECASE`` and
without a leading look-behind (both stop the regex engine from skipping ahead); the
"not preceded by a word character" condition is checked by hand on each candidate.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from dagster_project import gpus

#: Version of hardware/model/speedup mentions. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "5"

_TRAILER_RE = re.compile(
    r"^[ \t]*(signed-off-by|co-authored-by|reviewed-by|acked-by|tested-by|reported-by"
    r"|suggested-by|cc|helped-by):[^\n]*$",
    re.IGNORECASE | re.MULTILINE,
)
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

# Lower-case patterns (applied to the lower-cased text), plus the case-exact short GPUs.
# The GPU names come from the one vocabulary (``dagster_project/gpus.py``).
GPU_RE = re.compile(r"(" + gpus.TEXT_GPUS + r")(?![\w-])")
GPU_EXACT_RE = re.compile(r"(" + gpus.EXACT_GPUS + r")(?![\w-])")
ARCH_RE = re.compile(
    r"(sm[_\s]?(?:7[05]|8[069]|90|10[0-3]|110|12[01])[af]?|hopper|blackwell|ampere"
    r"|ada(?:\s?lovelace)?|volta|turing|rubin|cdna\s?[234]?|gfx9\d{2}|gfx1[12]\d{2})(?![\w-])"
)
_SEP = r"[\s_-]?"
MODEL_RE = re.compile(
    r"("
    rf"llama{_SEP}(?:[1-4](?:\.\d)?)?"
    r"|mixtral|mistral"
    rf"|deepseek(?:{_SEP}(?:v[234](?:\.\d)?|r1|coder|vl2?))?"
    rf"|ds{_SEP}v[234](?:\.\d)?|dsr1"
    rf"|qwen{_SEP}\d?(?:\.\d)?(?:{_SEP}(?:moe|vl|next|coder))?"
    rf"|kimi(?:{_SEP}k\d(?:\.\d)?)?"
    rf"|glm{_SEP}\d(?:\.\d)?"
    rf"|gpt{_SEP}oss"
    rf"|gemma{_SEP}\d?"
    rf"|minimax(?:{_SEP}m\d)?"
    r"|nemotron(?:-h)?"
    rf"|mamba{_SEP}2?"
    rf"|phi{_SEP}[1-4](?:\.\d)?"
    rf"|grok{_SEP}\d?"
    r"|mimo|falcon|granite|jamba|baichuan|internlm\d?|chatglm\d?|olmoe?|dbrx|llava"
    r")(?![a-z0-9])"
)
_SPEEDUP_WORDS = (
    r"speed[\s-]?ups?|faster|improvements?|higher|better|throughput|perf\w*|lower|less"
    r"|reductions?|over"
)
SPEEDUP_RE = re.compile(
    r"\d+\.\d+\s?[x×](?![\w\d])"
    rf"|\d+\s?[x×]\s+(?:{_SPEEDUP_WORDS})\b"
    r"|[-+~]?\d+(?:\.\d+)?\s?%\s+(?:[\w/-]+\s+){0,2}?"
    r"(?:faster|speed[\s-]?ups?|improvements?|improved|higher|lower|reductions?|throughput"
    r"|latency|e2e|tps|tpot|ttft|itl|better|gains?|less|decrease|increase|boost)\b"
    r"|(?:speed[\s-]?ups?|improve[sd]?|reduc\w+|faster|boost\w*|increase[sd]?|decrease[sd]?"
    r"|gains?|up to|accelerat\w*|save[sd]?)\s+(?:\S+\s+){0,3}?(?:by|of|up to|~|about)?\s*~?"
    r"\d+(?:\.\d+)?\s?(?:%|x|×)(?![\w\d])"
)


@dataclass(frozen=True)
class Mentions:
    models: list[str]
    hardware: list[str]
    speedup_claims: list[str]


def strip_trailers(text: str) -> str:
    """The message without ``Signed-off-by:``-style trailer lines."""
    return _TRAILER_RE.sub("", text) if ":" in text else text


def _lower(text: str) -> str:
    """Lower case with offsets kept (``str.lower`` can change the length of non-ASCII)."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


def _word_before(text: str, pos: int) -> bool:
    return pos > 0 and (text[pos - 1].isalnum() or text[pos - 1] in "_-")


def _gpu_ok(text: str, pos: int) -> bool:
    """Not glued to a word, except a count prefix such as ``8x`` in ``8xH100``."""
    if not _word_before(text, pos):
        return True
    return pos >= 2 and text[pos - 1] in "xX×" and text[pos - 2].isdigit()


def _free(text: str, pos: int) -> bool:
    return not _word_before(text, pos)


def _matches(
    pattern: re.Pattern[str], text: str, ok: Callable[[str, int], bool] = _free
) -> Iterator[re.Match[str]]:
    """Matches whose start passes ``ok`` (the hand-checked look-behind)."""
    return (m for m in pattern.finditer(text) if ok(text, m.start()))


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def _norm_gpu(s: str) -> str:
    return re.sub(r"[\s-]", "", s).upper()


def _norm_arch(s: str) -> str:
    s = re.sub(r"[\s_-]", "", s.lower())
    return "ada" if s.startswith("ada") else s


def _norm_model(s: str) -> str:
    s = re.sub(r"[\s_-]+", "-", s.lower().strip())
    s = re.sub(r"(?<=[a-z])-(?=\d)", "", s)  # llama-3 → llama3, glm-4.5 → glm4.5
    s = re.sub(r"^ds-?(?=v\d)", "deepseek-", s)  # dsv3 → deepseek-v3
    s = re.sub(r"^deepseek(?=v\d|r1)", "deepseek-", s)
    return "deepseek-r1" if s == "dsr1" else s


# v5 (issue 21: "hardware not stated" in most prompts): the platform a change targets when
# no GPU or architecture is named. vLLM/SGLang titles say "[ROCm]", "[AMD]", "[XPU]",
# "[NPU]", "[CPU]" … and their bodies are empty, so these tags were the hardware statement
# most rows had and we dropped. Coarse on purpose: one label per platform, never a GPU
# guess. "CPU" counts only as a title tag or a path token ("CPU overhead" targets a GPU).
PLATFORM_RE = re.compile(
    r"(rocm|amd|hip|aiter|xpu|intel[\s-]gpu|npu|ascend|apple[\s-]silicon|mlx|s390x|risc-?v|rvv"
    r"|aarch64|arm64|avx-?512\w*|avx2|amx|\[cpu\])(?![\w-])"
)
_PLATFORM_OF = {
    "rocm": "rocm",
    "amd": "rocm",
    "hip": "rocm",
    "aiter": "rocm",
    "xpu": "xpu",
    "intel gpu": "xpu",
    "intel-gpu": "xpu",
    "npu": "npu",
    "ascend": "npu",
    "apple silicon": "apple",
    "apple-silicon": "apple",
    "mlx": "apple",
    "mps": "apple",
    "s390x": "s390x",
    "vxe": "s390x",
    "risc-v": "riscv",
    "riscv": "riscv",
    "rvv": "riscv",
    "aarch64": "arm",
    "arm64": "arm",
    "neon": "arm",
    "sve": "arm",
    "avx2": "x86",
    "amx": "x86",
    "x86": "x86",
    "[cpu]": "cpu",
    "cpu": "cpu",
}


def _platform(token: str) -> str | None:
    """The platform label of a text match or a path token (``avx512_bf16`` -> ``x86``)."""
    t = re.sub(r"\s+", " ", token)
    return "x86" if t.startswith("avx") and t[3:4] in ("5", "-") else _PLATFORM_OF.get(t)


def _platforms(low: str) -> list[str]:
    return _unique([p for m in _matches(PLATFORM_RE, low) if (p := _platform(m.group(1)))])


def _hardware(text: str, low: str) -> list[str]:
    gpus = sorted(
        [(m.start(), _norm_gpu(m.group(1))) for m in _matches(GPU_RE, low, _gpu_ok)]
        + [(m.start(), _norm_gpu(m.group(1))) for m in _matches(GPU_EXACT_RE, text, _gpu_ok)]
    )
    archs = [_norm_arch(m.group(1)) for m in _matches(ARCH_RE, low)]
    return _unique([g for _, g in gpus] + archs + _platforms(low))


def _models(low: str) -> list[str]:
    return _unique([_norm_model(m.group(1)) for m in _matches(MODEL_RE, low)])


_UNIT_RE = re.compile(r"[x×%]")


def _claim_windows(low: str) -> list[tuple[int, int]]:
    """Stretches of text around every "<digit>[ ]x|×|%": each claim contains one, and
    scanning only these stretches is ~10x faster than the whole text."""
    windows: list[tuple[int, int]] = []
    for m in _UNIT_RE.finditer(low):
        i = m.start()
        j = i - 1 if i > 0 and low[i - 1] == " " else i
        if j <= 0 or not low[j - 1].isdigit():
            continue
        a, b = max(0, i - 120), min(len(low), i + 60)
        if windows and a <= windows[-1][1]:
            windows[-1] = (windows[-1][0], b)
        else:
            windows.append((a, b))
    return windows


def _claims(text: str, low: str) -> list[str]:
    spans = []
    for a, b in _claim_windows(low):
        for m in SPEEDUP_RE.finditer(low, a, b):
            if not _glued_number(low, m.start()):
                spans.append(m.span())
    return _unique([re.sub(r"\s+", " ", text[a:b].strip()) for a, b in spans])


def _glued_number(low: str, pos: int) -> bool:
    """A number continuing a word or a decimal (``fp8x2``, ``1.5`` inside ``11.5``)."""
    return pos > 0 and (low[pos - 1].isalnum() or low[pos - 1] in "_.")


def hardware_mentioned(text: str) -> list[str]:
    """GPU names, then architectures, in order of first appearance."""
    text = strip_trailers(text)
    return _hardware(text, _lower(text))


def models_mentioned(text: str) -> list[str]:
    """Model families, normalised, in order of first appearance."""
    return _models(_lower(strip_trailers(text)))


def speedup_claims(text: str) -> list[str]:
    """Speedup phrases as written (whitespace collapsed), in order, without duplicates."""
    text = strip_trailers(text)
    return _claims(text, _lower(text))


def extract_mentions(*texts: str | None) -> Mentions:
    """All three lists from the concatenation of the given texts (title, message, body)."""
    joined = strip_trailers("\n\n".join(t for t in texts if t))
    low = _lower(joined)
    return Mentions(
        models=_models(low),
        hardware=_hardware(joined, low),
        speedup_claims=_claims(joined, low),
    )


# -- from the file itself: its path and its architecture guards ------------------------------
# Commit messages name hardware in only ~16% of rows, but the files say which GPUs they
# are for: directories and names (``blackwell/``, ``scaled_mm_sm90_fp8.cu``, ``hopper``,
# ``gfx942``) and compile-time or run-time guards (``__CUDA_ARCH__ >= 900``,
# ``__gfx942__``, ``is_device_capability(100)``). ``code_mentions`` reads those; the row
# keeps them apart (``hardware_from_code``) and adds them to ``hardware_mentioned``.
_PATH_SPLIT_RE = re.compile(r"[/_.\-]+")
_ARCH_TOKEN_RE = re.compile(
    r"(sm(?:7[05]|8[069]|90|10[0-3]|110|12[01])[af]?|hopper|blackwell|ampere|ada|volta|turing"
    r"|gfx9\d{2}|gfx1[12]\d{2}|cdna[234])"
)
_GPU_TOKEN_RE = re.compile(r"(" + gpus.PATH_GPUS + r")")
_CUDA_ARCH_GUARD_RE = re.compile(r"__CUDA_ARCH__\s*>=?\s*(\d{3,4})")
_CUDA_FEAT_GUARD_RE = re.compile(r"CUDA_ARCH_FEAT_SM(\d{2,3})")
_GFX_GUARD_RE = re.compile(r"__(gfx9\d{2}|gfx1[12]\d{2})__")
#: (literal that must be present, regex): each regex runs only when its literal is there.
_CAPABILITY_RES = (
    (
        "_device_capability",
        re.compile(r"(?:is|has)_device_capability(?:_family)?\(\s*(\d{2,3})\s*\)"),
    ),
    ("is_sm", re.compile(r"\bis_sm(\d{2,3})[af]?\b")),
    ("is_hopper", re.compile(r"\bis_(hopper)\b")),
    ("is_blackwell", re.compile(r"\bis_(blackwell)\b")),
)
_KNOWN_SM = {"70", "75", "80", "86", "89", "90", "100", "101", "103", "110", "120", "121"}


def _sm(value: str) -> str | None:
    """``900`` / ``90`` / ``1000`` / ``100`` -> ``sm90`` / ``sm100`` (None if unknown)."""
    v = (
        value[:-1]
        if len(value) in (3, 4) and value.endswith("0") and value[:-1] in _KNOWN_SM
        else value
    )
    return f"sm{v}" if v in _KNOWN_SM else None


def code_mentions(path: str, code: str, diff: str = "") -> tuple[list[str], list[str]]:
    """(hardware, models) named by the file's path and its architecture guards.

    Path tokens always count. Guards count when they sit in the diff (changed or context
    lines); without any there, a file that guards on exactly one architecture names it
    (a file dispatching over many says nothing about the change).
    """
    tokens = [t for t in _PATH_SPLIT_RE.split(path.lower()) if t]
    hardware = [t for t in tokens if _ARCH_TOKEN_RE.fullmatch(t) or _GPU_TOKEN_RE.fullmatch(t)]

    def guards(text: str) -> list[str]:
        found: list[str] = []
        # Each regex runs only when its literal is present: substring tests cost ~50x less.
        if "__CUDA_ARCH__" in text:
            found += [_sm(m.group(1)) or "" for m in _CUDA_ARCH_GUARD_RE.finditer(text)]
        if "CUDA_ARCH_FEAT_SM" in text:
            found += [_sm(m.group(1)) or "" for m in _CUDA_FEAT_GUARD_RE.finditer(text)]
        if "__gfx" in text:
            found += [m.group(1) for m in _GFX_GUARD_RE.finditer(text)]
        for key, rx in _CAPABILITY_RES:
            if key in text:
                found += [g if not g[0].isdigit() else (_sm(g) or "") for g in rx.findall(text)]
        return _unique(found)

    near = guards(diff) if diff else []
    if near:
        hardware += near
    else:  # the whole file only speaks when it targets one architecture
        whole = guards(code)
        hardware += whole if len(whole) == 1 else []
    models = _models(path.lower().replace("/", " "))
    # v5: the platform a path is for (``csrc/rocm/``, ``cpu_attn_vxe.hpp``, ``…/mlx/moe/``).
    platforms = [p for t in tokens if (p := _platform(t))]
    return _unique([_norm_arch(h) for h in hardware] + platforms), models
