"""A candidate comparison, the common output of every block kind, and how it becomes a
:class:`~dagster_project.gains.schema.Measurement`.

Block modules only say what they read (the two values as written, their labels, the row's
key cells, the header's metric and unit, a stated ratio, and the text of the row / record /
sentence each value came from). Filling ``scope``, ``batch_size``, ``shape``, ``hardware``,
``model``, ``unit`` and direction from that and the block's context happens here once, so
every layout gets the same metadata rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dagster_project.gains.extract.document import Block
from dagster_project.gains.extract.vocab import (
    BATCH_KEY,
    E2E_WORDS,
    HW_KEY,
    KERNEL_WORDS,
    MODEL_KEY,
    SHAPE_KEYS_KERNEL,
    metric_from_unit,
    unit_in,
)
from dagster_project.gains.mentions import distinct_gpus, find_models, find_shape
from dagster_project.gains.normalise import infer_higher_is_better, normalise_unit
from dagster_project.gains.numbers import parse_number
from dagster_project.gains.schema import Measurement, Scope


@dataclass
class Candidate:
    """One comparison read from a block (see module docstring)."""

    baseline: float | None
    optimized: float | None
    metric: str
    unit: str | None
    block: Block
    structure: str  # "table:row", "table:rows", "table:cell", "records", "sentence"
    keys: list[tuple[str, str]] = field(default_factory=list)
    baseline_label: str | None = None
    optimized_label: str | None = None
    stated: float | None = None
    stated_text: str | None = None
    evidence: list[str] = field(default_factory=list)
    higher_is_better: bool | None = None
    scope_hint: Scope | None = None
    batch_hint: int | None = None

    @property
    def is_pair(self) -> bool:
        return self.baseline is not None and self.optimized is not None


_MKN = re.compile(r"^\(?\s*(\d+)\s*[,x×]\s*\d+\s*[,x×]\s*\d+\s*\)?$")
_PROSE_BATCH = re.compile(
    r"\bbatch[ _-]?size\s*(?:=|:|of|is)?\s*(\d+)\b|\bbs\s*=\s*(\d+)\b|\bM\s*=\s*(\d+)\b", re.I
)


def _int(text: str) -> int | None:
    s = text.strip().replace(",", "")
    if re.fullmatch(r"\d+(?:\.0+)?", s):
        return int(float(s))
    return None


def _scope(c: Candidate, unit: str | None) -> Scope:
    if c.scope_hint:
        return c.scope_hint
    metric = c.metric or ""
    u = normalise_unit(unit)
    keys = [k for k, _ in c.keys]
    if E2E_WORDS.search(metric) or u in ("tok/s", "req/s", "s"):
        return "e2e"  # kernel timings are never whole seconds
    if KERNEL_WORDS.search(metric) or u in ("us", "ns", "TFLOPS", "GFLOPS", "GB/s", "TB/s"):
        return "kernel"
    if any(SHAPE_KEYS_KERNEL.match(k.strip()) for k in keys) or any(
        _LEAD_M.match(v or "") for _, v in c.keys
    ):
        return "kernel"
    b = c.block
    for text in (b.label, b.heading, b.before, b.after):
        k, e = KERNEL_WORDS.search(text), E2E_WORDS.search(text)
        if k and not e:
            return "kernel"
        if e and not k:
            return "e2e"
    own = f"{' '.join(c.evidence)}\n{b.text[:600]}"
    k, e = KERNEL_WORDS.search(own), E2E_WORDS.search(own)
    if k and not e:
        return "kernel"
    if e and not k:
        return "e2e"
    return "kernel" if re.search(r"\bkernel|\bop\b|\bgemm\b", b.title, re.I) else "e2e"


def _unit_of(c: Candidate) -> str | None:
    """The candidate's unit, else one its metric or the block's context names (the label,
    the line above, the text after, the heading, a "units are ..." sentence)."""
    b = c.block
    own = c.unit or unit_in(c.metric)
    if own is not None:
        return own
    unit = unit_in(b.label) or unit_in(b.before.split("\n")[-1] if b.before else "")
    if unit is None:
        unit = unit_in(b.after) or unit_in(b.heading)
    if unit is None:
        said = re.search(
            r"\bunits? (?:are|is|:)\s*([\w/µ-]+)|"
            r"\b(?:latenc(?:y|ies)|times?|numbers|results|values)"
            r"\s+(?:are\s+|is\s+)?(?:in|measured in)\s+([\w/µ-]+)",
            f"{b.before}\n{b.label}",
            re.I,
        )
        if said:
            unit = unit_in(said.group(1) or said.group(2))
    # 2.10: "- 10 QPS" above a TPOT table is the load, not the TPOT column's unit
    return None if unit is not None and _contradicts(c.metric, unit) else unit


def _contradicts(metric: str, unit: str) -> bool:
    """Whether a unit read from the context says the opposite direction of the metric's own
    words (a throughput unit for "TPOT", a time unit for "throughput")."""
    by_metric = infer_higher_is_better(metric, None)
    by_unit = infer_higher_is_better(None, unit)
    return by_metric is not None and by_unit is not None and by_metric != by_unit


@dataclass
class _KeyFields:
    """What a candidate's key cells say: batch size, shape parts, model and hardware."""

    batch: int | None
    shape_parts: list[str] = field(default_factory=list)
    model: str | None = None
    hardware: str | None = None


_KEY_IN_CELL = re.compile(
    r"^\s*(?P<k>mkn|\(?m,\s*n,\s*k\)?|m|bs|batch[_ ]?size)\s*=\s*(?P<v>\(?[\d\s,x×]+\)?)\s*$", re.I
)


#: a shape written in a key cell, M first ("M=768, N=2112, K=2048 / …"): a GEMM's shape,
#: whose M is the batch and which makes the measurement a kernel's (2.6)
_LEAD_M = re.compile(r"^\s*M\s*=\s*(\d+)\s*[,;x×]\s*N\s*=", re.I)


def _read_keys(c: Candidate) -> _KeyFields:
    """Batch size, shape, model and hardware from the candidate's key cells (the first
    batch key or M,N,K shape gives the batch; every other filled key is part of the shape)."""
    f = _KeyFields(c.batch_hint)
    for name, value in c.keys:
        n = name.strip()
        inner = _KEY_IN_CELL.match(value or "")
        lead_m = _LEAD_M.match(value or "")
        if lead_m and f.batch is None and not inner and not BATCH_KEY.match(n):
            f.batch = int(lead_m.group(1))  # "M=1, N=4096, K=4096 / …": a shape cell
        if inner and f.batch is None and not BATCH_KEY.match(n):
            # 2.6: a key cell that names its own key ("MKN=(16x4096x4096)", "M=64") under a
            # header that is a title, not a key name
            n, value = inner.group("k"), inner.group("v")
        if BATCH_KEY.match(n) and f.batch is None:
            f.batch = _int(value)
            f.shape_parts.append(f"{n}={value}")
        elif (
            re.fullmatch(r"\(?m,\s*n,\s*k\)?|mkn|shape", n, re.I)
            and _MKN.match(value)
            and f.batch is None
        ):
            m = _MKN.match(value)
            f.batch = int(m.group(1)) if m else None
            f.shape_parts.append(f"{n}={value}")
        elif MODEL_KEY.match(n) and value:
            f.model = value
        elif HW_KEY.match(n) and value:
            f.hardware = value
        elif value:
            f.shape_parts.append(f"{n}={value}" if n else value)
    return f


def _fill_from_context(c: Candidate, f: _KeyFields) -> None:
    """Hardware, model and batch size the keys left open, from the block's context when it
    names exactly one."""
    b = c.block
    ctx = b.context
    if f.hardware is None:
        gpus = distinct_gpus(f"{b.label}\n{b.heading}\n{b.before}") or distinct_gpus(ctx)
        f.hardware = gpus[0] if len(gpus) == 1 else None
    if f.model is None:
        models = find_models(f"{b.label}\n{b.heading}\n{b.before}")
        f.model = models[0] if models and len(set(models)) == 1 else None
    if f.batch is None and c.structure != "sentence":
        found = {
            int(next(g for g in m.groups() if g))
            for m in _PROSE_BATCH.finditer(f"{b.label}\n{b.before}")
        }
        if len(found) == 1:
            f.batch = found.pop()


def _direction(c: Candidate, metric: str, unit: str | None) -> bool | None:
    """Whether higher is better: as the candidate says, else from the metric and unit, else
    from the block's label and the text before it, else from its heading, after and title."""
    b = c.block
    hib = c.higher_is_better
    if hib is None:
        hib = infer_higher_is_better(metric, unit)
    if hib is None:
        hib = infer_higher_is_better(f"{b.label} {b.before}", None)
    if hib is None:
        hib = infer_higher_is_better(f"{b.heading} {b.after} {b.title}", None)
    return hib


def to_measurement(c: Candidate) -> Measurement:
    """The measurement a candidate describes, with context-filled fields (not yet audited)."""
    b = c.block
    unit = _unit_of(c)
    f = _read_keys(c)
    _fill_from_context(c, f)
    batch, model, hardware = f.batch, f.model, f.hardware
    ctx_shape = find_shape(f"{b.label}\n{b.before}")
    shape = ", ".join(f.shape_parts) if f.shape_parts else None
    if ctx_shape:
        shape = f"{ctx_shape}, {shape}" if shape else ctx_shape
    metric = (c.metric or "").strip() or metric_from_unit(unit)
    hib = _direction(c, metric, unit)
    return Measurement(
        scope=_scope(c, unit),
        metric=metric,
        unit=normalise_unit(unit),
        higher_is_better=hib,
        baseline=abs(c.baseline) if c.baseline is not None else None,
        optimized=abs(c.optimized) if c.optimized is not None else None,
        stated_speedup=c.stated,
        stated_text=c.stated_text,
        hardware=hardware,
        model=model,
        shape=shape,
        batch_size=batch,
        baseline_label=c.baseline_label,
        optimized_label=c.optimized_label,
        structure=c.structure,
        evidence=" || ".join(e.strip() for e in c.evidence)[:500] if c.evidence else None,
        source=f"{b.kind}:{c.structure}",
    )


def value_of(cell: str) -> float | None:
    """A measurement value from a cell; ``None`` for ranges, ratios, words and empty cells."""
    s = cell.strip()
    if not s or re.search(r"\d\s*[-–~]\s*\d+(?:\.\d+)?\s*[x%]", s) or re.search(r"\d[x×]\s*$", s):
        return None
    if re.search(r"\d\s*[–~]\s*\d", s):
        return None  # 2.8: "~683–690 TFLOPs", "1.2~1.4 ms": a range in any unit
    if re.match(r"^[±+-]?\s*\d", s) is None and not re.match(r"^[~≈<>]?\s*\*?\*?\d", s):
        return None
    return parse_number(s)
