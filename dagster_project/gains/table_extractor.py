"""Deterministic gains extractor: benchmark numbers from the text layouts PR authors use.

What it reads (each a pattern seen across vLLM, SGLang and FlashInfer perf PRs):

* **tables** (markdown pipes, HTML ``<table>``, whitespace tables printed by benchmark
  scripts) whose *columns* are baseline/optimized (``main``/``PR``, ``before``/``after``,
  ``default``/``tuned``, ``w/o``/``w/``, ``torch``/``triton`` …), or whose *rows* are
  (``| main | … |`` / ``| PR | … |``), or whose cells read ``12.4 → 10.9``;
* **paired runs**: two blocks of benchmark output (``benchmark_serving`` results,
  ``Avg latency: … seconds`` lines, per-batch-size lines, or role-less tables) labelled
  baseline and optimized by the line before them or a label line inside the block;
* **prose transitions** ``x → y`` and ``from x to y`` next to a metric or unit;
* **stated ratios** ("1.3x faster", "23% lower latency", speedup-only table columns),
  used only when the PR gives no baseline/optimized pair.

What it refuses, by construction: numbers only ever come from value cells of a
baseline/optimized column, row or run, or from the two sides of a transition, so shapes
(M/N/K/E), batch sizes, GPU counts ("8xH100"), token counts and request counts are never
measurements; they become ``shape``/``batch_size`` context at most. Accuracy tables
(lm_eval, gsm8k, MMLU …) are skipped even when they have main/PR columns, because they
are quality checks, not performance. Aggregate rows (total, mean over shapes) are skipped
since they restate the other rows, except in tables of repeated runs, where the stated
average is *the* measurement and the individual runs are dropped.

Bump :data:`EXTRACTOR_VERSION` whenever output can change: the lake re-extracts PRs
whose stored version differs.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from dagster_project.gains.mentions import (
    canonical_gpu,
    distinct_gpus,
    find_gpus,
    find_models,
    find_shape,
)
from dagster_project.gains.normalise import (
    TIME_UNITS,
    UNIT_PATTERN,
    finalise,
    infer_higher_is_better,
    is_known_unit,
    normalise_unit,
    parse_stated_speedup,
)
from dagster_project.gains.numbers import (
    NUMBER_PATTERN,
    first_number,
    is_integer_text,
    parse_number,
)
from dagster_project.gains.schema import Measurement, Scope

EXTRACTOR_VERSION = "1.0"

# ----------------------------------------------------------------------- vocabulary

_ROLE_BEFORE = re.compile(r"\bbefore\b|\bwithout\b|\bw/o\b|\bprior to\b|\bunpatched\b", re.I)
_ROLE_AFTER = re.compile(r"\bafter\b|\bw/(?!o)|\bpatched\b", re.I)
_ROLE_BASE = re.compile(
    r"\bbaseline\b|\bbase\b|\bmain\b|\bmaster\b|\boriginal\b|\borig\b|\bold\b|\bdefault\b|"
    r"\breference\b|\bref\b|\bupstream\b|\bvanilla\b|\bnaive\b|\bprevious\b|\bprev\b|"
    r"\bunfused\b|\bdisabled\b|\bnightly\b|\bcurrent\b",
    re.I,
)
_ROLE_OPT = re.compile(
    r"\bthis\s+pr\b|\bpr\b|\bours\b|\boptimi[sz]ed\b|\bopt\b|\bnew\b|\btuned\b|\bproposed\b|"
    r"\bimproved\b|\bfused\b|\benabled\b|\bwith\b|\bfix(?:ed)?\b",
    re.I,
)
_WEAK_BASE = re.compile(r"\btorch\b|\bpytorch\b|\beager\b|\bnative\b|\bpython\b", re.I)
_WEAK_OPT = re.compile(
    r"\btriton\b|\bcuda\b|\bcustom\b|\bkernel\b|\bflashinfer\b|\bcutlass\b|\bdeepgemm\b|\bsgl[-_ ]kernel\b",
    re.I,
)
_SPEEDUP_HEADER = re.compile(
    r"speed-?up|\bratio\b|improv|\bgain\b|\bchange\b|\bdiff\b|\bdelta\b|Δ|\bvs\.?\b|"
    r"reduction|faster|relative|uplift|\bboost\b",
    re.I,
)
_ACCURACY = re.compile(
    r"accuracy|\bacc(?:_norm)?\b|exact[_ ]match|\bem\b|\bf1\b|gsm8k|mmlu|humaneval|math-?500|"
    r"gpqa|aime|\bscores?\b|pass@\d|bleu|rouge|perplexity|\bppl\b|flexible-extract|"
    r"strict-match|stderr|\binvalid\b|correctness|win[ -]rate|mt-?bench|lm[_-]eval|\bmbpp\b|"
    r"hellaswag|arc[_-]challenge|\bwinogrande\b|\bmmmu\b|chartqa|\bcer\b|\bwer\b",
    re.I,
)
_NON_PERF = re.compile(
    r"successful requests|failed requests|total (?:input|generated|output)(?: text| vision)? tokens|"
    r"retokenized|benchmark duration|request rate|max(?:imum)?\.? (?:request )?concurrency|"
    r"peak concurrent|^concurrency$|num[_ ]prompts|accept(?:ance)? (?:length|rate)|\bseed\b|"
    r"warm-?up|iterations?|\bstd\b|std[-_ ]?dev|stddev|\bmemory\b|\bmem\b|kv[ _]cache|cache hit|"
    r"\bbackend\b|\bstatus\b|\bcount\b|\btokens?\b$|^#",
    re.I,
)
_AGGREGATE = re.compile(
    r"^(?:total|sum|avg\.?|average|mean|geomean|geo\.?\s?mean|overall)(?:\s*\([^)]*\))?$", re.I
)
_RUN_ROW = re.compile(r"^(?:run|trial|iter(?:ation)?|round|rep(?:eat)?|attempt|#)\s*#?\d+$", re.I)
_BATCH_KEYS = re.compile(
    r"^(?:bs|batch|batch[ _-]?size|batchsize|m|num[_ ]?tokens|#\s?tokens|tokens|num[_ ]?seqs|"
    r"seqs|num[_ ]?reqs|concurrency|max[_ ]?concurrency|batch \(m\)|m \(tokens\)|n_tokens)$",
    re.I,
)
_SHAPE_KEYS = re.compile(
    r"^(?:n|k|e|m|h|d|topk|top_k|hidden(?:[_ ]size)?|head[_ ]?dim|num[_ ]?heads|heads|"
    r"seq[_ ]?len(?:gth)?|kv[_ ]?len|context|isl|osl|input[_ ]?len|output[_ ]?len|page[_ ]?size|"
    r"experts|num[_ ]?experts|tp|ep|dtype|shape|config|block[_ ]?size|group[_ ]?size|dim|"
    r"intermediate[_ ]?size|vocab|rank|layers?)$",
    re.I,
)
_METRIC_WORDS = re.compile(
    r"kernel time|step time|\blatency\b|\bthroughput\b|\bttft\b|\btpot\b|\bitl\b|\be2el\b|"
    r"\btflops\b|\bbandwidth\b|\bduration\b|\bruntime\b|\bexecution time\b|\btime\b|\bmfu\b|"
    r"tok(?:en)?s?/s|req/s|requests?/s|\bspeed\b",
    re.I,
)
_E2E_WORDS = re.compile(
    r"\bttft\b|\btpot\b|\bitl\b|\be2el\b|\be2e\b|end[- ]to[- ]end|request throughput|"
    r"token throughput|output throughput|input throughput|\bserving\b|bench_serving|"
    r"benchmark_serving|bench serve|benchmark_latency|benchmark_throughput|\bgoodput\b|\bqps\b|"
    r"\bserver\b|online|offline throughput|sharegpt|tok(?:en)?s?/s|req/s",
    re.I,
)
_KERNEL_WORDS = re.compile(
    r"\bkernels?\b|micro-?bench|benchmark_moe|bench_\w+kernel|\bop(?:erator)?s?\b|\bgemm\b|"
    r"\bop-level\b|\bunit bench|\blayer\b|triton\.testing|do_bench",
    re.I,
)

_ARROW = r"(?:→|->|=>|⟶|➡️?|➜|-->|⇒)"
_UNIT_RE = rf"(?:{UNIT_PATTERN}|%)(?![A-Za-z0-9/])"
_NUM = f"(?:{NUMBER_PATTERN})"


# ------------------------------------------------------------------------ structure


@dataclass
class _Ctx:
    """What is known around a block: labels and mentions used to fill measurement fields."""

    label: str = ""
    heading: str = ""
    nearby: str = ""  # last few prose lines before the block
    after: str = ""  # first prose line after the block (captions are often below)
    hardware: str | None = None
    model: str | None = None
    shape: str | None = None
    title: str = ""

    @property
    def text(self) -> str:
        return f"{self.heading}\n{self.nearby}\n{self.label}"


@dataclass
class _Run:
    """One labelled benchmark run: records keyed by (batch/shape) keys."""

    role: str
    ctx: _Ctx
    # key -> metric name (normalised) -> (value, unit, metric as written)
    records: dict[tuple[tuple[str, str], ...], dict[str, tuple[float, str | None, str]]] = field(
        default_factory=dict
    )


@dataclass
class _Doc:
    title: str
    measurements: list[Measurement] = field(default_factory=list)
    stated: list[Measurement] = field(default_factory=list)
    runs: list[_Run] = field(default_factory=list)


def _clean_cell(cell: str) -> str:
    c = re.sub(r"<[^>]+>", " ", cell)
    c = html.unescape(c)
    c = c.replace("**", "").replace("__", "").replace("`", "")
    c = re.sub(r"(?<!\w)[*_](\S.*?\S|\S)[*_](?!\w)", r"\1", c)
    return re.sub(r"\s+", " ", c).strip()


def _split_pipe_row(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    return [_clean_cell(c) for c in re.split(r"(?<!\\)\|", s)]


_SEP_ROW = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")


def _role(text: str) -> tuple[str | None, int]:
    """Role of a column/row/run label: ("baseline"|"optimized"|None, strength 2|1|0)."""
    t = re.sub(r"(?<=[A-Za-z])_|_(?=[A-Za-z])", " ", text).strip()  # baseline_us, pr_latency
    if not t:
        return None, 0
    before, after = bool(_ROLE_BEFORE.search(t)), bool(_ROLE_AFTER.search(t))
    if before != after:
        return ("baseline" if before else "optimized"), 2
    if before and after:
        return None, 0
    base, opt = bool(_ROLE_BASE.search(t)), bool(_ROLE_OPT.search(t))
    if base and opt:
        # "PR vs main", "main + this PR": ambiguous unless "with" is the only opt cue
        only_with = not re.search(_ROLE_OPT.pattern.replace(r"|\bwith\b", ""), t, re.I)
        if only_with:
            return "baseline", 2
        return None, 0
    if base or opt:
        return ("baseline" if base else "optimized"), 2
    wb, wo = bool(_WEAK_BASE.search(t)), bool(_WEAK_OPT.search(t))
    if wb != wo:
        return ("baseline" if wb else "optimized"), 1
    return None, 0


_ROLE_WORDS = re.compile(
    "|".join(
        p.pattern for p in (_ROLE_BEFORE, _ROLE_AFTER, _ROLE_BASE, _ROLE_OPT, _WEAK_BASE, _WEAK_OPT)
    ),
    re.I,
)


def _split_unit(text: str) -> tuple[str, str | None]:
    """``"Latency (us)"`` → ``("Latency", "us")``; units in (), [], after a comma or last."""
    for m in re.finditer(r"[(\[]\s*([^()\[\]]{1,24}?)\s*[)\]]", text):
        if is_known_unit(m.group(1)):
            rest = (text[: m.start()] + text[m.end() :]).strip()
            return rest.strip(" :-,"), normalise_unit(m.group(1))
    m2 = re.search(rf"(?:,\s*|\s+in\s+|\s+)({_UNIT_RE})\s*$", text, re.I)
    if m2:
        return text[: m2.start()].strip(" :-,"), normalise_unit(m2.group(1))
    return text.strip(" :-,"), None


def _residual(header: str) -> tuple[str, str | None]:
    """Metric words left in a role header once role words and the unit are removed."""
    text, unit = _split_unit(re.sub(r"(?<=[A-Za-z])_|_(?=[A-Za-z])", " ", header))
    text = _ROLE_WORDS.sub(" ", text)
    text = re.sub(
        r"\bthis\b|\bthe\b|\bvllm\b|\bsglang\b|\bflashinfer\b|[():,\-_/]", " ", text, flags=re.I
    )
    return re.sub(r"\s+", " ", text).strip(), unit


def _norm_metric(name: str) -> str:
    return re.sub(r"[^a-z0-9%/]+", " ", name.lower()).strip()


def _cell_unit(cell: str) -> str | None:
    m = re.search(rf"{_NUM}\s*({_UNIT_RE})", cell, re.I)
    return normalise_unit(m.group(1)) if m else None


def _context_unit(ctx: _Ctx) -> str | None:
    for text in (ctx.label, ctx.nearby, ctx.heading):
        m = re.search(rf"[(\[]\s*({UNIT_PATTERN})\s*[)\]]|\bin\s+({UNIT_PATTERN})\b", text, re.I)
        if m:
            return normalise_unit(m.group(1) or m.group(2))
    return None


def _context_metric(ctx: _Ctx) -> str | None:
    for text in (ctx.label, ctx.nearby, ctx.heading):
        m = _METRIC_WORDS.search(text)
        if m:
            return m.group(0)
    return None


def _metric_from_unit(unit: str | None) -> str:
    u = normalise_unit(unit) or ""
    if u in TIME_UNITS:
        return "latency"
    if u in ("tok/s", "req/s", "it/s", "samples/s"):
        return "throughput"
    if "FLOPS" in u:
        return "TFLOPS" if u == "TFLOPS" else u
    if u.endswith("B/s"):
        return "bandwidth"
    return "value"


def _infer_scope(metric: str, unit: str | None, keys: Iterable[str], ctx: _Ctx) -> Scope:
    u = normalise_unit(unit)
    if _E2E_WORDS.search(metric) or u in ("tok/s", "req/s"):
        return "e2e"
    if u in ("us", "ns", "TFLOPS", "GFLOPS", "GB/s", "TB/s") or re.search(r"kernel", metric, re.I):
        return "kernel"
    if any(
        re.fullmatch(r"[mnkeh]|head[_ ]?dim|hidden(?:[_ ]size)?|topk|top_k|num[_ ]?heads", k, re.I)
        for k in keys
    ):
        return "kernel"
    for text in (ctx.label, ctx.heading, ctx.nearby, ctx.after):
        k, e = _KERNEL_WORDS.search(text), _E2E_WORDS.search(text)
        if k and not e:
            return "kernel"
        if e and not k:
            return "e2e"
    if u == "s":
        return "e2e"
    return "kernel" if re.search(r"\bkernel", ctx.title, re.I) else "e2e"


def _int_value(text: str) -> int | None:
    """An integral count written as ``64``, ``1,024`` or ``64.0`` (pandas prints floats)."""
    if is_integer_text(text):
        return int(re.sub(r"\D", "", text))
    v = parse_number(text)
    if v is not None and v == int(v) and re.fullmatch(r"\s*\d+\.0+\s*", text):
        return int(v)
    return None


def _key_field(name: str) -> str:
    n = name.strip().lower()
    if _BATCH_KEYS.match(n):
        return "batch"
    if n in ("model", "models"):
        return "model"
    if n in ("gpu", "device", "hardware", "hw", "gpus"):
        return "hardware"
    return "shape"


# ------------------------------------------------------------------------- tables


def _make(
    ctx: _Ctx,
    *,
    metric: str,
    unit: str | None,
    keys: list[tuple[str, str]],
    baseline: float | None = None,
    optimized: float | None = None,
    stated: float | None = None,
    source: str,
) -> Measurement | None:
    """Build a measurement from a row's key cells and values, filling context fields."""
    if _ACCURACY.search(metric) or _NON_PERF.search(metric.strip()):
        return None
    batch: int | None = None
    shape_parts: list[str] = []
    model, hardware = ctx.model, ctx.hardware
    for name, value in keys:
        kind = _key_field(name)
        if (
            re.fullmatch(r"\s*(?:runs?|trials?|iter(?:ation)?s?|rounds?|#)\s*", name, re.I)
            or _RUN_ROW.match(value)
            or _AGGREGATE.match(value)
        ):
            continue  # run index / average label: not a condition of the measurement
        if kind == "batch" and batch is None:
            batch = _int_value(value)
            if batch is None:
                shape_parts.append(f"{name}={value}")
        elif kind == "model" and value:
            model = value
        elif kind == "hardware" and value:
            hardware = value
        elif value:
            shape_parts.append(f"{name}={value}" if name else value)
    shape = ", ".join(shape_parts) if shape_parts else None
    if ctx.shape:
        shape = f"{ctx.shape}, {shape}" if shape else ctx.shape
    metric = metric.strip() or _context_metric(ctx) or _metric_from_unit(unit)
    if unit is None:
        unit = _context_unit(ctx)
    scope = _infer_scope(metric, unit, [k for k, _ in keys], ctx)
    return Measurement(
        scope=scope,
        metric=metric,
        unit=normalise_unit(unit),
        baseline=baseline,
        optimized=optimized,
        stated_speedup=stated,
        hardware=hardware,
        model=model,
        shape=shape,
        batch_size=batch,
        source=source,
    )


def _is_accuracy_table(header: list[str], ctx: _Ctx) -> bool:
    h = " ".join(header).lower()
    if "tasks" in h and ("filter" in h or "metric" in h):
        return True
    if re.search(r"\bmetric\b", h) and re.search(r"\bvalue\b", h) and "stderr" in h:
        return True
    return bool(_ACCURACY.search(" ".join(header)))


def _column_kinds(header: list[str]) -> list[tuple[str, str | None, int]]:
    kinds: list[tuple[str, str | None, int]] = []
    for h in header:
        if h and _SPEEDUP_HEADER.search(h):
            kinds.append(("speedup", None, 0))
            continue
        role, strength = _role(h)
        kinds.append(("role", role, strength) if role else ("key", None, 0))
    return kinds


def _pair_columns(
    header: list[str], kinds: list[tuple[str, str | None, int]]
) -> list[tuple[int, int]]:
    strong = any(k == "role" and s == 2 for k, _, s in kinds)
    level = 2 if strong else 1
    base = [
        i for i, (k, r, s) in enumerate(kinds) if k == "role" and r == "baseline" and s == level
    ]
    opt = [
        i for i, (k, r, s) in enumerate(kinds) if k == "role" and r == "optimized" and s == level
    ]
    if not base or not opt:
        return []
    if len(base) == 1 and len(opt) == 1:
        return [(base[0], opt[0])]
    pairs: list[tuple[int, int]] = []
    residuals = {i: _norm_metric(_residual(header[i])[0]) for i in base + opt}
    for b in base:
        same = [o for o in opt if residuals[o] == residuals[b]]
        if len(same) == 1:
            pairs.append((b, same[0]))
    return pairs


def _value(cell: str) -> float | None:
    c = cell.strip()
    if not c or re.fullmatch(r"[-–—/]|n/?a|oom|error|fail(?:ed)?|timeout|x|✗|-+", c, re.I):
        return None
    if re.search(r"\d\s*[x×](?![A-Za-z0-9])", c) and not re.search(
        rf"{_NUM}\s*(?!x)({_UNIT_RE})", c
    ):
        return None  # a ratio cell is not a value
    tok = first_number(c)
    return abs(tok.value) if tok else None


def _row_keys(row: list[str], header: list[str], key_cols: list[int]) -> list[tuple[str, str]]:
    return [
        (header[i] if i < len(header) else "", row[i]) for i in key_cols if i < len(row) and row[i]
    ]


def _skip_row_label(label: str) -> bool:
    """Rows about accuracy or counts ("Successful requests") are not perf measurements."""
    return bool(
        _ACCURACY.search(label)
        or (label and not is_integer_text(label) and _NON_PERF.search(label))
    )


def _filter_aggregate_rows(
    rows: list[list[str]], label_col: int | None, header: list[str] | None = None
) -> list[list[str]]:
    """Drop total/mean rows over shapes; in a table of repeated runs keep only the mean."""
    if label_col is None:
        return rows
    labels = [r[label_col] if label_col < len(r) else "" for r in rows]
    runs_header = bool(
        header
        and re.fullmatch(
            r"\s*(?:runs?|trials?|iter(?:ation)?s?|rounds?|#)\s*", header[label_col], re.I
        )
    )
    run_like = sum(bool(_RUN_ROW.match(x) or (runs_header and is_integer_text(x))) for x in labels)
    has_avg = any(
        re.match(r"^(?:avg\.?|average|mean)\b", x, re.I) and _AGGREGATE.match(x) for x in labels
    )
    if run_like >= 2 and has_avg:
        return [r for r, x in zip(rows, labels, strict=False) if _AGGREGATE.match(x)]
    return [r for r, x in zip(rows, labels, strict=False) if not _AGGREGATE.match(x)]


def _table(rows: list[list[str]], ctx: _Ctx, doc: _Doc, *, allow_run: bool = True) -> None:
    """Extract from one table (header row first); may register a run instead."""
    rows = [r for r in rows if any(c for c in r)]
    if len(rows) < 2:
        return
    header, data = rows[0], rows[1:]
    width = max(len(r) for r in rows)
    header = header + [""] * (width - len(header))
    data = [r + [""] * (width - len(r)) for r in data]
    if _is_accuracy_table(header, ctx):
        return
    kinds = _column_kinds(header)
    pairs = _pair_columns(header, kinds)
    speed_cols = [i for i, (k, _, _) in enumerate(kinds) if k == "speedup"]
    key_cols = [i for i, (k, _, _) in enumerate(kinds) if k == "key"]
    label_col = key_cols[0] if key_cols and key_cols[0] == 0 else None
    if pairs:
        _table_columns(header, data, pairs, key_cols, speed_cols, label_col, ctx, doc)
        return
    # transposed: roles in the first column
    if _table_rows(header, data, ctx, doc):
        return
    data = _filter_aggregate_rows(data, label_col, header)
    found = _table_arrows(header, data, key_cols, ctx, doc)
    if found:
        return
    if speed_cols:
        for row in data:
            if label_col is not None and _skip_row_label(row[label_col]):
                continue
            keys = _row_keys(row, header, [i for i in key_cols if i not in speed_cols])
            for i in speed_cols:
                if _ambiguous_fraction(header[i], row[i]):
                    continue
                stated = parse_stated_speedup(row[i], kind=header[i])
                if stated is None:
                    continue
                metric = _metric_label(row, label_col, header[i])
                m = _make(
                    ctx,
                    metric=metric,
                    unit=None,
                    keys=_non_metric_keys(keys, label_col, header, row),
                    stated=stated,
                    source="table:speedup",
                )
                if m:
                    doc.stated.append(m)
        return
    if allow_run:
        run = _run_from_table(header, data, ctx)
        if run is not None:
            doc.runs.append(run)


def _ambiguous_fraction(header: str, cell: str) -> bool:
    """A bare ``0.302`` under "speedup_percent" may be 30.2% or 0.302%: skip, don't guess."""
    if re.search(r"[x×%]", cell):
        return False
    v = parse_number(cell)
    return bool(re.search(r"percent|pct|%|frac", header, re.I)) or (v is not None and v < 0.5)


def _metric_label(row: list[str], label_col: int | None, fallback: str) -> str:
    """Metric for a row: the text label cell (``Mean TTFT (ms)``) if there is one."""
    if label_col is not None and row[label_col] and not is_integer_text(row[label_col]):
        text = row[label_col]
        if _METRIC_WORDS.search(text) or re.search(r"\(", text):
            return text
    return fallback


def _non_metric_keys(
    keys: list[tuple[str, str]], label_col: int | None, header: list[str], row: list[str]
) -> list[tuple[str, str]]:
    if label_col is None:
        return keys
    lab = row[label_col]
    if lab and not is_integer_text(lab) and (_METRIC_WORDS.search(lab) or "(" in lab):
        return [(k, v) for k, v in keys if v != lab]
    return keys


def _table_columns(
    header: list[str],
    data: list[list[str]],
    pairs: list[tuple[int, int]],
    key_cols: list[int],
    speed_cols: list[int],
    label_col: int | None,
    ctx: _Ctx,
    doc: _Doc,
) -> None:
    data = _filter_aggregate_rows(data, label_col, header)
    for row in data:
        if label_col is not None and _skip_row_label(row[label_col]):
            continue
        keys = _row_keys(row, header, key_cols)
        for b, o in pairs:
            bv, ov = _value(row[b]), _value(row[o])
            if bv is None or ov is None:
                continue
            residual, unit = _residual(header[b])
            r2, u2 = _residual(header[o])
            residual = residual or r2
            unit = unit or u2 or _cell_unit(row[b]) or _cell_unit(row[o])
            metric = _metric_label(row, label_col, residual)
            if metric is not residual:
                m_text, m_unit = _split_unit(metric)
                metric, unit = m_text, unit or m_unit
            row_keys = _non_metric_keys(keys, label_col, header, row)
            m = _make(
                ctx,
                metric=metric,
                unit=unit,
                keys=row_keys,
                baseline=bv,
                optimized=ov,
                source="table:columns",
            )
            if m is None:
                continue
            if m.higher_is_better is None and infer_higher_is_better(m.metric, m.unit) is None:
                m.higher_is_better = _direction_from_speedup(bv, ov, [row[i] for i in speed_cols])
            doc.measurements.append(m)


def _direction_from_speedup(b: float, o: float, cells: list[str]) -> bool | None:
    """Use a stated speedup column to decide the direction when units/names cannot."""
    for c in cells:
        s = parse_number(c)
        if not s or b <= 0 or o <= 0:
            continue
        if abs(o / b - s) / s < 0.03:
            return True
        if abs(b / o - s) / s < 0.03:
            return False
    return None


def _table_rows(header: list[str], data: list[list[str]], ctx: _Ctx, doc: _Doc) -> bool:
    """Transposed tables: ``| main | … |`` / ``| PR | … |`` rows, metrics in the header."""
    roles = [(_role(r[0]) if r and r[0] else (None, 0)) for r in data]
    strong = any(s == 2 for _, s in roles)
    level = 2 if strong else 1
    base = [i for i, (r, s) in enumerate(roles) if r == "baseline" and s == level]
    opt = [i for i, (r, s) in enumerate(roles) if r == "optimized" and s == level]
    if not base or not opt:
        return False
    row_pairs: list[tuple[int, int]] = []
    if len(base) == 1 and len(opt) == 1:
        row_pairs = [(base[0], opt[0])]
    else:
        res = {i: _norm_metric(_residual(data[i][0])[0]) for i in base + opt}
        for b in base:
            same = [o for o in opt if res[o] == res[b]]
            if len(same) == 1:
                row_pairs.append((b, same[0]))
    # non-role rows that name a key per column ("batch size | 1 | 8 | 64")
    col_keys: dict[int, list[tuple[str, str]]] = {}
    for i, r in enumerate(data):
        if (
            roles[i][0] is None
            and r
            and _key_field(r[0]) in ("batch", "shape")
            and _BATCH_KEYS.match(r[0].strip().lower() or "-")
        ):
            for j in range(1, len(r)):
                col_keys.setdefault(j, []).append((r[0], r[j]))
    for b, o in row_pairs:
        extra = _residual(data[b][0])[0]
        for j in range(1, len(header)):
            h = header[j]
            bv, ov = _value(data[b][j]), _value(data[o][j])
            if bv is None or ov is None or (h and _SPEEDUP_HEADER.search(h)):
                continue
            keys = list(col_keys.get(j, []))
            if h and re.fullmatch(r"(?:bs|batch(?:[ _]size)?|m)\s*[=:]?\s*\d+", h, re.I):
                keys.append(("bs", re.sub(r"\D", "", h)))
                metric, unit = "", None
            elif h and is_integer_text(h):
                keys.append(("bs", h))
                metric, unit = "", None
            else:
                metric, unit = _split_unit(h)
            if extra and not metric:
                metric = extra
            unit = unit or _cell_unit(data[b][j]) or _cell_unit(data[o][j])
            m = _make(
                ctx,
                metric=metric,
                unit=unit,
                keys=keys,
                baseline=bv,
                optimized=ov,
                source="table:rows",
            )
            if m:
                doc.measurements.append(m)
    return True


_CELL_ARROW = re.compile(
    rf"^\s*(?P<a>{_NUM})\s*(?P<ua>{_UNIT_RE})?\s*{_ARROW}\s*(?P<b>{_NUM})\s*(?P<ub>{_UNIT_RE})?",
    re.I,
)


def _table_arrows(
    header: list[str], data: list[list[str]], key_cols: list[int], ctx: _Ctx, doc: _Doc
) -> bool:
    found = False
    label_col = 0 if key_cols and key_cols[0] == 0 else None
    arrow_cols = {j for row in data for j, c in enumerate(row) if _CELL_ARROW.search(c)}
    plain_keys = [i for i in key_cols if i not in arrow_cols]
    for row in data:
        if label_col is not None and _skip_row_label(row[label_col]):
            continue
        for j, cell in enumerate(row):
            m = _CELL_ARROW.search(cell)
            if not m:
                continue
            a, b = parse_number(m.group("a")), parse_number(m.group("b"))
            if a is None or b is None:
                continue
            metric, unit = _split_unit(header[j])
            unit = unit or normalise_unit(m.group("ua") or m.group("ub"))
            metric = _metric_label(row, label_col, metric)
            keys = _non_metric_keys(_row_keys(row, header, plain_keys), label_col, header, row)
            meas = _make(
                ctx,
                metric=_split_unit(metric)[0],
                unit=unit or _split_unit(metric)[1],
                keys=keys,
                baseline=abs(a),
                optimized=abs(b),
                source="table:arrow",
            )
            if meas:
                doc.measurements.append(meas)
                found = True
    return found


def _looks_metric_column(header: str, values: list[str]) -> bool:
    name, unit = _split_unit(header)
    if _BATCH_KEYS.match(name.lower()) or _SHAPE_KEYS.match(name.lower()):
        return False
    if unit or _METRIC_WORDS.search(header):
        return True
    nums = [v for v in values if v]
    return (
        bool(nums)
        and all(first_number(v) for v in nums)
        and not all(is_integer_text(v) for v in nums)
    )


def _run_from_table(header: list[str], data: list[list[str]], ctx: _Ctx) -> _Run | None:
    role, strength = _role(ctx.label)
    if not role or strength < 2 or _ACCURACY.search(ctx.label):
        return None
    metric_cols = [
        j for j in range(len(header)) if _looks_metric_column(header[j], [r[j] for r in data])
    ]
    key_cols = [j for j in range(len(header)) if j not in metric_cols]
    run = _Run(role, ctx)
    for row in data:
        key = tuple((_norm_metric(header[j]), row[j]) for j in key_cols)
        if any(_ACCURACY.search(v) for _, v in key):
            continue
        rec = run.records.setdefault(key, {})
        for j in metric_cols:
            v = _value(row[j])
            if v is None:
                continue
            name, unit = _split_unit(header[j])
            rec[_norm_metric(name)] = (v, unit or _cell_unit(row[j]), name)
    return run if run.records else None


# ---------------------------------------------------------------- benchmark output


_KV_PART = re.compile(
    rf"^\s*(?P<name>[^:=()]*[A-Za-z%][^:=()]*?)\s*(?:[(\[](?P<u1>[^()\[\]]*)[)\]])?\s*[:=]\s*"
    rf"(?P<val>{_NUM})\s*(?P<u2>[A-Za-zµμ%][A-Za-z/]*)?\s*$"
)
_KEY_LINE = re.compile(
    r"^\s*[#*-]*\s*(?P<name>bs|batch[ _]?size|batch|m|num[_ ]tokens|tokens|concurrency|"
    r"max[_ ]concurrency|seq[_ ]?len|input[_ ]len|isl|tp)\s*[:=]?\s*(?P<val>\d[\d,]*)\s*:?\s*$",
    re.I,
)


def _label_line(line: str) -> str | None:
    """A role label line inside a code block (``main:``, ``# PR``, ``=== before ===``)."""
    s = line.strip().strip("#/*=-:> ").strip()
    if not s or len(s) > 48 or re.search(r"[:=]\s*[-+]?\d", s):
        return None
    role, strength = _role(s)
    if role and strength == 2 and not _ACCURACY.search(s):
        return role
    return None


_VALUE_FIRST_PART = re.compile(
    rf"^\s*(?P<val>{_NUM})\s*(?P<name>[A-Za-z][A-Za-z ]{{0,30}}?)?\s*(?P<unit>{_UNIT_RE})\s*$", re.I
)
_LINE_PREFIX = re.compile(r"^\s*(?P<prefix>[A-Za-z][\w ]{0,20}?)\.\s+(?=\w)")


def _kv_parts(line: str) -> list[tuple[str, str, str | None]]:
    """``(name, raw value, unit)`` for each ``name: value unit`` or ``value name unit`` part.

    Benchmark scripts print several metrics per line (``Throughput: 21.84 requests/s,
    25158.62 total tokens/s``; ``Prefill. latency: 0.21 s, throughput: 76516 token/s``);
    a leading ``Prefill.`` / ``Decode.`` qualifies every metric of its line.
    """
    prefix_m = _LINE_PREFIX.match(line)
    prefix = prefix_m.group("prefix").strip() if prefix_m else ""
    body = line[prefix_m.end() :] if prefix_m else line
    if len(re.findall(r"\d", body)) and ("," in body or ";" in body or "\t" in body or "|" in body):
        parts = re.split(r"[,;|]\s+|\t", body)
    else:
        parts = [body]
    out: list[tuple[str, str, str | None]] = []
    lead_name = ""
    for part in parts:
        m = _KV_PART.match(part)
        if m:
            name = m.group("name").strip(" -*#>")
            lead_name = lead_name or name
            out.append((name, m.group("val"), m.group("u1") or m.group("u2")))
            continue
        v = _VALUE_FIRST_PART.match(part)
        if v and lead_name:
            words = (v.group("name") or "").strip()
            out.append((f"{words} {v.group('unit')}".strip(), v.group("val"), v.group("unit")))
    if prefix:
        out = [
            (f"{prefix} {n}" if not n.lower().startswith(prefix.lower()) else n, val, u)
            for n, val, u in out
        ]
    return out


def _kv_records(lines: list[str], run: _Run) -> None:
    current: tuple[tuple[str, str], ...] = ()
    for line in lines:
        km = _KEY_LINE.match(line)
        if km:
            current = ((_norm_metric(km.group("name")), km.group("val").replace(",", "")),)
            continue
        parts = _kv_parts(line)
        keys: list[tuple[str, str]] = []
        metrics: list[tuple[str, float, str | None]] = []
        for name, raw_val, raw_unit in parts:
            if _BATCH_KEYS.match(name.lower()) or _SHAPE_KEYS.match(name.lower()):
                if is_integer_text(raw_val):
                    keys.append((_norm_metric(name), raw_val.replace(",", "")))
                continue
            if _ACCURACY.search(name) or _NON_PERF.search(name):
                continue
            unit = normalise_unit(raw_unit)
            val = parse_number(raw_val)
            if val is None:
                continue
            metrics.append((name, abs(val), unit))
        if not metrics:
            if keys and len(parts) == len(keys):
                current = tuple(keys)
            continue
        key = tuple(keys) if keys else current
        rec = run.records.setdefault(key, {})
        for name, val, unit in metrics:
            rec.setdefault(_norm_metric(name), (val, unit, name))


def _whitespace_tables(lines: list[str]) -> tuple[list[list[list[str]]], list[str]]:
    """Whitespace-aligned tables (pandas, triton perf_report) and the remaining lines."""
    tables: list[list[list[str]]] = []
    rest: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        head2 = [t for t in re.split(r"\s{2,}", line.strip()) if t]
        head1 = line.split()
        if (
            len(head1) >= 2
            and any(re.search(r"[A-Za-z]", t) for t in head1)
            and ":" not in line
            and "|" not in line
        ):
            body: list[list[str]] = []
            j = i + 1
            while j < len(lines):
                toks = lines[j].split()
                if len(toks) >= 2 and all(
                    first_number(t) and re.fullmatch(rf"{_NUM}[A-Za-z%/]*", t) for t in toks
                ):
                    body.append(toks)
                    j += 1
                else:
                    break
            header = None
            for cand in (head2, head1):
                if body and all(len(r) in (len(cand), len(cand) + 1) for r in body):
                    header = cand
                    break
            if header is not None and body:
                rows = [header] + [r[1:] if len(r) == len(header) + 1 else r for r in body]
                tables.append(rows)
                i = j
                continue
        rest.append(line)
        i += 1
    return tables, rest


def _code_block(lines: list[str], ctx: _Ctx, doc: _Doc) -> None:
    """Split a fenced block into labelled segments and turn each into tables or a run."""
    segments: list[tuple[str | None, list[str]]] = []
    role0, s0 = _role(ctx.label)
    current_role = role0 if s0 == 2 and not _ACCURACY.search(ctx.label) else None
    current: list[str] = []
    for line in lines:
        lab = _label_line(line)
        if lab:
            if current:
                segments.append((current_role, current))
            current_role, current = lab, []
            continue
        current.append(line)
    if current:
        segments.append((current_role, current))
    for role, seg in segments:
        seg_ctx = ctx
        if role and role != role0:
            seg_ctx = _Ctx(**{**ctx.__dict__, "label": role})
        pipe_rows: list[list[str]] = []
        other: list[str] = []
        k = 0
        while k < len(seg):
            if "|" in seg[k] and k + 1 < len(seg) and _SEP_ROW.match(seg[k + 1]):
                rows = [_split_pipe_row(seg[k])]
                k += 2
                while k < len(seg) and "|" in seg[k]:
                    rows.append(_split_pipe_row(seg[k]))
                    k += 1
                pipe_rows = rows
                _table(pipe_rows, seg_ctx, doc)
                continue
            other.append(seg[k])
            k += 1
        ws_tables, rest = _whitespace_tables(other)
        for t in ws_tables:
            _table(t, seg_ctx, doc)
        if role:
            run = _Run(role, seg_ctx)
            _kv_records(rest, run)
            if run.records:
                doc.runs.append(run)


def _pair_runs(doc: _Doc) -> None:
    pending: dict[str, _Run] = {}
    for run in doc.runs:
        other = "optimized" if run.role == "baseline" else "baseline"
        if other in pending:
            b, o = (pending[other], run) if other == "baseline" else (run, pending[other])
            made = _pair_two(b, o, doc)
            if made:
                pending.clear()
                continue
        pending[run.role] = run


def _pair_two(b: _Run, o: _Run, doc: _Doc) -> int:
    made = 0
    for key, bmetrics in b.records.items():
        ometrics = o.records.get(key)
        if ometrics is None:
            continue
        for name, (bv, bu, raw) in bmetrics.items():
            if name not in ometrics:
                continue
            ov, ou, _ = ometrics[name]
            if bu and ou and normalise_unit(bu) != normalise_unit(ou):
                continue
            keys = [(k, v) for k, v in key]
            m = _make(
                b.ctx,
                metric=raw,
                unit=bu or ou,
                keys=keys,
                baseline=bv,
                optimized=ov,
                source="runs",
            )
            if m:
                doc.measurements.append(m)
                made += 1
    return made


# ------------------------------------------------------------------------- prose

_TRANSITION = re.compile(
    rf"(?:\bfrom\s+(?:~|about\s+|around\s+|roughly\s+)?(?P<a1>{_NUM})\s*(?P<ua1>{_UNIT_RE})?\s+to\s+"
    rf"(?:~|about\s+|around\s+)?(?P<b1>{_NUM})\s*(?P<ub1>{_UNIT_RE})?)"
    rf"|(?:(?P<a2>{_NUM})\s*(?P<ua2>{_UNIT_RE})?\s*{_ARROW}\s*(?P<b2>{_NUM})\s*(?P<ub2>{_UNIT_RE})?)",
    re.I,
)
_UP_FROM = re.compile(
    rf"(?P<b>{_NUM})\s*(?P<ub>{_UNIT_RE})?(?P<mid>[^.;()\d]{{0,60}}?)[,(]?\s*\b(?:up|down)\s+from\s+"
    rf"(?:~\s*|about\s+)?(?P<a>{_NUM})\s*(?P<ua>{_UNIT_RE})?",
    re.I,
)
_TRAP_BEFORE = re.compile(
    r"(?:\bbatch(?:[ _]?sizes?|es)?|\bbs|\btp|\bep|\bdp|\bpp|tensor[- ]parallel(?:ism)?|\btokens?|"
    r"seq(?:uence)?[ _]?len(?:gth)?s?|\bcontext(?: length)?|concurrency|\bnum[_ ]\w+|\bversion|"
    r"\bblock[_ ]?size|\btiles?|\bwarps|\bstages|\b[MNKE]|\bsizes?|\brange|\bexperts?|\bgpus?|"
    r"\bnodes?|\bthreads?|\branks?|\blayers?|\bheads?|page[ _]size|prefill[ _]size|\bmax[_ ]\w+|"
    r"\bchunks?|\bsteps?|\bprompts?|\brequests?|\bworkers?|\bfrom|\bv)\s*[=:]?\s*(?:from\s+)?$",
    re.I,
)
_HEDGE = r"(?:up to\s+|~\s*|about\s+|around\s+|roughly\s+|approximately\s+|over\s+|nearly\s+|almost\s+|≈\s*)?"
_PERF_NOUN = (
    r"(?:throughput|latency|ttft|tpot|itl|performance|bandwidth|tflops|tok(?:en)?s?/s|speed|time)"
)
_STATED_PATTERNS = [
    # "1.3x faster", "2x speedup", "1.8x higher throughput", "1.8x higher" (metric before)
    re.compile(
        r"(?<![\w.])(?P<n>\d+(?:\.\d+)?)\s*[x×]\s*-?\s*(?P<w>faster|quicker|speed-?ups?|better|"
        r"higher|lower|more|less|reduction|improvement|increase|decrease)\b",
        re.I,
    ),
    # "speedup of 1.3x", "improvement: ~12%"
    re.compile(
        r"(?P<w>speed-?ups?|improvement|faster|acceleration|perf(?:ormance)? gain|gain|uplift)\s+"
        rf"(?:of\s+|by\s+|is\s+|:\s*|≈\s*)?{_HEDGE}"
        r"(?P<n>\d+(?:\.\d+)?)\s*(?P<u>[x×%])(?![A-Za-z0-9])",
        re.I,
    ),
    # "23% lower latency", "12% faster"
    re.compile(
        r"(?<![\w.])(?P<n>\d+(?:\.\d+)?)\s*%\s*(?P<w>faster|quicker|speed-?up|slower|"
        r"(?:higher|lower|better|more|less|reduction|increase|decrease|improvement|gain|boost|drop)"
        r"(?:\s+(?:in|of|on))?(?:\s+[\w/-]+){0,3})",
        re.I,
    ),
    # "reduces TTFT by 9%", "throughput improves by 6%", "latency drops by 2x"
    re.compile(
        r"(?P<v>improv\w*|increas\w*|boost\w*|rais\w*|reduc\w*|cut\w*|decreas\w*|lower\w*|"
        r"drop\w*|fall\w*|fell|shrink\w*|speed\w*\s+up|accelerat\w*|goes\s+up|goes\s+down)\s+"
        rf"(?P<what>(?:[\w/-]+\s+){{0,5}}?)by\s+{_HEDGE}"
        r"(?P<n>\d+(?:\.\d+)?)\s*(?P<u>[x×%])(?![A-Za-z0-9])",
        re.I,
    ),
]
_COMPARATIVE_ONLY = re.compile(r"^(?:higher|lower|more|less|reduction|increase|decrease)$", re.I)


def _prose_transitions(line: str, ctx: _Ctx, doc: _Doc) -> None:
    """``from x to y``, ``x → y`` and ``y, up from x`` next to a metric word or a unit."""
    if _ACCURACY.search(line):
        return
    hits: list[tuple[re.Match[str], str, str, str | None, str | None, str]] = []
    for m in _TRANSITION.finditer(line):
        hits.append(
            (
                m,
                m.group("a1") or m.group("a2"),
                m.group("b1") or m.group("b2"),
                m.group("ua1") or m.group("ua2"),
                m.group("ub1") or m.group("ub2"),
                "",
            )
        )
    for m in _UP_FROM.finditer(line):
        hits.append((m, m.group("a"), m.group("b"), m.group("ua"), m.group("ub"), m.group("mid")))
    for m, a_raw, b_raw, ua, ub, mid in hits:
        after = line[m.end() : m.end() + 2]
        if re.match(r"\s*[x×]", after) or (ua or "").lower() in ("x",) or re.match(r"\.\d", after):
            continue
        before = line[max(0, m.start() - 40) : m.start()]
        if _TRAP_BEFORE.search(before):
            continue
        unit_a, unit_b = normalise_unit(ua), normalise_unit(ub)
        if unit_a and unit_b and unit_a != unit_b:
            continue
        unit = unit_a or unit_b
        window = line[max(0, m.start() - 80) : m.start()] + " " + mid
        metrics = list(_METRIC_WORDS.finditer(window))
        metric = metrics[-1].group(0) if metrics else ""
        if not metric and not unit:
            continue
        if unit == "%" and not metric:
            continue
        a, b = parse_number(a_raw), parse_number(b_raw)
        if a is None or b is None:
            continue
        local = _window_ctx(ctx, line, m.start(), m.end())
        meas = _make(
            local,
            metric=metric or _metric_from_unit(unit),
            unit=unit,
            keys=[],
            baseline=abs(a),
            optimized=abs(b),
            source="prose:transition",
        )
        if meas:
            doc.measurements.append(meas)


def _window_ctx(ctx: _Ctx, line: str, start: int, end: int) -> _Ctx:
    """Context for a prose hit: the clause around it, so one sentence can carry a kernel
    claim and an end-to-end claim without one's scope leaking into the other."""
    lo = max(
        line.rfind(".", 0, max(0, start - 1)),
        line.rfind(";", 0, start),
        line.rfind(",", 0, max(0, start - 30)),
    )
    hi_candidates = [
        i for i in (line.find(",", end), line.find(".", end), line.find(";", end)) if i >= 0
    ]
    hi = min(hi_candidates) if hi_candidates else len(line)
    clause = line[lo + 1 : hi]
    gpus = find_gpus(line[:end])
    models = find_models(line[:end])
    return _Ctx(
        **{
            **ctx.__dict__,
            "label": clause,
            "nearby": "",
            "hardware": gpus[-1] if gpus else ctx.hardware,
            "model": models[-1] if models else ctx.model,
        }
    )


def _prose_stated(line: str, ctx: _Ctx, doc: _Doc) -> None:
    if _ACCURACY.search(line) and not _METRIC_WORDS.search(line):
        return
    taken: list[tuple[int, int]] = []
    for pat in _STATED_PATTERNS:
        for m in pat.finditer(line):
            if any(s <= m.start() < e or s < m.end() <= e for s, e in taken):
                continue
            tail = line[m.end() : m.end() + 40]
            if re.match(r"\s*(?:H\d|A\d|B\d|L\d|GPUs?|nodes?|MI\d|GB\d)", tail):
                continue  # "2x H100": a GPU count
            head = line[max(0, m.start() - 60) : m.start()]
            words = m.groupdict().get("w") or ""
            after = " ".join(tail.split()[:3])
            if _COMPARATIVE_ONLY.match(words.strip()) and not (
                re.search(_PERF_NOUN, after, re.I)
                or re.search(
                    _PERF_NOUN + r"\W+(?:\w+\W+)?(?:is|was|are|becomes|gets)?\s*$", head, re.I
                )
            ):
                continue  # "2x more memory", "4x larger"
            phrase = line[m.start() : m.end()] + " " + after
            if m.groupdict().get("what"):
                phrase = f"{m.group('what')} {phrase}"
            if pat is _STATED_PATTERNS[3] or pat is _STATED_PATTERNS[0]:
                clause = re.split(r"[,;.:]|\band\b|\bwhile\b|\bbut\b", head)[-1]
                phrase = f"{clause} {phrase}"
            unit = (m.groupdict().get("u") or ("%" if pat is _STATED_PATTERNS[2] else "x")).replace(
                "×", "x"
            )
            cues = re.sub(
                r"\d", " ", phrase
            )  # direction words only: numbers in the clause are not the ratio
            value = parse_stated_speedup(f"{m.group('n')}{unit}", kind=cues)
            if value is None:
                continue
            taken.append((m.start(), m.end()))
            local = _window_ctx(ctx, line, m.start(), m.end())
            mw = _METRIC_WORDS.search(local.label)
            metric = mw.group(0) if mw else "speedup"
            meas = _make(
                local, metric=metric, unit=None, keys=[], stated=value, source="prose:stated"
            )
            if meas:
                doc.stated.append(meas)


_PROSE_ROLE_VALUE = re.compile(
    rf"^\s*(?:[-*+]\s+|\d+\.\s+)?(?P<label>[^:=\d][^:=]{{0,40}}?)\s*[:=]\s*(?P<val>{_NUM})\s*(?P<unit>{_UNIT_RE})?\s*$",
    re.I,
)


_INLINE_ROLE_VALUE = re.compile(
    rf"(?P<label>\bbefore\b|\bafter\b|\bbaseline\b|\bmain\b|\bmaster\b|\bthis PR\b|\bPR\b|"
    rf"\bwith (?:the |this )?(?:PR|patch|change)\b|\bwithout (?:the |this )?(?:PR|patch|change)\b)"
    rf"\s*(?:\)|,)?\s*[:=]?\s*(?P<val>{_NUM})\s*(?P<unit>{_UNIT_RE})?",
    re.I,
)


def _prose_inline_pair(line: str, c: _Ctx, doc: _Doc) -> None:
    """``throughput before: 1532 tok/s. After: 1718 tok/s`` within one line of prose."""
    if _ACCURACY.search(line):
        return
    hits = [(m, _role(m.group("label"))[0]) for m in _INLINE_ROLE_VALUE.finditer(line)]
    base = [m for m, r in hits if r == "baseline"]
    opt = [m for m, r in hits if r == "optimized"]
    if len(base) != 1 or len(opt) != 1:
        return
    b, o = base[0], opt[0]
    ub, uo = normalise_unit(b.group("unit")), normalise_unit(o.group("unit"))
    if ub and uo and ub != uo:
        return
    unit = ub or uo
    first = min(b.start(), o.start())
    window = line[max(0, first - 80) : first]
    metrics = list(_METRIC_WORDS.finditer(window))
    metric = metrics[-1].group(0) if metrics else ""
    if not unit and not metric:
        return
    bv, ov = parse_number(b.group("val")), parse_number(o.group("val"))
    if bv is None or ov is None:
        return
    local = _window_ctx(c, line, first, max(b.end(), o.end()))
    meas = _make(
        local,
        metric=metric or _metric_from_unit(unit),
        unit=unit,
        keys=[],
        baseline=abs(bv),
        optimized=abs(ov),
        source="prose:inline",
    )
    if meas:
        doc.measurements.append(meas)


def _prose_role_run(line: str, c: _Ctx, doc: _Doc) -> None:
    """``- main: 9,812 tok/s`` / ``- this PR: 10,344 tok/s`` lines become one-record runs."""
    m = _PROSE_ROLE_VALUE.match(line)
    if not m:
        return
    role, strength = _role(m.group("label"))
    if not role or strength < 2 or _ACCURACY.search(c.text):
        return
    val = parse_number(m.group("val"))
    if val is None:
        return
    unit = normalise_unit(m.group("unit"))
    metric = _context_metric(c) or _metric_from_unit(unit)
    run = _Run(role, c)
    run.records[()] = {"value": (abs(val), unit, metric)}
    doc.runs.append(run)


# ------------------------------------------------------------------------- driver

_HTML_TABLE = re.compile(r"<table\b.*?</table\s*>", re.I | re.S)
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def _html_rows(table_html: str) -> list[list[str]]:
    rows = []
    for tr in re.findall(r"<tr\b.*?>(.*?)</tr\s*>", table_html, re.I | re.S):
        cells = re.findall(r"<t[hd]\b[^>]*>(.*?)</t[hd]\s*>", tr, re.I | re.S)
        if cells:
            rows.append([_clean_cell(c) for c in cells])
    return rows


def _is_heading(line: str) -> bool:
    s = line.strip()
    return bool(re.match(r"^#{1,6}\s", s) or re.fullmatch(r"\*\*[^*]{1,80}\*\*:?", s))


def extract_table(text: str) -> list[Measurement]:
    """Measurements from a PR text whose first line is the title and the rest the body.

    Returns finalised measurements (units, direction and speedup filled) with
    ``extractor="table"`` and :data:`EXTRACTOR_VERSION`; audit flags are left to
    :func:`dagster_project.gains.extract.extract_text`, which audits every extractor's
    output the same way.
    """
    title, _, body = text.partition("\n")
    tables: list[list[list[str]]] = []

    def _stash(m: re.Match[str]) -> str:
        tables.append(_html_rows(m.group(0)))
        return f"\n\x00HTMLTABLE{len(tables) - 1}\x00\n"

    body = _HTML_TABLE.sub(_stash, body)
    lines = body.splitlines()
    doc = _Doc(title=title)

    gpus = distinct_gpus(text)
    pr_hw = gpus[0] if len(gpus) == 1 else None
    models = list(dict.fromkeys(m.lower() for m in find_models(text)))
    pr_model = find_models(text)[0] if len(models) == 1 else None
    pr_shape = find_shape(title)

    heading = ""
    prose_tail: list[str] = []
    last_hw: str | None = None
    last_model: str | None = None
    section_shape: str | None = None
    for hit in find_gpus(title):
        last_hw = hit
    for hit in find_models(title):
        last_model = hit

    def caption_after(j: int) -> str:
        """First non-empty prose line from ``lines[j]`` on (stops at the next block)."""
        while j < len(lines):
            t = lines[j].strip()
            if not t:
                j += 1
                continue
            if _FENCE.match(t) or "|" in t or "\x00HTMLTABLE" in t or _is_heading(t):
                return ""
            return t
        return ""

    def ctx(after: str = "") -> _Ctx:
        label = ""
        for prev in reversed(prose_tail):
            if prev.strip():
                label = prev.strip() if len(prev.strip()) <= 120 else ""
                break
        return _Ctx(
            label=_clean_cell(label),
            heading=heading,
            nearby="\n".join(p for p in prose_tail[-4:] if p.strip()),
            hardware=last_hw or pr_hw,
            model=last_model or pr_model,
            shape=section_shape or pr_shape,
            title=title,
            after=after,
        )

    prose_lines: list[tuple[str, _Ctx]] = [(title, ctx())]
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(1)
            j = i + 1
            block: list[str] = []
            while j < len(lines) and not lines[j].strip().startswith(marker[0] * len(marker)):
                block.append(lines[j])
                j += 1
            _code_block(block, ctx(caption_after(j + 1)), doc)
            prose_tail = []
            i = j + 1
            continue
        hm = re.fullmatch(r"\s*\x00HTMLTABLE(\d+)\x00\s*", line)
        if hm:
            _table(tables[int(hm.group(1))], ctx(caption_after(i + 1)), doc)
            prose_tail = []
            i += 1
            continue
        if "|" in line and i + 1 < len(lines) and _SEP_ROW.match(lines[i + 1]):
            rows = [_split_pipe_row(line)]
            j = i + 2
            while j < len(lines) and "|" in lines[j] and lines[j].strip():
                rows.append(_split_pipe_row(lines[j]))
                j += 1
            _table(rows, ctx(caption_after(j)), doc)
            prose_tail = []
            i = j
            continue
        # prose
        if _is_heading(line):
            heading = _clean_cell(line.lstrip("#"))
            section_shape = None
        if line.strip():
            here = ctx()
            prose_lines.append((line, here))
            _prose_role_run(line, here, doc)
            _prose_inline_pair(line, here, doc)
        for hit in find_gpus(line):
            last_hw = hit
        for hit in find_models(line):
            last_model = hit
        sh = find_shape(line)
        if sh:
            section_shape = sh
        prose_tail.append(line)
        i += 1

    for line, c in prose_lines:
        _prose_transitions(line, c, doc)
    _pair_runs(doc)
    for line, c in prose_lines:
        _prose_stated(line, c, doc)

    out = doc.measurements if doc.measurements else _dedupe_stated(doc.stated)
    result: list[Measurement] = []
    seen: set[tuple[object, ...]] = set()
    for m in out:
        key = (
            m.scope,
            m.metric.lower(),
            m.baseline,
            m.optimized,
            m.stated_speedup,
            m.batch_size,
            m.shape,
        )
        if key in seen:
            continue
        seen.add(key)
        m.extractor = "table"
        m.extractor_version = EXTRACTOR_VERSION
        if m.hardware and canonical_gpu(m.hardware) is None:
            m.hardware = None
        result.append(finalise(m))
    return result


def _dedupe_stated(stated: list[Measurement]) -> list[Measurement]:
    """Table speedup columns win over prose restating them (same scope); prose claims
    about another scope are kept; exact repeats (title and body) collapse to one."""
    table_scopes = {m.scope for m in stated if (m.source or "").startswith("table")}
    out: list[Measurement] = []
    seen: set[tuple[str, float | None]] = set()
    for m in stated:
        from_table = (m.source or "").startswith("table")
        if not from_table and m.scope in table_scopes:
            continue
        k = (m.scope, m.stated_speedup)
        if not from_table and k in seen:
            continue
        seen.add(k)
        out.append(m)
    return out
