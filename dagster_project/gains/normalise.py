"""Units, direction and speedup: the arithmetic that must never be left to a model.

A measurement's ``speedup`` is computed here from ``baseline`` and ``optimized``, oriented
so that **> 1 means the PR is better**: ``optimized / baseline`` for higher-is-better
metrics (throughput, TFLOPS, bandwidth) and ``baseline / optimized`` for lower-is-better
ones (latency, time, TTFT/TPOT/ITL). Direction comes from the unit first (a time unit is
lower-is-better, anything "per second" or FLOPS is higher-is-better) and from metric words
second; when neither decides, ``speedup`` stays ``None`` rather than guessing.

``stated_speedup`` is the ratio the PR states: the value of a ratio-only claim ("1.3x
faster", "23% lower latency"), or an explicit ratio written beside a pair, kept next to it.
Percentages are converted with the conventions in :func:`parse_stated_speedup`.
"""

from __future__ import annotations

import re

from dagster_project.gains.numbers import first_number
from dagster_project.gains.schema import Measurement

# --------------------------------------------------------------------------- units

_UNIT_ALIASES: dict[str, str] = {
    "ns": "ns",
    "nsec": "ns",
    "us": "us",
    "µs": "us",
    "μs": "us",
    "usec": "us",
    "usecs": "us",
    "microseconds": "us",
    "ms": "ms",
    "msec": "ms",
    "msecs": "ms",
    "millisecond": "ms",
    "milliseconds": "ms",
    "s": "s",
    "sec": "s",
    "secs": "s",
    "second": "s",
    "seconds": "s",
    "min": "min",
    "mins": "min",
    "minutes": "min",
    "tok/s": "tok/s",
    "toks/s": "tok/s",
    "token/s": "tok/s",
    "tokens/s": "tok/s",
    "tokens/sec": "tok/s",
    "token/sec": "tok/s",
    "tokens per second": "tok/s",
    "tok/sec": "tok/s",
    "toks/sec": "tok/s",
    "tps": "tok/s",
    "req/s": "req/s",
    "reqs/s": "req/s",
    "request/s": "req/s",
    "requests/s": "req/s",
    "requests/sec": "req/s",
    "req/sec": "req/s",
    "reqs/sec": "req/s",
    "qps": "req/s",
    "it/s": "it/s",
    "samples/s": "samples/s",
    "gb/s": "GB/s",
    "gbps": "GB/s",
    "gib/s": "GiB/s",
    "tb/s": "TB/s",
    "tflops": "TFLOPS",
    "tf": "TFLOPS",  # "1535 TF" in a GEMM table
    "tf/s": "TFLOPS",
    "tflop/s": "TFLOPS",
    "tflops/s": "TFLOPS",
    "gflops": "GFLOPS",
    "gflop/s": "GFLOPS",
    "pflops": "PFLOPS",
    "x": "x",
    "×": "x",
    "%": "%",
}

_CANONICAL_UNITS = frozenset(_UNIT_ALIASES.values())

#: Time units (lower is better when they are the whole unit or its numerator).
TIME_UNITS = frozenset({"ns", "us", "ms", "s", "min"})

#: Regex alternation of unit spellings, longest first, for parsers.
UNIT_PATTERN = "|".join(
    re.escape(u) for u in sorted(_UNIT_ALIASES, key=len, reverse=True) if u not in ("x", "×", "%")
)


def is_known_unit(unit: str | None) -> bool:
    """True for a spelling of a unit this module knows (``ms``, ``tok/s``, ``TFLOPS``, ``%``…)."""
    if not unit:
        return False
    u = normalise_unit(unit) or ""
    return u in _CANONICAL_UNITS or bool(re.fullmatch(r"(?:ns|us|ms|s|min)/\w+", u))


def normalise_unit(unit: str | None) -> str | None:
    """Canonical spelling of a unit (``µs``/``usec`` → ``us``, ``tokens/s`` → ``tok/s``).

    Unknown units are returned stripped but otherwise unchanged: a wrong guess would be
    worse than an unfamiliar spelling.
    """
    if unit is None:
        return None
    u = unit.strip().strip("()[]").strip()
    if not u:
        return None
    key = re.sub(r"\s*/\s*", "/", u.lower())  # "reqs / sec", as spreadsheets head a column
    if key in _UNIT_ALIASES:
        return _UNIT_ALIASES[key]
    # "ms/token", "us/iter": time per something
    head = key.split("/", 1)[0].strip()
    if "/" in key and head in _UNIT_ALIASES and _UNIT_ALIASES[head] in TIME_UNITS:
        return f"{_UNIT_ALIASES[head]}/{key.split('/', 1)[1].strip()}"
    return u


# ----------------------------------------------------------------------- direction

_LOWER_WORDS = re.compile(
    r"latency|latencies|\bttft\b|\btpot\b|\bitl\b|\be2el\b|\btime\b|duration|runtime|run time|"
    r"elapsed|overhead|\bdelay\b|\bcycles?\b|\bstall|time per|time to|wall[- ]?clock",
    re.I,
)
_HIGHER_WORDS = re.compile(
    r"throughput|throu?g?h?t?put\b|\btok/s\b|tokens?/s|tokens? per second|\bqps\b|\brps\b|"
    r"bandwidth|"
    r"\b[tgp]?flops\b|\bmfu\b|utili[sz]ation|goodput|\bspeed\b|speedup|speed-up|\bop/s\b|"
    r"samples/s|it/s|req/s|requests?/s|\bgb/s\b|\btb/s\b|\btpm\b|tokens? per minute",
    re.I,
)


def infer_higher_is_better(metric: str | None, unit: str | None) -> bool | None:
    """Whether larger values are better for this metric, or ``None`` if undecidable.

    The unit decides first (``ms``/``us``/``s`` → lower is better; ``…/s``, FLOPS,
    ``x`` → higher), because metric names are free text ("Kernel", "value", "main").
    Metric words decide next; a name matching both vocabularies yields ``None``.
    """
    u = normalise_unit(unit)
    if u:
        base = u.split("/", 1)[0]
        if u in TIME_UNITS or (base in TIME_UNITS and "/" in u):
            return False
        if u in ("x",) or u.endswith("/s") or "FLOPS" in u:
            return True
    text = metric or ""
    lower = bool(_LOWER_WORDS.search(text))
    higher = bool(_HIGHER_WORDS.search(text))
    if lower and not higher:
        return False
    if higher and not lower:
        return True
    return None


# ------------------------------------------------------------------------- speedup


def compute_speedup(
    baseline: float | None, optimized: float | None, higher_is_better: bool | None
) -> float | None:
    """Speedup of the PR over the baseline, > 1 meaning better; ``None`` if not defined.

    Undefined when a value is missing, not positive, or the direction is unknown.
    Rounded to 4 decimals: authors rarely report more than 3-4 significant digits, and a
    stable rounding keeps refreshes from rewriting rows over float noise.
    """
    if baseline is None or optimized is None or higher_is_better is None:
        return None
    if baseline <= 0 or optimized <= 0:
        return None
    ratio = optimized / baseline if higher_is_better else baseline / optimized
    return round(ratio, 4)


_RATIO_RE = re.compile(
    r"(?P<n>\d+(?:\.\d+)?)\s*(?P<u>[x×X%])(?![A-Za-z0-9])|(?P<bare>\d+(?:\.\d+)?)"
)
_DECREASE = re.compile(
    r"\blower\b|\bless\b|reduc|decreas|\bdrop|\bcut|\bfewer\b|\bshorter\b|\bsav(?:e|es|ed|ing)\b|\bdown\b",
    re.I,
)
_INCREASE = re.compile(r"\bhigher\b|\bmore\b|increas|\bboost|\bup\b|\braise", re.I)
_GOOD = re.compile(r"faster|speed-?up|improv|\bgain|\bbetter\b|\bquicker\b", re.I)
_BAD = re.compile(r"slower|regress|\bworse\b|degrad", re.I)


def parse_stated_speedup(
    phrase: str | float | int | None,
    *,
    higher_is_better: bool | None = None,
    kind: str | None = None,
) -> float | None:
    """Turn a stated ratio into a speedup (> 1 = PR better), or ``None``.

    Conventions (documented because percentages are ambiguous in English):

    * ``N x`` / ``N×`` (optionally "faster", "speedup", "lower latency") → ``N``;
      with "slower"/"regression" → ``1/N``.
    * ``P %`` "faster", "speedup", "improvement", "gain", "better" → ``1 + P/100``
      (the usual reading of "23% faster"); "slower"/"regression" → ``1/(1 + P/100)``.
    * ``P %`` with a quantity direction ("lower latency", "reduces TTFT", "higher
      throughput", or a signed ``−8.1%`` in a change column) is applied to the quantity:
      a latency cut by P% gives ``1/(1 − P/100)``, a throughput raised by P% gives
      ``1 + P/100``; the reverse moves give the reciprocal-side values (< 1).
    * a bare number (a value in a "Speedup" column) is taken as the ratio itself.

    ``kind`` is the column/phrase kind from a table header ("speedup", "improvement",
    "reduction", "change") and adds the same cue words as the phrase would.
    """
    if phrase is None or isinstance(phrase, bool):
        return None
    if isinstance(phrase, int | float):
        return round(float(phrase), 4) if phrase > 0 else None
    text = f"{phrase} {kind or ''}"
    m = _RATIO_RE.search(str(phrase))
    if not m:
        return None
    sign = 0.0
    if re.search(r"(^|[\s(])[-\u2212]\s*\d", str(phrase)):
        sign = -1.0
    elif re.search(r"(^|[\s(])\+\s*\d", str(phrase)):
        sign = 1.0
    if m.group("bare") is not None:
        tok = first_number(str(phrase))
        value = abs(tok.value) if tok else float(m.group("bare"))
        if "%" in (kind or "") or (
            kind and re.search(r"improv|reduc|change|gain|diff|delta", kind, re.I)
        ):
            return _from_percent(value, sign, text, higher_is_better)
        return round(value, 4) if value > 0 else None
    n = float(m.group("n"))
    if m.group("u") in "x×X":
        if n <= 0:
            return None
        return round(1.0 / n if _BAD.search(text) else n, 4)
    return _from_percent(n, sign, text, higher_is_better)


def _from_percent(p: float, sign: float, text: str, higher_is_better: bool | None) -> float | None:
    frac = p / 100.0
    if _BAD.search(text):
        return round(1.0 / (1.0 + frac), 4)
    hib = higher_is_better if higher_is_better is not None else infer_higher_is_better(text, None)
    decrease = sign < 0 or (sign == 0 and bool(_DECREASE.search(text)))
    increase = sign > 0 or (bool(_INCREASE.search(text)) and not decrease)
    if decrease and hib is not None:
        if frac >= 1:
            return None
        return round(1.0 / (1.0 - frac) if not hib else 1.0 - frac, 4)
    if increase and hib is not None:
        return round(1.0 + frac if hib else 1.0 / (1.0 + frac), 4)
    if _GOOD.search(text) or increase:
        return round(1.0 + frac, 4)
    if decrease and frac < 1:
        # "reduced by 20%" with no metric: a reduction of a cost
        return round(1.0 / (1.0 - frac), 4)
    return None


def finalise(m: Measurement) -> Measurement:
    """Fill the derived fields of ``m`` in place and return it.

    Canonical unit, direction when not given, computed ``speedup``. A stated ratio
    written beside a pair is kept as ``stated_speedup`` next to it (the audit checks that
    the two agree); it never replaces the pair.
    """
    m.unit = normalise_unit(m.unit)
    if m.higher_is_better is None:
        m.higher_is_better = infer_higher_is_better(m.metric, m.unit)
    if m.is_pair:
        m.speedup = compute_speedup(m.baseline, m.optimized, m.higher_is_better)
    else:
        m.speedup = None
    return m
