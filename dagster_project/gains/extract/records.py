"""Label/value records and the runs they form: benchmark output and ``main:`` lines.

A **record** is one ``key: value unit`` reading (``Avg latency: 1.23 seconds``,
``Request throughput (req/s): 8.30``, ``Batch size: 16, Kernel time: 98.6 us``). Keys that
name a condition
(batch size, M, num_tokens) become the record's keys, the others its metric. (2.13: JSON
lines and tqdm progress rates are no longer read: they paid on no development text.)

A **run** is the records under one role: a code block labelled by the line before it
(``main:`` / ``this PR:``, ``Default config:``, "Throughput before (…)") or by its first
line, a paragraph after a role line (``**After**``), or a single role line with its values
(``- main: 9,812 tok/s``, ``Kernel: 9 us`` / ``PyTorch: 93 us``). Runs are paired in
document order, baseline with the optimized run next to it, and one measurement is made
per metric (and keys) present in both; counts, durations and settings never are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dagster_project.gains.extract.candidate import Candidate
from dagster_project.gains.extract.document import Block, Grid, clean_cell
from dagster_project.gains.extract.vocab import (
    BATCH_KEY,
    CONCURRENCY_KEY,
    METRIC_WORDS,
    SHAPE_KEYS_KERNEL,
    Role,
    is_non_measurement,
    role_of,
    strip_role_words,
    unit_in,
)
from dagster_project.gains.normalise import UNIT_PATTERN, normalise_unit
from dagster_project.gains.numbers import parse_number

_VAL = r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?"
_UNIT = rf"(?:{UNIT_PATTERN}|%)"
_PART = re.compile(
    rf"(?P<key>(?:\d+(?:\.\d+)?%\s*)?[A-Za-z][\w .()/%#@+\-]*?)\s*(?::|=|\bis\b)\s*\**\s*"
    # 2.9: a unit may end its sentence ("Time elapsed: 25.39 s. mem usage=…")
    rf"(?P<val>{_VAL})\s*(?:(?P<unit>{_UNIT})(?!\w)(?!\.[\w.])|(?![\w.]))",
    re.I,
)
#: 2.4: up to two words may stand between a further value and its unit ("1022.46 total
#: tokens/s, 480.27 output tokens/s"): they name the record ("Throughput total tokens/s")
_EXTRA = re.compile(
    rf"^\s*[,;]\s*(?P<val>{_VAL})\s*(?P<words>(?:[A-Za-z]+\s+){{0,2}}?)(?P<unit>{_UNIT})(?![\w.])",
    re.I,
)
_ROLE_LINE_MAX = 90


@dataclass
class Rec:
    """One reading of a run."""

    metric: str
    value: float
    text: str
    unit: str | None
    keys: tuple[tuple[str, str], ...]
    line: str


@dataclass
class Run:
    """Records under one role, from one block (or one line)."""

    role: Role
    label: str
    block: Block
    records: list[Rec] = field(default_factory=list)
    #: a stated ratio written right after a one-value run (``Speedup: 1.62×``), with its text
    stated: tuple[float, str] | None = None


def _key_name(key: str) -> str:
    k = clean_cell(key).strip(" -*:")
    # 2.4: "the prefix length is 200" names the key "prefix length", a condition
    return re.sub(r"^(?:\d+\.\s+|[-*+]\s+)?(?:(?:the|a|an|and)\s+)?", "", k, flags=re.I)


def _condition_key(key: str) -> bool:
    """A key that names a condition of the run (batch size, M, lengths, TP), not a metric."""
    return bool(
        BATCH_KEY.match(key)
        or SHAPE_KEYS_KERNEL.match(key)
        or CONCURRENCY_KEY.match(key)
        or re.fullmatch(
            r"(?:input|output|prompt|prefix|seq|sequence|context)[_ ]?len(?:gth)?|tp|dp|ep|"
            r"\w+[_ ]size|\w+[_ ]len|"
            r"num[_ ]\w+|n_\w+|bs",
            key,
            re.I,
        )
    )


_LEAD_KEY = re.compile(
    r"^(?P<k>batch[ _]?size|bs|m|num[_ ]tokens|tp|seq[_ ]len)\s*=?\s*(?P<v>\d+)\b[^:]{0,20}:\s*"
    r"(?=[A-Za-z])",
    re.I,
)
_HEAD_VALUE = re.compile(
    rf"^(?P<head>(?:[\w.]+\s*=\s*[\w.]+[\s,]*)+):\s*(?P<val>{_VAL})\s*(?P<unit>{_UNIT})?\s*$",
    re.I,
)
_ALIGNED_PAIR = re.compile(rf"^(?P<name>\S.*?\S)\s{{2,}}(?P<val>{_VAL})\s*(?P<unit>{_UNIT})\s*$")


def _keyed_records(s: str, line: str) -> list[Rec] | None:
    """The line shapes whose keys come first or that are one aligned pair: "Batch size 16:
    Avg latency: 3.9 seconds" (a key written before the record), "bs=1: 0.459s" (keys, then
    the value) and "kernel_name     3.136 us"; ``None`` when the line is none of them."""
    lead = _LEAD_KEY.match(s)
    if lead:
        inner = parse_records(s[lead.end() :])
        kv = (lead.group("k"), lead.group("v"))
        return [Rec(r.metric, r.value, r.text, r.unit, (kv, *r.keys), line) for r in inner]
    m = _HEAD_VALUE.match(s)
    if m:
        v = parse_number(m.group("val"))
        ks = tuple(
            (a.strip(), b.strip())
            for a, b in re.findall(r"([\w.]+)\s*=\s*([\w.]+)", m.group("head"))
        )
        return [Rec("", v, m.group("val"), m.group("unit"), ks, line)] if v is not None else []
    m = _ALIGNED_PAIR.match(line.strip())
    if m and not re.search(r":\s|:$", m.group("name")):
        v = parse_number(m.group("val"))
        return (
            [Rec(m.group("name"), v, m.group("val"), m.group("unit"), (), line)]
            if v is not None
            else []
        )
    return None


def _extra_records(key: str, rest: str, line: str) -> list[Rec]:
    """Further values of one key written after its first (``latency: 1.2 ms, 1.3 ms``)."""
    out: list[Rec] = []
    while True:
        e = _EXTRA.match(rest)
        if not e:
            break
        ev = parse_number(e.group("val"))
        if ev is not None:
            name = " ".join(x for x in (key, e.group("words").strip(), e.group("unit")) if x)
            out.append(Rec(name, ev, e.group("val"), e.group("unit"), (), line))
        rest = rest[e.end() :]
    return out


def _part_records(s: str, line: str) -> list[Rec]:
    """The ``key: value unit`` parts of a line; condition keys become every record's keys."""
    out: list[Rec] = []
    keys: list[tuple[str, str]] = []
    for m in _PART.finditer(s):
        key = _key_name(m.group("key"))
        v = parse_number(m.group("val"))
        if v is None or not key:
            continue
        unit = m.group("unit")
        if _condition_key(key) and (unit is None or unit == "%"):
            keys.append((key, m.group("val")))
            continue
        out.append(Rec(key, v, m.group("val"), unit, (), line))
        out.extend(_extra_records(key, s[m.end() :], line))
    return [Rec(r.metric, r.value, r.text, r.unit, tuple(keys), r.line) for r in out]


def parse_records(line: str) -> list[Rec]:
    """The records of one line (see module docstring); empty for prose."""
    s = clean_cell(line.strip().lstrip("-*+> ").strip())
    if not s:
        return []
    if len(s) > 200 or re.search(r"[.!?]\s+[A-Z][a-z]+\s+\w+\s+\w+", s):
        return []
    keyed = _keyed_records(s, line)
    if keyed is not None:
        return keyed
    return _part_records(s, line)


def role_line(line: str) -> Role | None:
    """The role a short label line names (``main:``, ``**This PR**``, ``Default config:``)."""
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", clean_cell(line)).strip().rstrip(":").strip()
    s = re.sub(r"^[-*+>#\s]+", "", s)
    if not s or len(s) > _ROLE_LINE_MAX:
        return None
    if _COMMAND.search(s) or re.match(r"^\s*\$\s", line):
        return None  # 2.9: a shell command ("$ vllm serve …", "python bench.py") names no side
    # numbers that are names (#123, H100, fp8-e4m3) and, 2.9, commit shas do not count
    named = re.sub(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", "", s)
    named = re.sub(r"#\d+|\b[A-Za-z]+\d+\w*|\w+-\d\w*", "", named)
    if len(re.findall(r"\d+(?:\.\d+)?", named)) > 1:
        return None
    if not (
        line.rstrip().endswith(":") or len(s.split()) <= 6 or re.match(r"^\s*(?:#|\*\*|__)", line)
    ):
        return None
    head, sep, tail = s.partition(":")
    if sep and tail.strip():
        s = head  # "Backend: sglang" is a key/value line; only a label before ":" names a role
    if _COMPARED_TO.match(s):
        return Role("baseline", 2)  # 2.4: "Comparing to outlines" names the baseline's run
    r = role_of(s)
    return r if r.kind in ("baseline", "optimized") else None


#: 2.9: a shell command line: a flag, a script, or a launcher and its verb
_COMMAND = re.compile(
    r"(?:^|\s)--[a-z]|\S\.py\b|^(?:python3?|torchrun|bash|uv|pip|sglang|vllm)\s+"
    r"(?:-m\b|serve\b|bench\b|generate\b|run\b|install\b)",
    re.I,
)
#: a label line that names what the run below is compared with (the baseline)
_COMPARED_TO = re.compile(
    r"^(?:comparing|compared|comparison|in comparison)\s+(?:to|with|against)\b|^(?:vs\.?|versus)\s",
    re.I,
)
#: 2.4: a distribution summary (pandas ``describe()``): a title line ending in ":", then
#: ``mean  4552.2`` / ``25%  3864.3`` lines; count and std are not measurements
_STAT_TITLE = re.compile(r"^\s*(?P<title>[A-Za-z][^:\d]{2,60}?(?:\([^)]*\))?)\s*:\s*$")
_STAT_LINE = re.compile(
    rf"^\s*(?P<stat>mean|min|max|median|p\d{{1,2}}|\d{{1,2}}%)\s+(?P<val>{_VAL})\s*$"
)


_STATED_LINE = re.compile(
    rf"^(?:speed-?up|ratio)\s*[:=]\s*(?P<raw>~?(?P<val>{_VAL})\s*[x×])\s*$", re.I
)


def _stat_record(title: str, ln: str) -> Rec | None:
    """``mean  4552.206317`` under ``First token latency(msecs):`` as one record."""
    m = _STAT_LINE.match(ln)
    if not m or not title:
        return None
    value = parse_number(m.group("val"))
    if value is None:
        return None
    stat = {"min": "minimum", "max": "maximum"}.get(m.group("stat"), m.group("stat"))
    metric = f"{title} {stat}"  # "minimum", never the unit "min"
    return Rec(metric, value, m.group("val"), unit_in(title), (), ln)


def _role_value(line: str) -> tuple[Role, str, str] | None:
    """``main: 9,812 tok/s`` / ``Kernel: 9 us`` → (role, label, rest)."""
    s = clean_cell(line.strip().lstrip("-*+> "))
    m = re.match(r"^(?P<label>[^:=]{1,40}?)\s*[:=]\s*(?P<rest>.+)$", s)
    if not m:
        return None
    label = m.group("label")
    r = role_of(label)
    if r.strength < 2 and re.search(
        r"\d\s*[x×]\s*faster|\bfaster\b|\bspeed-?up\b", m.group("rest"), re.I
    ):
        r = Role("optimized", 2)  # "FlashInfer: 3.79 us/call (1.49x faster)": the side said to win
    if r.kind not in ("baseline", "optimized"):
        return None
    if METRIC_WORDS.search(strip_role_words(label)) and r.strength < 2:
        return None
    return r, label, m.group("rest")


def _value_records(rest: str, line: str) -> list[Rec]:
    recs = parse_records(rest)
    if recs:
        return recs
    m = re.match(rf"^\s*\**\s*(?P<val>{_VAL})\s*(?P<unit>{_UNIT})?(?P<tail>.*)$", rest, re.I)
    if not m:
        return []
    v = parse_number(m.group("val"))
    tail = m.group("tail") or ""
    if (
        v is None
        or re.match(r"^\s*[-–~]\s*\d", tail)
        or (not m.group("unit") and re.match(r"^\.\d", tail))
    ):
        return []  # a range, or a version ("Pytorch: 2.11.0"), is not a value of a run
    unit = m.group("unit")
    if unit == "%":
        return []
    out = [Rec("", v, m.group("val"), unit, (), line)]
    for e in re.finditer(rf"[,;/]\s*(?P<val>{_VAL})\s*(?P<unit>{_UNIT})", tail, re.I):
        ev = parse_number(e.group("val"))
        if ev is not None:
            out.append(Rec(e.group("unit"), ev, e.group("val"), e.group("unit"), (), line))
    return out


def _merge(
    section: tuple[tuple[str, str], ...], own: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    names = {k.lower() for k, _ in own}
    return tuple(kv for kv in section if kv[0].lower() not in names) + own


def key_only(line: str) -> tuple[tuple[str, str], ...] | None:
    """``batch size: 32`` / ``M=64, N=4096`` on a line of its own: the keys of the records below."""
    s = clean_cell(line.strip().lstrip("-*+> ").strip()).rstrip(":").strip()
    sec = re.fullmatch(r"(TP|EP|DP|PP)\s*=?\s*(\d+)", s, re.I)
    if sec:
        return ((sec.group(1).upper(), sec.group(2)),)
    parts = re.findall(r"([A-Za-z][\w ]{0,20}?)\s*[:=]?\s*(\d+)(?![\d.])", s)
    if not parts or re.sub(r"([A-Za-z][\w ]{0,20}?)\s*[:=]?\s*(\d+)", "", s).strip(" ,;") != "":
        return None
    keys = tuple((k.strip(), v) for k, v in parts)
    if not all(
        BATCH_KEY.match(k)
        or SHAPE_KEYS_KERNEL.match(k)
        or re.fullmatch(r"\w+[_ ]size|\w+[_ ]len", k, re.I)
        for k, _ in keys
    ):
        return None
    return keys


#: ``Benchmark duration (s):   437.69    ->  409.60``: one key, the value before and after
_ARROW_LINE = re.compile(
    rf"^\s*(?P<key>[A-Za-z][^:=\d]{{1,60}}?)\s*[:=]\s*(?P<b>{_VAL})\s*(?P<ub>{_UNIT})?\s*"
    rf"(?:->|→|=>|⟶|⇒)\s*(?P<o>{_VAL})\s*(?P<uo>{_UNIT})?\s*$",
    re.I,
)


def _arrow_line(b: Block, ln: str) -> Candidate | None:
    """A key/value line of a run whose value is written as ``before -> after`` (a code block
    of one run edited to show both sides); the arrow's order is before to after."""
    m = _ARROW_LINE.match(ln)
    if not m:
        return None
    key = m.group("key").strip()
    unit = m.group("uo") or m.group("ub") or unit_in(key)
    metric = re.sub(r"\s*\([^)]*\)\s*$", "", key).strip()
    if is_non_measurement(metric) or (
        m.group("ub")
        and m.group("uo")
        and normalise_unit(m.group("ub")) != normalise_unit(m.group("uo"))
    ):
        return None
    bv, ov = parse_number(m.group("b")), parse_number(m.group("o"))
    if bv is None or ov is None or bv == ov:
        return None
    return Candidate(bv, ov, metric, unit, b, "records", evidence=[ln])


#: 2.8: a caption naming both sides in order, "Time of original X vs Y in us:", over lines
#: ``name: 21.3 vs 14.8`` (the first number is the caption's first side)
_VS_CAPTION = re.compile(r"^\W*(?P<a>[^:\n]{2,100}?)\s+vs\.?\s+(?P<b>[^:\n]{2,100}?)\s*:\s*$", re.I)
_VS_LINE = re.compile(
    rf"^\s*[-*]?\s*(?P<key>[^:\d][^:]{{0,40}}?)\s*[:=]\s*(?P<v1>{_VAL})\s*(?P<u1>{_UNIT})?"
    rf"\s+vs\.?\s+(?P<v2>{_VAL})\s*(?P<u2>{_UNIT})?\s*$",
    re.I,
)


def _side_score(r: Role) -> int:
    """``+strength`` for a baseline, ``-strength`` for the PR's side, 0 for anything else."""
    return {"baseline": r.strength, "optimized": -r.strength}.get(r.kind or "", 0)


def _vs_caption_pairs(b: Block) -> tuple[list[Candidate], set[int]]:
    """The pairs of ``name: a vs b`` lines under a caption whose two sides name a baseline
    and the PR's side (one strong name is enough: the other is then the other side; a
    weak name alone, "kernel time of A vs B", decides nothing), and the indices of the
    lines read so."""
    out: list[Candidate] = []
    used: set[int] = set()
    sides: tuple[bool, str, str | None] | None = None  # (first is baseline, metric, unit)
    read = False  # a line was read under the open caption
    for i, ln in enumerate(b.lines):
        cap = _VS_CAPTION.match(clean_cell(ln.strip()))
        if cap and not _VS_LINE.match(ln):
            # > 0: the first side is the baseline; the stronger naming wins ("original X"
            # beats another project's name, which is only weakly a baseline)
            ra, rb = role_of(cap.group("a")), role_of(cap.group("b"))
            score = _side_score(ra) - _side_score(rb) if 2 in (ra.strength, rb.strength) else 0
            metric = m.group(0) if (m := METRIC_WORDS.search(cap.group("a"))) else ""
            unit = unit_in(cap.group("b")) or unit_in(cap.group("a"))
            sides, read = ((score > 0, metric, unit) if score else None), False
            continue
        vs = _VS_LINE.match(ln)
        if vs is None:
            if ln.strip() or read:
                sides, read = None, False  # the caption's lines end at prose or a gap
            continue
        if sides is None:
            continue
        read = True
        first_base, metric, unit = sides
        v1, v2 = parse_number(vs.group("v1")), parse_number(vs.group("v2"))
        u = normalise_unit(vs.group("u2") or vs.group("u1")) or unit
        if v1 is None or v2 is None or is_non_measurement(vs.group("key")):
            continue
        base, opt = (v1, v2) if first_base else (v2, v1)
        used.add(i)
        out.append(
            Candidate(
                base,
                opt,
                metric or vs.group("key").strip(),
                u,
                b,
                "records",
                keys=[("case", vs.group("key").strip())],
                evidence=[ln],
            )
        )
    return out, used


def inline_candidates(blocks: list[Block]) -> list[Candidate]:
    """A "A vs B:" caption over its readings, or one key whose value is written
    ``before -> after`` in a code block: a pair from one record line. (2.13: two readings of
    one line differing by a side word, and a "Speedup (A/B)" line naming the sides above it,
    are no longer read: they paid on no development text.)"""
    out: list[Candidate] = []
    for b in blocks:
        if b.kind not in ("code", "text"):
            continue
        vs_pairs, used = _vs_caption_pairs(b)
        out.extend(vs_pairs)
        for i, ln in enumerate(b.lines):
            if i in used:
                continue
            if b.kind == "code" and (arrow := _arrow_line(b, ln)) is not None:
                out.append(arrow)
    return out


def block_role(b: Block) -> Role | None:
    """The role of the label line right above a block, or of the one above it when the
    nearest line is a caption ("Before:" / "`sigmoid_kernel` 74ms ..." / block)."""
    candidates = [b.label] + [
        ln for ln in reversed(b.before.split("\n")) if ln.strip() and ln.strip() != b.label.strip()
    ][:1]
    for ln in candidates:
        if ln and role_line(ln) is not None:
            return role_line(ln)
    return None


#: a label line naming both sides in order and no value: "Accuracy before and after:"
_BOTH_ROLES = re.compile(r"^[^\d:]{0,40}?\bbefore\s*(?:and|/|&)\s*after\b[^\d]{0,20}:\s*$", re.I)


def _code_block_role(b: Block) -> tuple[Role | None, str]:
    """(role, label) of a code block's run: its first line when that is a role line, else
    the label line above it, else its heading; ``(None, "")`` when none names a role."""
    first = next((ln for ln in b.lines if ln.strip()), "")
    r0 = role_line(first)
    if r0 is not None and not parse_records(first):
        return r0, first.strip()
    if block_role(b) is not None:
        return block_role(b), b.label
    if b.heading and role_line(b.heading):
        return role_line(b.heading), b.heading
    return None, ""


def _inner_role(ln: str, run: Run) -> Role | None:
    """A strong role line inside a code block (``=== this PR ===``): it starts a new run,
    or names the open one while that has no records yet and no strong role of its own."""
    inner = role_line(ln) if ln.strip() and not parse_records(ln) else None
    if inner is not None and (inner.strength < 2 or (run.role.strength == 2 and not run.records)):
        return None
    return inner


def _code_runs(b: Block, runs: list[Run]) -> None:
    """Append the runs of one code block to ``runs``: one run, split where a strong role
    line starts another; ``batch size: 32`` lines key the records below them."""
    role, label = _code_block_role(b)
    run = Run(role or Role(None), label, b)
    current: tuple[tuple[str, str], ...] = ()
    stat_title = ""
    for ln in b.lines:
        st = _STAT_TITLE.match(ln)
        if st and not parse_records(ln):
            stat_title = st.group("title").strip()
            continue
        rec = _stat_record(stat_title, ln)
        if rec is not None:
            run.records.append(rec)
            continue
        if re.match(r"^\s*(?:count|std|dtype)\b", ln) and stat_title:
            continue
        stat_title = "" if not ln.strip() else stat_title
        ko = key_only(ln)
        if ko is not None:
            current = _merge(current, ko)
            continue
        if (
            not ln.strip()
            and current
            and not any(k in ("TP", "EP", "DP", "PP") for k, _ in current)
        ):
            current = ()
        inner = _inner_role(ln, run)
        if inner is not None and run.records:
            runs.append(run)
            run = Run(inner, ln.strip(), b)
            continue
        if inner is not None:
            run.role, run.label = inner, ln.strip()
            continue
        recs = parse_records(ln)
        if current:
            recs = [
                Rec(r.metric, r.value, r.text, r.unit, _merge(current, r.keys), r.line)
                for r in recs
            ]
        run.records.extend(recs)
    runs.append(run)


class _TextRuns:
    """The runs of one text block, read line by line: the open run (records after a role
    line) and whether a "before and after" line named both roles, so that the paragraph
    after the next blank line is the PR's run."""

    def __init__(self, b: Block, runs: list[Run]) -> None:
        self.b = b
        self.runs = runs
        self.run: Run | None = None
        self.both_next = False
        #: the one-line baseline run just read (``Baseline (eager): 215.8 s``), whose next
        #: line may be the PR's value under a name of its own (2.5)
        self.last_base: Run | None = None
        self.last_pr: Run | None = None

    def close(self) -> None:
        """Keep the open run if it has records."""
        if self.run is not None and self.run.records:
            self.runs.append(self.run)

    def blank(self) -> None:
        """A blank line: after "before and after", the baseline paragraph ends and the
        optimized one begins."""
        run = self.run
        if self.both_next and run is not None and run.records and run.role.kind == "baseline":
            self.runs.append(run)
            self.run = Run(Role("optimized", 1), run.label, self.b)
            self.both_next = False

    def role_value(self, ln: str) -> bool:
        """``main: 9,812 tok/s``: a run of its own on one line; whether ``ln`` was one."""
        rv = _role_value(ln)
        if rv is None:
            return False
        if rv[0].strength < 2 and self.run is not None and self.run.role.strength == 2:
            # 2.12: ``FlashInfer: 10.0 ms`` under ``Before:`` is what the "before" run timed,
            # not a side of its own: an implementation's name under a strongly named run
            # reads like any metric label ("time: 10.0 ms"), so renaming it changes nothing
            return False
        recs = _value_records(rv[2], ln)
        if not recs:
            return False
        self.close()
        self.run = None
        run = Run(rv[0], rv[1], self.b, recs)
        self.runs.append(run)
        self.last_base = run if rv[0].kind == "baseline" and rv[0].strength == 2 else None
        return True

    def unnamed_after_base(self, ln: str) -> bool:
        """``Speculative model: 133.2 s`` right after ``Baseline (eager): 215.8 s``: one value
        in the same unit under a name that is no side is the PR's run (2.5); whether ``ln``
        was read so."""
        base, self.last_base = self.last_base, None
        if base is None or len(base.records) != 1:
            return False
        m = re.match(
            r"^(?P<label>[^:=]{1,60}?)\s*[:=]\s*(?P<rest>.+)$",
            clean_cell(ln.strip().lstrip("-*+> ")),
        )
        if not m or role_of(m.group("label")).kind is not None:
            return False
        recs = _value_records(m.group("rest"), ln)
        ref = base.records[0]
        if (
            len(recs) != 1
            or normalise_unit(recs[0].unit) != normalise_unit(ref.unit)
            or not ref.unit
        ):
            return False
        rec = Rec(ref.metric, recs[0].value, recs[0].text, recs[0].unit, ref.keys, ln)
        self.runs.append(Run(Role("optimized", 2), m.group("label").strip(), self.b, [rec]))
        self.last_pr = self.runs[-1]
        return True

    def stated_after_pr(self, ln: str) -> bool:
        """``Speedup: 1.62×`` on the line after the PR's one-value run: its stated ratio."""
        run, self.last_pr = self.last_pr, None
        m = _STATED_LINE.match(clean_cell(ln.strip().lstrip("-*+> ")))
        if run is None or not m:
            return False
        v = parse_number(m.group("val"))
        if v is None:
            return False
        run.stated = (v, m.group("raw"))
        return True

    def records(self, ln: str) -> None:
        """A line that names no role: its records join the open run; a line without any
        ends a run that has some, and a long one (prose) drops an empty run."""
        recs = parse_records(ln)
        run = self.run
        if run is not None and recs:
            run.records.extend(recs)
        elif run is not None and not recs and run.records:
            self.runs.append(run)
            self.run = None
        elif run is not None and not recs and len(ln.strip()) > _ROLE_LINE_MAX:
            self.run = None

    def line(self, ln: str) -> None:
        """Read one line of the block."""
        if not ln.strip():
            self.blank()
            return
        if _BOTH_ROLES.match(clean_cell(ln)):
            # "Accuracy before and after:" over two paragraphs of records: the first
            # paragraph is the baseline run, the second the PR's (the line names both
            # roles, in order)
            self.close()
            self.run, self.both_next = Run(Role("baseline", 1), ln.strip(), self.b), True
            return
        if self.stated_after_pr(ln):
            return
        if self.role_value(ln):
            return
        if self.unnamed_after_base(ln):
            return
        r = role_line(ln)
        if r is not None and not parse_records(ln):
            self.close()
            self.run = Run(r, ln.strip(), self.b)
            return
        self.records(ln)


def collect_runs(blocks: list[Block]) -> list[Run]:
    """Every run in document order (see module docstring)."""
    runs: list[Run] = []
    for b in blocks:
        if b.kind == "code":
            _code_runs(b, runs)
        elif b.kind == "text":
            reader = _TextRuns(b, runs)
            for ln in b.lines:
                reader.line(ln)
            reader.close()
    return [r for r in runs if r.records]


def _norm_metric(m: str) -> str:
    return re.sub(r"[^a-z0-9/%]+", " ", m.lower()).strip()


def pair_runs(runs: list[Run]) -> list[tuple[Run, Run]]:
    """Baseline runs with the optimized run next to them, in document order.

    2.8: a group of runs under one side followed by a group of as many under the other
    ("## Before" with a cold-start and a warm-start block, then "## After" with the same
    two) is paired position by position: the n-th baseline run with the n-th optimized one.
    Otherwise only the last run of a group meets the first of the next, as before. (2.13:
    kept although it fired on no development text: without it the fallback pairs the last
    "before" run with the first "after" one, a wrong value, not a missing one.)
    """
    out: list[tuple[Run, Run]] = []
    pending: Run | None = None
    _name_unnamed_beside_baseline(runs)
    sided = [r for r in runs if r.role.kind in ("baseline", "optimized")]
    grouped = _parallel_groups(sided)
    if grouped is not None:
        return grouped
    for r in sided:
        if (
            pending is not None
            and pending.role.kind == r.role.kind
            and pending.role.strength != r.role.strength
        ):
            weak = pending if pending.role.strength < r.role.strength else r
            if r.role.kind == "baseline":
                # 2.12 (issue 40): "main: 10 ms" / "torch: 30 ms": a weakly named run beside
                # a strong baseline is a third implementation, never the PR's side (2.11
                # made it the PR's: a speedup on the wrong side of 1)
                pending = r if weak is pending else pending
                continue
            strong = r if weak is pending else pending
            if role_of(strong.label).strength == 2:
                # 2.12: "FlashInfer: 30 ms" / "this PR: 8 ms": the PR's side named, the other
                # implementation is a third one; the named side waits for its baseline
                pending = strong
                continue
            # "sgl_kernel: 5.63 us" / "FlashInfer: 3.79 us (1.49x faster)": one side is said
            # to win, the other (named only weakly) is then the baseline, as sure as its winner
            weak.role = Role("baseline", 2)
        if pending is None or pending.role.kind == r.role.kind:
            pending = r
            continue
        if pending.role.strength != r.role.strength:
            # 2.12: "torch: 30 ms" / "this PR: 8 ms": a weak side beside a strong one is a
            # third implementation (as in tables, ``tables._choose``): the strong one waits
            pending = pending if pending.role.strength > r.role.strength else r
            continue
        b, o = (pending, r) if pending.role.kind == "baseline" else (r, pending)
        out.append((b, o))
        pending = None
    return out


def _parallel_groups(sided: list[Run]) -> list[tuple[Run, Run]] | None:
    """The position-by-position pairs of two parallel groups (see :func:`pair_runs`), or
    ``None`` when the runs are not exactly two groups of the same size (two or more runs
    each, every one in a block of its own, all with one strength) whose n-th runs share a
    metric. Runs sharing no metric with the other side are left out first."""
    metrics = {
        kind: {_norm_metric(x.metric) for r in sided if r.role.kind == kind for x in r.records}
        for kind in ("baseline", "optimized")
    }
    # a run with no metric of the other side (the launch command's ``FOO=0``) is no part
    sided = [
        r
        for r in sided
        if {_norm_metric(x.metric) for x in r.records}
        & metrics["optimized" if r.role.kind == "baseline" else "baseline"]
    ]
    if len(sided) < 4 or len({r.role.strength for r in sided}) != 1:
        return None
    first = sided[0].role.kind
    n = next((i for i, r in enumerate(sided) if r.role.kind != first), len(sided))
    head, tail = sided[:n], sided[n:]
    if len(head) != len(tail) or any(r.role.kind == first for r in tail):
        return None
    if len({id(r.block) for r in sided}) != len(sided):
        return None
    pairs = [(a, b) if first == "baseline" else (b, a) for a, b in zip(head, tail, strict=True)]
    for b, o in pairs:
        if not {_norm_metric(x.metric) for x in b.records} & {
            _norm_metric(x.metric) for x in o.records
        }:
            return None
    return pairs


def _name_unnamed_beside_baseline(runs: list[Run]) -> None:
    """2.4: a run named by nothing next to a strongly named baseline run of the same
    benchmark (at least two metrics in common: "Results for X:" then "Comparing to Y") is
    the run the PR compares with it; it is named the optimized side, as sure as the baseline
    beside it (2.12). Only when no run of the text is named the optimized side already (then
    that run is the PR's)."""
    if any(r.role.kind == "optimized" for r in runs):
        return
    for a, b in zip(runs, runs[1:], strict=False):
        pair = (a, b) if a.role.kind is None else (b, a)
        unnamed, named = pair
        if unnamed.role.kind is not None or named.role.kind != "baseline":
            continue
        if named.role.strength < 2:
            continue
        shared = {_norm_metric(r.metric) for r in unnamed.records} & {
            _norm_metric(r.metric) for r in named.records
        }
        if len(shared) >= 2:
            unnamed.role = Role("optimized", 2)


def run_candidates(blocks: list[Block]) -> list[Candidate]:
    """One candidate per metric (and keys) present in both runs of a pair."""
    return pair_candidates(collect_runs(blocks))


def pair_candidates(runs: list[Run]) -> list[Candidate]:
    """Candidates of paired runs (see :func:`run_candidates`)."""
    out: list[Candidate] = []
    for b, o in pair_runs(runs):
        index: dict[tuple[str, tuple[tuple[str, str], ...]], list[Rec]] = {}
        for rec in b.records:
            index.setdefault((_norm_metric(rec.metric), rec.keys), []).append(rec)
        mine: dict[tuple[str, tuple[tuple[str, str], ...]], list[Rec]] = {}
        for rec in o.records:
            mine.setdefault((_norm_metric(rec.metric), rec.keys), []).append(rec)
        for rec, base in _record_pairs(index, mine):
            metric = rec.metric
            if metric and is_non_measurement(metric):
                continue
            if _ARROWED.search(rec.line) or _ARROWED.search(base.line):
                continue  # 2.9: "first moe: 9.11ms -> 2.881ms" is a pair of its own line
            unit = normalise_unit(rec.unit or base.unit)
            unit = unit or unit_in(metric)
            if not metric and not unit:
                ctx = f"{o.block.label}\n{o.block.before}"
                unit = unit_in(ctx)
            if (
                not metric
                and unit is None
                and not METRIC_WORDS.search(f"{o.block.before}\n{o.block.heading}")
            ):
                continue
            out.append(
                Candidate(
                    base.value,
                    rec.value,
                    metric or "",
                    unit,
                    o.block,
                    "records",
                    keys=list(rec.keys),
                    baseline_label=b.label,
                    optimized_label=o.label,
                    stated=o.stated[0] if o.stated else None,
                    stated_text=o.stated[1] if o.stated else None,
                    evidence=[base.line, rec.line],
                )
            )
    return out


#: a reading written as its own change, "9.11ms -> 2.881ms" (read by the line's arrow)
_ARROWED = re.compile(r"\d\s*[A-Za-zµ/%]*\s*(?:->|→|=>)\s*[~≈]?\d")


def _record_pairs(
    base: dict[tuple[str, tuple[tuple[str, str], ...]], list[Rec]],
    mine: dict[tuple[str, tuple[tuple[str, str], ...]], list[Rec]],
) -> list[tuple[Rec, Rec]]:
    """(optimized, baseline) records of one metric and keys in both runs, in the
    optimized run's order: the first reading of each side; 2.8: every reading in turn when
    both runs repeat the metric as often (three runs logged before, three after)."""
    out: list[tuple[Rec, Rec]] = []
    for k, recs in mine.items():
        if k not in base:
            continue
        if len(recs) == len(base[k]):
            out.extend(zip(recs, base[k], strict=True))
        else:
            out.append((recs[0], base[k][0]))
    return out


def _expand_slashes(header: list[str], row: list[str]) -> list[list[str]]:
    """``| 2/4/8 | 512 | 0.0095/0.0091/0.0101 |`` is three rows: one per slash part."""
    parts = [
        c.split("/") if re.fullmatch(r"\s*[\d.,]+(?:\s*/\s*[\d.,]+)+\s*", c) else None for c in row
    ]
    counts = {len(p) for p in parts if p}
    if len(counts) != 1:
        return [row]
    n = counts.pop()
    return [[(p[i].strip() if p else c) for p, c in zip(parts, row, strict=True)] for i in range(n)]


def table_runs(blocks: list[Block], grids: list[tuple[Block, Grid]]) -> list[Run]:
    """Tables without an inner comparison whose label line names a role (``vllm`` table,
    then ``custom allreduce`` table): each is a run of records (row keys × value columns)."""
    from dagster_project.gains.extract.candidate import value_of
    from dagster_project.gains.extract.tables import accuracy_only, classify

    runs: list[Run] = []
    for b, grid in grids:
        role = block_role(b)
        if role is None or accuracy_only(grid, b):
            continue  # 2.8: an lm_eval table under "main" / "this PR" is accuracy
        cols = classify(grid)
        keys = [c for c in cols if c.kind == "key"]
        vals = [c for c in cols if c.kind in ("metric", "variant") and c.role.kind is None]
        if not vals:
            continue
        run = Run(role, b.label, b)
        for raw, row in zip(grid.raw, grid.rows, strict=False):
            for sub in _expand_slashes(grid.header, row):
                kv = tuple((grid.header[k.j], sub[k.j]) for k in keys if k.j < len(sub))
                for c in vals:
                    if c.j >= len(sub):
                        continue
                    v = value_of(sub[c.j])
                    if v is not None:
                        run.records.append(Rec(c.header, v, sub[c.j], unit_in(c.header), kv, raw))
        if run.records:
            runs.append(run)
    _ = blocks
    return runs
