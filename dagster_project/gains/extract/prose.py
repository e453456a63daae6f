"""Prose sentences to candidates: transitions (``from 12.1 ms to 10.3 ms``, ``58.4 → 51.9
ms``, "12 ms before and 10 ms after") and stated ratios ("1.5x faster", "~10% gain",
"20% uplift", "5.5% E2E speedup", "~2% perf degrade").

A number in a sentence is taken only with a performance cue next to it: a known unit on
the value, a metric word before the transition, a ratio cue word (faster, speedup, gain,
uplift, improvement, reduction, regression, degrade, slower). Ranges ("4–11%", "2-5x"),
hardware counts ("8x H100"), accuracy/memory/count sentences and config transitions
("batch size from 1 to 256") are refused.
"""

from __future__ import annotations

import re

from dagster_project.gains.extract.candidate import Candidate
from dagster_project.gains.extract.document import Block, clean_cell
from dagster_project.gains.extract.vocab import (
    ACCURACY,
    E2E_WORDS,
    KERNEL_WORDS,
    METRIC_WORDS,
    NON_PERF,
    metric_from_unit,
    role_of,
)
from dagster_project.gains.normalise import UNIT_PATTERN, normalise_unit, parse_stated_speedup
from dagster_project.gains.numbers import parse_number
from dagster_project.gains.schema import Scope

_V = r"\d[\d,]*(?:\.\d+)?"
_U = rf"(?:{UNIT_PATTERN})"
_ARROW = r"(?:→|->|=>|⟶|➡️?|➜|-->|⇒)"
#: a value ends at a non-word character; a full stop ends it too unless a digit follows (the
#: sentence's own period: "from ~26.8us to ~9.8us." and "7.8us->6.5us." are transitions)
_END = r"(?!\w|\.\d)"
TRANSITION = re.compile(
    rf"(?:\bfrom\s+)?[~≈]?(?<![\w.])(?P<b>{_V})\s*(?P<ub>{_U})?{_END}\s*"
    rf"(?:{_ARROW}|\bto\b)\s*[~≈]?\s*(?P<o>{_V})\s*(?P<uo>{_U})?{_END}",
    re.I,
)
#: 2.8: "from 26.5m to 17.0m" after a time metric: minutes written as a bare "m" (not in
#: the unit vocabulary, where it would read "7m tokens" or "m=128" as minutes); both sides
#: must carry it and the metric must name a time (:func:`transitions`)
MINUTES = re.compile(
    rf"\bfrom\s+[~≈]?(?P<b>{_V})\s*(?P<ub>m)\s+to\s+[~≈]?(?P<o>{_V})\s*(?P<uo>m)(?![\w.])"
)
INLINE_ROLES = re.compile(
    rf"\b(?:before|baseline|main(?:\s+branch)?)\b\s*[:=(]?\s*[~≈]?\s*(?P<b>{_V})\s*(?P<ub>{_U})?"
    rf"\)?[,;]?\s*(?:and|vs\.?|,|;)?\s*"
    rf"\b(?:after|this pr|with this pr|pr|optimized|new)\b\s*[:=(]?\s*[~≈]?\s*"
    rf"(?P<o>{_V})\s*(?P<uo>{_U})?",
    re.I,
)
VALUE_ROLES = re.compile(
    rf"(?P<b>{_V})\s*(?P<ub>{_U})\s*(?:\(|on\s+|for\s+|with\s+|in\s+)?"
    rf"\b(?:before|baseline|main|originally)\b\)?[,;]?\s*(?:and|vs\.?|,|->|to)?\s*"
    rf"(?P<o>{_V})\s*(?P<uo>{_U})\s*(?:\(|with\s+|on\s+|for\s+|in\s+)?"
    rf"\b(?:after|this pr|now|the pr|with the pr)\b",
    re.I,
)
_HEDGE = (
    r"(?:up\s+to\s+|~\s*|about\s+|around\s+|roughly\s+|approximately\s+|approx\.?\s+|"
    r"nearly\s+|almost\s+|over\s+|≈\s*|>\s*|an?\s+)?"
)
_CUE = (
    r"(?:faster|slower|speed-?ups?|speed\s+up|improvements?|improved|gains?|uplifts?|boosts?|"
    r"better|"
    r"quicker|reductions?|lower|higher|less|more|regressions?|degrad\w*|drop|increase|decrease|"
    r"perf(?:ormance)?|throughput|latency|e2e|end-to-end|kernel|ttft|tpot|itl|time|tok/s|overhead|"
    r"acceleration|win)"
)
STATED = re.compile(
    rf"(?<![\w.\-–])(?P<hedge>{_HEDGE})(?P<n>\d+(?:\.\d+)?)\s*(?P<u>[x×X%])(?![\w])"
    rf"(?=(?P<tail>[^.;:\n]{{0,60}}))",
)
_BEFORE_CUE = re.compile(
    r"(?:speed-?up|improve\w*|gain|uplift|boost|reduc\w*|lower\w*|increas\w*|decreas\w*|faster|"
    r"regress\w*|degrad\w*|drop\w*|cut\w*|accelerat\w*|higher|better)\s+(?:\w+\s+){0,4}?"
    r"(?:by|of|is|was|:)?\s*"
    # 2.8: "TTFT improved ~ -5.4%": the sign written after the hedge
    r"(?:about|around|roughly|approximately|~|up to|nearly|over|≈)?\s*[+\-\u2212]?$",
    re.I,
)
#: "up to 3x", "over 1.0x faster", "> 2x": a bound, not a measured value (LABELLING: "up to"
#: maxima)
_BOUND = re.compile(r"^\s*(?:up\s+to|over|>|more\s+than|at\s+least)\b|^\s*>", re.I)
#: "more than 5x improvement", "at least 2x": the bound written before the number's hedge
_BOUND_BEFORE = re.compile(
    r"(?:\bup\s+to|\bover|\bmore\s+than|\bat\s+least|\bgreater\s+than|>|≥)\s*$", re.I
)
#: "min speedup 0.77x. max speedup 4.8x.", "worst case 0.9x": extremes that summarise the rows
_EXTREME = re.compile(
    r"\b(?:min(?:imum)?|max(?:imum)?|worst(?:[- ]case)?|best(?:[- ]case)?|peak)\b[\w\s-]{0,20}$",
    re.I,
)
_RANGE_BEFORE = re.compile(r"\d\s*[%x×]?\s*(?:[-–~]|to)\s*$")
_GPU_AFTER = re.compile(
    r"^\s*(?:[A-Z]{1,3}\d{2,4}|GPUs?|nodes?|cards?|devices?|the\b|more\s+(?:memory|tokens))", re.I
)
_DOWN = (":arrow_down:", "⬇️", "⬇", "↓", ":small_red_triangle_down:")
_ARROW_WORDS = re.compile(r":arrow_down:|:arrow_up:|:small_red_triangle_down:|⬇️|⬆️|⬇|⬆|↓|↑")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z(*])|\n")


def sentences(block: Block) -> list[str]:
    """The sentences of a text block (list bullets and lines are sentences too)."""
    out: list[str] = []
    for ln in block.lines:
        s = re.sub(r"(?<=[A-Za-z])\s+/\s*(?=s\b|sec\b)", "/", clean_cell(ln).strip())  # "tok / s"
        # ":arrow_down: TTFT ~90%": the arrow says which way the quantity moved
        s = _ARROW_WORDS.sub(
            lambda m: " reduced " if m.group(0) in _DOWN else " increased ", s
        ).strip()
        if not s:
            continue
        out.extend(p.strip() for p in _SENT_SPLIT.split(s) if p.strip())
    return out


def _scope_of(s: str, block: Block) -> Scope | None:
    e, k = E2E_WORDS.search(s), KERNEL_WORDS.search(s)
    if e and not k:
        return "e2e"
    if k and not e:
        return "kernel"
    return None


def _metric_before(s: str, start: int) -> str:
    window = s[max(0, start - 60) : start]
    found = list(METRIC_WORDS.finditer(window))
    return found[-1].group(0) if found else ""


def prose_candidates(blocks: list[Block], title: str) -> list[Candidate]:
    """Transitions and stated ratios in the title and every text block."""
    out: list[Candidate] = []
    title_block = Block("text", [title], -1, title=title)
    for b in [title_block, *[b for b in blocks if b.kind == "text"]]:
        for s in sentences(b):
            out.extend(transitions(s, b))
            out.extend(_stated(s, b))
    return out


def _bad_context(window: str) -> bool:
    return bool(
        ACCURACY.search(window)
        or re.search(
            r"\bbatch[ _-]?size\b|\bbs\b|\btp\b|\bgpus?\b|\bconcurrency\b|\bnum_prompts\b|"
            r"\brequests\b|"
            r"\biterations?\b|\bwarmup\b|\bmemory\b|\bptx\b|\blines?\b|\bregisters?\b|\bversion\b|"
            r"\bseq(?:uence)?[ _]len|\bcontext length\b|\btokens\b(?!\s*/)|\bblock[ _]size\b",
            window,
            re.I,
        )
    )


#: "from 5.9+5.7+2.6=14.2us to 8.7+3=11.7us": sums written out, labelled by their totals
SUMMED = re.compile(
    rf"\bfrom\s+(?:{_V}\s*\+\s*)+{_V}\s*=\s*(?P<b>{_V})\s*(?P<ub>{_U})?{_END}\s*"
    rf"(?:{_ARROW}|\bto\b)\s*"
    rf"(?:{_V}\s*\+\s*)+{_V}\s*=\s*(?P<o>{_V})\s*(?P<uo>{_U})?{_END}",
    re.I,
)
RATIO_FORMULA = re.compile(
    rf"(?<![\w.])(?P<a>{_V})\s*/\s*(?P<b>{_V})\s*=\s*(?P<r>\d+(?:\.\d+)?)(?![\w.])"
)


def _ratio_formulas(s: str, b: Block) -> tuple[list[Candidate], list[tuple[int, int]]]:
    """``1369.89/1192.91=1.148``: pairs whose ratio is worked out in the sentence, and the
    spans they take (no other reading of the sentence may start inside one)."""
    out: list[Candidate] = []
    taken: list[tuple[int, int]] = []
    for m in RATIO_FORMULA.finditer(s):
        a, d, r = parse_number(m.group("a")), parse_number(m.group("b")), parse_number(m.group("r"))
        if not a or not d or not r or abs(a / d / r - 1) > 0.01 or r < 1:
            continue
        if re.match(r"\s*(?![x×]\b)[A-Za-z]", s[m.end() :]) and not re.match(
            rf"\s*(?:\w+\s+)?{_CUE}\b", s[m.end() :], re.I
        ):
            continue  # "256/4=64 local experts": arithmetic about a configuration, not a ratio
        metric = _metric_before(s, m.start())
        lower = bool(re.search(r"latenc|time|\bms\b|\bus\b", metric, re.I))
        base, opt = (a, d) if lower else (d, a)  # written as the PR's gain: ratio >= 1
        taken.append((m.start(), m.end()))
        out.append(
            Candidate(
                base,
                opt,
                metric,
                None,
                b,
                "sentence",
                higher_is_better=not lower,
                stated=round(r, 4),
                stated_text=m.group("r"),
                scope_hint=_scope_of(s, b),
                evidence=[s],
            )
        )
    return out, taken


def _transition_refused(s: str, m: re.Match[str], unit: str | None, metric: str) -> bool:
    """A bare from/to or arrow transition is a comparison only with a unit or a metric word,
    outside a configuration context (batch size, GPUs, versions) unless a verb of change
    precedes it, and not after a range or a version/arch prefix ("v1.2 -> 1.3", "sm_80")."""
    lead = s[max(0, m.start() - 40) : m.start()]
    if not unit and not metric:
        return True
    verb = re.search(
        r"(?:decreas|reduc|improv|increas|dropp?|cut|fell|went|goes|going)\w*\s*"
        r"(?:from\s*)?$",
        s[: m.start("b")].rstrip(" ~≈"),
        re.I,
    )
    # 2.7: "Request Rate 200: Throughput improved 184 -> 199": a setting named before a
    # metric and a verb of change does not make the change a setting
    if (_bad_context(lead[-25:]) and not verb) or (
        not unit and NON_PERF.search(lead) and not (verb and metric)
    ):
        return True
    return bool(re.search(r"\d\s*[-–]\s*$|\bv\d*\.?$|\bsm_?$", lead))


def _pair_refused(s: str, m: re.Match[str], rx: re.Pattern[str]) -> bool:
    """A written pair that is not a measurement: units that disagree, one side of a sum
    being written out (read by :data:`SUMMED`), a summary of the rows, or accuracy."""
    ub, uo = m.group("ub"), m.group("uo")
    if ub and uo and normalise_unit(ub) != normalise_unit(uo):
        return True
    if rx is not SUMMED and (
        re.match(r"^\s*[+*/]\s*\d", s[m.end("o") :])
        or re.search(r"\d\s*[+*/=]\s*$", s[: m.start("b")])
    ):
        return True  # one side is a sum being written out: SUMMED reads it by its totals
    if re.search(
        r"\bsum of\b|\bin total\b|\btotal of\b|\bgeomean\b|\bon average\b|"
        r"\baveraged over\b",
        s[max(0, m.start() - 80) : m.start()],
        re.I,
    ):
        return True  # a summary of the rows, not a measurement of its own
    return bool(ACCURACY.search(s[max(0, m.start() - 50) : m.end() + 20]))


def transitions(s: str, b: Block) -> list[Candidate]:
    """Comparisons written as such in one sentence (from/to, arrows, inline roles, and
    ``1369.89/1192.91=1.148``: a ratio worked out from the two values)."""
    out, taken = _ratio_formulas(s, b)
    for rx, structure in (
        (SUMMED, "sentence"),
        (INLINE_ROLES, "sentence"),
        (VALUE_ROLES, "sentence"),
        (TRANSITION, "sentence"),
        (MINUTES, "sentence"),
    ):
        for m in rx.finditer(s):
            if any(a <= m.start() < z for a, z in taken):
                continue
            unit = normalise_unit(m.group("uo") or m.group("ub"))
            metric = _metric_before(s, m.start())
            if rx is MINUTES and not re.search(r"\btime\b|\bduration\b|\btook\b", metric, re.I):
                continue
            if rx is TRANSITION and _transition_refused(s, m, unit, metric):
                continue
            if _pair_refused(s, m, rx):
                continue
            bv, ov = parse_number(m.group("b")), parse_number(m.group("o"))
            if bv is None or ov is None or bv == ov:
                continue
            taken.append((m.start(), m.end()))
            stated = _STATED_AFTER.match(s[m.end() :])
            out.append(
                Candidate(
                    bv,
                    ov,
                    metric or metric_from_unit(unit),
                    unit,
                    b,
                    structure,
                    scope_hint=_scope_of(s, b),
                    stated=parse_number(stated.group("n")) if stated else None,
                    stated_text=stated.group("raw") if stated else None,
                    evidence=[s],
                )
            )
    return out


#: 2.9: the ratio written right after a transition, "6220 ms to 454 ms (~13.7× faster",
#: "426ms → 0.7ms (**609x faster**": the pair's stated ratio
_STATED_AFTER = re.compile(
    r"^[*_\s]*[(,]?[*_\s~≈]*(?P<raw>(?P<n>\d+(?:\.\d+)?)\s*[x×])[*_\s]*"
    r"(?:faster|speed-?up|improvement|better|quicker|higher throughput|lower latency)\b",
    re.I,
)


def ratio_claims(blocks: list[Block], title: str) -> list[float]:
    """Every ratio claim of the prose, summaries ("overall 1.3x faster") included: what the
    audit accepts a stated ratio against."""
    out: list[float] = []
    for b in [Block("text", [title], -1, title=title), *[b for b in blocks if b.kind == "text"]]:
        for s in sentences(b):
            out += [c.stated for c in _stated(s, b, summaries=True) if c.stated is not None]
    return out


def _not_a_ratio(s: str, m: re.Match[str], tail: str) -> bool:
    """A ratio-shaped number that is not one: part of a range ("4-11%", "2 to 5x") or a
    count of hardware or sizes ("8x H100", "2x the number of ...")."""
    if _RANGE_BEFORE.search(s[max(0, m.start() - 6) : m.start()]) or re.match(
        r"^\s*(?:[-–~]|to)\s*\d", tail
    ):
        return True
    return bool(
        m.group("u") in "xX×"
        and (
            _GPU_AFTER.match(tail)
            or re.match(r"^\s*(?:the\s+)?(?:number|size|more memory)", tail, re.I)
        )
    )


def _has_cue(m: re.Match[str], lead: str, tail: str, b: Block, keyed: re.Match[str] | None) -> bool:
    """Whether a performance cue goes with the number: a cue word after or before it, a
    keyed list of ratios under a "speedup"/"gains" context, or a change against a named
    baseline ("+9.5% vs fallback default config")."""
    cue_after = re.match(rf"^\s*(?:\w+\s+){{0,3}}?{_CUE}\b", tail, re.I)
    cue_before = _BEFORE_CUE.search(lead)
    listed = (
        bool(keyed)
        and m.group("u") in "xX×"
        and not tail.strip()
        and re.search(r"speed-?up|gains?|faster|improv", f"{b.before}\n{b.heading}", re.I)
    )
    # "Total TPM: +9.5% vs fallback default config": a change against a named baseline
    versus = m.group("u") == "%" and re.match(
        r"^\s*(?:vs\.?|versus|compared\s+(?:to|with)|relative\s+to)\s+(?:the\s+)?"
        r"(?:[\w-]+\s+){0,3}?"
        r"(?:default|main|baseline|fallback|original|stock|upstream|old|before)\b",
        tail,
        re.I,
    )
    return bool(cue_after or cue_before or listed or versus)


def _summary_or_bound(s: str, m: re.Match[str], lead: str, tail: str) -> bool:
    """A claim about the rows as a whole rather than one measurement: an average, geomean,
    overall or range-wide figure, a bound ("up to 3x", "over 1.0x") or an extreme ("max
    speedup 4.8x")."""
    if re.search(
        r"\baverage\b|\bavg\b|\bgeo-?mean\b|\bgeometric[- ]mean\b|\bon the whole\b|"
        r"\boverall\b|\bin total\b|"
        r"\bmedian\b(?!\s+(?:e2e\s+)?(?:ttft|tpot|itl|e2el|latency|throughput|time)\b)",
        f"{lead[-40:]} {tail[:40]}",
        re.I,
    ) or re.search(
        r"\b(?:for|over|across)\s+(?:the\s+|all\s+|a\s+)?(?:[\w-]+\s+){0,3}?range\b",
        s[m.end() : m.end() + 90],
        re.I,
    ):
        # a summary over the rows (average / geomean / overall / a range of sizes), not a
        # measurement
        return True
    # a bound or an extreme over the rows ("up to 3x", "over 1.0x", "max speedup 4.8x")
    return bool(
        _BOUND.match(m.group("hedge")) or _BOUND_BEFORE.search(lead) or _EXTREME.search(lead[-30:])
    )


_AGAINST_AFTER = re.compile(
    r"^[^.;]{0,40}?\b(?:than|vs\.?|versus|over|against|compared\s+(?:to|with)|relative\s+to)"
    r"\s+(?P<x>[^,.;()]{1,40})",
    re.I,
)
_AGAINST_BEFORE = re.compile(
    r"\b(?:compared\s+(?:to|with)|relative\s+to|vs\.?|versus|against)\s+(?P<x>[^,.;()]{1,40})"
    r"[,;:]?[^,.;]{0,40}$",
    re.I,
)


def _against_third(lead: str, tail: str) -> bool:
    """2.12 (issue 40): a ratio said against a reference ("3.75x faster than the PyTorch
    reference", "compared with TensorRT-LLM, 1.5x"), or against an implementation named
    only weakly while the PR's side is named strongly ("this PR is 2.1x faster than
    cuBLAS"): a comparison with a third implementation, not the PR's gain (as in tables)."""
    found = _AGAINST_AFTER.match(tail) or _AGAINST_BEFORE.search(lead)
    if found is None:
        return False
    target = role_of(found.group("x"))
    if target.kind == "reference":
        return True
    subject = role_of(re.split(r"[.;:]\s", lead)[-1])
    return target.strength == 1 and subject.kind == "optimized" and subject.strength == 2


def _not_performance(m: re.Match[str], lead: str, tail: str) -> bool:
    """A ratio restated after its formula (read by :func:`transitions`), or one about
    accuracy, memory, shares, utilisation or hit rates."""
    if re.search(r"=\s*[\d.]+\s*~?=?\s*$", lead):
        return True  # "a/b=1.148 ~= 15%": the ratio restated, read as a pair by transitions()
    window = f"{lead} {m.group(0)}"
    return bool(
        ACCURACY.search(window)
        or re.search(
            r"\bmemory\b|\bof (?:the )?(?:total|time)\b|\bshare\b|\butili[sz]ation\b|"
            r"\bhit rate\b|\bacceptance\b|\bcoverage\b|\bof (?:all|the) \w+",
            window + tail[:20],
            re.I,
        )
    )


def _stated_value(s: str, m: re.Match[str], lead: str, tail: str) -> float | None:
    """The ratio the claim states for the PR (its sign and the words around it decide the
    direction); ``None`` when the phrase states none."""
    signed = (
        s[m.start() - 1]
        if m.start() > 0 and s[m.start() - 1] in "+-\u2212" and not m.group("hedge")
        else ""
    )
    phrase = f"{signed}{m.group('n')}{m.group('u')}{tail}"
    if m.group("u") == "%":
        clause = re.split(r",|;|\band\b|\bbut\b", lead)[-1]
        phrase = f"{phrase} {re.sub(r'[0-9.]+', ' ', clause[-30:])}"
    v = parse_stated_speedup(phrase)
    if v is None:
        return None
    if (
        v < 1
        and re.match(r"^\s*slower\s+than\b", tail, re.I)
        and not re.search(
            r"\bthis (?:pr|change|patch)\b|\bour\b|\bnew\b|\boptimi[sz]ed\b|\bproposed\b|"
            r"\bwith (?:the|this) pr\b",
            lead,
            re.I,
        )
    ):
        # "It (the default kernel) is 2x slower than CUTLASS": N for the PR, as written
        v = float(m.group("n")) if m.group("u") in "xX×" else round(1 / v, 4)
    return v


def _stated(s: str, b: Block, *, summaries: bool = False) -> list[Candidate]:
    out: list[Candidate] = []
    for m in STATED.finditer(s):
        start = m.start("n")
        lead = s[max(0, start - 50) : start]
        tail = re.split(r",|\band\b|\bbut\b|\bwhile\b|\bwhereas\b", m.group("tail"))[0]
        if _not_a_ratio(s, m, tail):
            continue
        keyed = re.match(
            r"^\W*(?P<k>bs|batch[ _]?size|m|num[_ ]tokens)\s*=\s*(?P<v>\d+)\s*:", s, re.I
        )
        if not _has_cue(m, lead, tail, b, keyed):
            continue  # "bs=8: -8.09% / 1.088x" under "Largest observed gains:" is a claim
        if not summaries and _summary_or_bound(s, m, lead, tail):
            continue
        if _not_performance(m, lead, tail) or _against_third(lead, tail):
            continue
        v = _stated_value(s, m, lead, tail)
        if v is None:
            continue
        metric = _metric_before(s, start) or (
            found.group(0) if (found := METRIC_WORDS.search(tail)) else ""
        )
        # the scope the claim's own clause names ("Kernel 5x. e2e about 1%": e2e for the 1%)
        clause = re.split(r"[.;:]\s", lead)[-1]
        scope = _scope_of(clause, b) or _scope_of(clause + m.group(0) + tail, b) or _scope_of(s, b)
        out.append(
            Candidate(
                None,
                None,
                metric,
                None,
                b,
                "sentence",
                stated=v,
                keys=[(keyed.group("k"), keyed.group("v"))] if keyed else [],
                stated_text=s[m.start("n") : m.end("u")],
                scope_hint=scope,
                evidence=[s],
            )
        )
    return out
