"""The tuned-config file-name grammar, and what a device name says about the GPU.

A tuned-config file is named after the lookup key the runtime builds, e.g.
``E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json``. The names look
comma-separated but are not safely splittable: device names are free text from the driver
(``Intel(R)_Graphics_[0xe223]``), SGLang writes ``block_shape=[128, 128]`` with a space,
and SGLang's ``_down`` suffix attaches to whatever field happens to come last
(``…,dtype=fp8_w8a8_down.json``, ``…,device_name=NVIDIA_H20_down.json``). So the parser
strips the suffixes first and then anchors on the *known* ``key=`` tokens, treating the
device as the shortest text up to the next known key (reference configs.md §2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dagster_project import gpus
from dagster_project.terminal import has_control

#: Version of the config file-name grammar and GPU names. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "2"

FAMILIES = ("moe", "block_fp8", "block_int8", "ssu")

# Every dtype token the runtimes have ever written. Unknown tokens still parse (the
# grammar is anchored on keys, not values) but are flagged by ``ParsedName.known_dtype``.
MOE_DTYPES = frozenset({"fp8_w8a8", "int8_w8a8", "int8_w8a16", "int4_w4a16", "float8", "bf16"})
BLOCK_DTYPES = frozenset({"fp8_w8a8", "int8_w8a8", "fp8_w8a8_per_token"})
SSU_CACHE_DTYPES = frozenset({"float16", "float32"})

# Dtypes the current runtimes can never ask for, so files carrying them are dead at
# runtime (configs.md §2): they are still real tuning results and stay in the dataset.
LEGACY_DTYPES = frozenset({"float8", "bf16"})

_TOKEN = r"[A-Za-z0-9_.\-]+"
_BLOCK = r"\[\s*(?P<bn>\d+)\s*,\s*(?P<bk>\d+)\s*\]"

# The device is lazy (``.*?``) and every later field is optional, so the regex engine
# grows the device only until the rest of the name matches one of the known keys.
_MOE_RE = re.compile(
    r"^E=(?P<E>\d+),N=(?P<N>\d+),device_name=(?P<dev>.*?)"
    rf"(?:,dtype=(?P<dtype>{_TOKEN}?))?"
    rf"(?:,block_shape={_BLOCK})?"
    r"(?:,per_channel_quant=(?P<pcq>True|False))?$"
)
_BLOCK_RE = re.compile(
    r"^N=(?P<N>\d+),K=(?P<K>\d+),device_name=(?P<dev>.*?)"
    rf",dtype=(?P<dtype>{_TOKEN}?)"
    rf"(?:,block_shape={_BLOCK})?"
    rf"(?:,input_dtype=(?P<input_dtype>{_TOKEN}?))?"
    rf"(?:,out_dtype=(?P<out_dtype>{_TOKEN}?))?$"
)
_SSU_RE = re.compile(
    r"^headdim=(?P<headdim>\d+),dstate=(?P<dstate>\d+),device_name=(?P<dev>.*?)"
    rf",cache_dtype=(?P<cache>{_TOKEN}?)$"
)


class ConfigNameError(ValueError):
    """A file name that is not a tuned-config lookup key; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ParsedName:
    """Everything a tuned-config file name encodes.

    ``N`` is the per-expert intermediate size after tensor parallelism for MoE files and
    the output features for block-matmul files; ``K`` exists only for block matmul. A
    missing ``dtype`` on a MoE file means bf16/fp16 activations and weights.
    """

    family: str
    device_name: str
    E: int | None = None
    N: int | None = None
    K: int | None = None
    dtype: str | None = None
    block_shape: tuple[int, int] | None = None
    per_channel_quant: bool = False
    is_down: bool = False
    headdim: int | None = None
    dstate: int | None = None
    cache_dtype: str | None = None
    input_dtype: str | None = None
    out_dtype: str | None = None

    @property
    def known_dtype(self) -> bool:
        if self.family == "ssu":
            return self.cache_dtype in SSU_CACHE_DTYPES
        if self.family == "moe":
            return self.dtype is None or self.dtype in MOE_DTYPES
        return self.dtype in BLOCK_DTYPES


# A ``,key=`` inside the lazily matched device means a field the grammar does not know
# (or a malformed known one) was swallowed into the device name: reject instead.
_STRAY_FIELD = re.compile(r",[A-Za-z_]+=")


def _device(m: re.Match[str]) -> str:
    dev = m.group("dev")
    stray = _STRAY_FIELD.search(dev)
    if stray:
        tail = dev[stray.start() :]
        raise ConfigNameError(f"unknown or malformed fields after device_name: {tail!r}")
    return dev


def _block(m: re.Match[str]) -> tuple[int, int] | None:
    if m.group("bn") is None:
        return None
    return int(m.group("bn")), int(m.group("bk"))


def parse_config_name(name: str) -> ParsedName:
    """Parse one tuned-config file name (a basename, or a path whose last part is used).

    Raises ``ConfigNameError`` with a human-readable reason for anything that is not a
    MoE, block-matmul or selective-state-update lookup key, so callers can record it.
    """
    base = name.rsplit("/", 1)[-1]
    if not base.endswith(".json"):
        raise ConfigNameError("not a .json file")
    stem = base[: -len(".json")]
    is_down = stem.endswith("_down")
    if is_down:
        stem = stem[: -len("_down")]
    # any control, escape (ESC, OSC 52, CSI, C1) or bidi character: the name becomes a GPU
    # label that the CLI and the exports show (issue 42; the rule is terminal.has_control)
    if has_control(stem):
        raise ConfigNameError("control character in file name")

    if stem.startswith("E="):
        m = _MOE_RE.match(stem)
        if not m:
            raise ConfigNameError(
                "MoE name does not match E=..,N=..,device_name=..[,dtype=..]"
                "[,block_shape=[a,b]][,per_channel_quant=True]"
            )
        return ParsedName(
            family="moe",
            device_name=_device(m),
            E=int(m.group("E")),
            N=int(m.group("N")),
            dtype=m.group("dtype"),
            block_shape=_block(m),
            per_channel_quant=m.group("pcq") == "True",
            is_down=is_down,
        )
    if stem.startswith("N="):
        m = _BLOCK_RE.match(stem)
        if not m:
            raise ConfigNameError(
                "block-matmul name does not match N=..,K=..,device_name=..,"
                "dtype=..[,block_shape=[a,b]]"
            )
        dtype = m.group("dtype")
        return ParsedName(
            family="block_int8" if dtype.startswith("int8") else "block_fp8",
            device_name=_device(m),
            N=int(m.group("N")),
            K=int(m.group("K")),
            dtype=dtype,
            block_shape=_block(m),
            is_down=is_down,
            input_dtype=m.group("input_dtype"),
            out_dtype=m.group("out_dtype"),
        )
    if stem.startswith("headdim="):
        m = _SSU_RE.match(stem)
        if not m:
            raise ConfigNameError(
                "SSU name does not match headdim=..,dstate=..,device_name=..,cache_dtype=.."
            )
        return ParsedName(
            family="ssu",
            device_name=_device(m),
            headdim=int(m.group("headdim")),
            dstate=int(m.group("dstate")),
            cache_dtype=m.group("cache"),
            is_down=is_down,
        )
    raise ConfigNameError("name starts with none of E=, N=, headdim= (not a tuned-config key)")


def normalised_basename(name: str) -> str:
    """The basename with spaces removed: ``[128, 128]`` (SGLang) equals ``[128,128]`` (vLLM).

    This is the identity of a (shape, GPU, dtype) across repos and Triton-version folders,
    used for the grouped split.
    """
    return name.rsplit("/", 1)[-1].replace(" ", "")


# --------------------------------------------------------------------------------------
# GPU normalisation
# --------------------------------------------------------------------------------------

# The GPU names and packaging tokens come from the one vocabulary (``dagster_project/gpus.py``).
_PACKAGING = re.compile(gpus.PACKAGING_TOKEN, re.IGNORECASE)
_AMD_HEAD = re.compile(gpus.AMD_MODEL_HEAD)
_NVIDIA_HEAD = re.compile(r"^(" + "|".join(gpus.NVIDIA_MODEL_PREFIXES) + r")\d*")
_AMD_OAM = re.compile(r"^(MI\d{3})_OAM$")


@dataclass(frozen=True)
class Gpu:
    vendor: str | None
    model: str | None

    @property
    def label(self) -> str | None:
        """``"NVIDIA H100"``; ``None`` when the device name is empty (unknown GPU)."""
        if self.model is None:
            return None
        return f"{self.vendor} {self.model}" if self.vendor else self.model


def _vendor_and_tokens(tokens: list[str]) -> tuple[str | None, list[str]]:
    """The vendor a device name starts with (a vendor word, dropped from the tokens, or a
    model family that names one), and the tokens left."""
    vendor: str | None = None
    head = tokens[0].upper()
    if head == "NVIDIA":
        vendor, tokens = "NVIDIA", tokens[1:]
    elif head == "AMD":
        vendor, tokens = "AMD", tokens[1:]
    elif head == "INTEL":
        vendor, tokens = "Intel", tokens[1:]
    elif head in gpus.AMD_SERIES_WORDS or _AMD_HEAD.match(head):
        vendor = "AMD"
    elif _NVIDIA_HEAD.match(head):
        vendor = "NVIDIA"
    return vendor, tokens


def _amd_tokens(tokens: list[str]) -> tuple[list[str], Gpu | None]:
    """An AMD name's tokens without "Instinct" and an ``_OAM`` suffix; the OAM module of an
    MI chip comes back as that chip's :class:`Gpu` instead."""
    if tokens and tokens[0].lower() == "instinct":
        tokens = tokens[1:]
    joined = "_".join(tokens)
    m = _AMD_OAM.match(joined)
    if m:  # MI325_OAM is the OAM module of MI325X (same chip, amdsmi's spelling)
        return tokens, Gpu("AMD", m.group(1) + "X")
    if joined.endswith("_OAM"):
        tokens = joined[: -len("_OAM")].split("_")
    return tokens, None


def _without_graphics(vendor: str | None, tokens: list[str]) -> list[str]:
    """A trailing "Graphics" dropped where it is only a suffix of a model name."""
    if vendor == "Intel" and tokens and tokens[-1].lower() == "graphics" and len(tokens) > 1:
        tokens = tokens[:-1]
    if vendor == "AMD" and len(tokens) > 2 and tokens[-1].lower() == "graphics":
        tokens = tokens[:-1]  # Radeon_8060S_Graphics -> Radeon 8060S; keep "Radeon Graphics"
    return tokens


def _model_words(tokens: list[str]) -> list[str]:
    """The tokens without their packaging parts (``80GB``, ``HBM3``, ``SXM5``...)."""
    kept: list[str] = []
    for tok in tokens:
        parts = [p for p in tok.split("-") if p and not _PACKAGING.match(p)]
        if parts:
            kept.append("-".join(parts))
    return kept


def normalise_gpu(device_name: str) -> Gpu:
    """Vendor and model from a runtime device name (spaces already turned into ``_``).

    The runtimes write whatever the driver reports, so one chip has several spellings
    (``AMD_Instinct_MI325X`` vs ``AMD_Instinct_MI325_OAM``, ``NVIDIA_H100`` vs
    ``NVIDIA_H100_80GB_HBM3``); this folds the spellings of one chip together.
    """
    dev = device_name.strip().strip("_")
    if not dev:
        return Gpu(None, None)
    dev = dev.replace("(R)", "").replace("(TM)", "").replace("(tm)", "")
    tokens = [t for t in re.split(r"[_ ]+", dev) if t]
    vendor, tokens = _vendor_and_tokens(tokens)
    if vendor == "AMD":
        tokens, oam = _amd_tokens(tokens)
        if oam is not None:
            return oam
    tokens = _without_graphics(vendor, tokens)
    kept = _model_words(tokens)
    model = " ".join(kept) if kept else dev
    return Gpu(vendor, model)


# Compute-capability classes the default heuristics branch on. Only names are known at
# mining time, so these are name rules; they cover every GPU seen in the repos.
_BLACKWELL_DC = gpus.leading_name_re(gpus.BLACKWELL_DATACENTER)
_LOW_SMEM = gpus.leading_name_re(gpus.LOW_SHARED_MEMORY)


def is_blackwell_datacenter(model: str | None) -> bool:
    """sm_100 family (what vLLM's ``is_device_capability_family(100)`` is true for)."""
    return bool(model and _BLACKWELL_DC.match(model))


def has_low_shared_memory(vendor: str | None, model: str | None) -> bool:
    """True for CUDA GPUs with < 128 KiB opt-in shared memory per block (sm_86/89/120/121).

    SGLang switches its fp8 per-tensor default on this (``_use_low_smem_fp8_default``).
    """
    return vendor == "NVIDIA" and bool(model and _LOW_SMEM.match(model))
