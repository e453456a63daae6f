"""Words that decide what a header, label or sentence means (one place for all block kinds).

Why a vocabulary and not layout rules: real PR text varies in layout far more than in
wording. A column called ``main (us)``, a line ``base: 12.1 ms`` and a sentence "before
this PR it took 12.1 ms" all say *baseline* with the same few words, so each block kind
parses its own layout and then asks this module what its labels mean.

Roles (:func:`role_of`): ``baseline`` / ``optimized`` for the two sides of a comparison,
``reference`` for a third party shown for context (TensorRT, FA3, cuBLAS, "for reference"),
and weak roles for implementation names that only decide when nothing stronger is there
(``torch`` replaced by ``triton``/``cuda``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from dagster_project.gains.normalise import UNIT_PATTERN, normalise_unit

# ----------------------------------------------------------------------------- roles

_BASE_STRONG = re.compile(
    r"\bbaselines?\b|\bbase\b|\bmain\b|\bmaster\b|\bbefore\b|\bdefault\b|\boriginal\b|\borig\b|"
    r"\bold\b|\bw/o\b|\bwithout\b|\bprevious\b|\bprev\b|\bupstream\b|\bunpatched\b|\bvanilla\b|"
    r"\bnightly\b|\bdisabled?\b|\boff\b|\bcurrent\b|\bexisting\b|\buntuned\b|\bprior\b|"
    r"\bref(?:erence)? impl|"
    r"\bheur(?:istics?)?\b|\bfallback\b|\bstock\b|"
    r"\bparent(?:\s+commit)?\b",  # 2.8: "| Parent | This PR |"
    re.I,
)
_OPT_STRONG = re.compile(
    r"\bthis\s+(?:pr|branch|change|patch)\b|\bpr\b|\bours\b|\bour\b|\bafter\b|\btuned\b|\bnew\b|"
    r"\boptimi[sz]ed\b|\bopt\b|\bw/(?!o)|\bwith\b|\bproposed\b|\bpatched\b|\benabled?\b|"
    # 2.8: "on" as in "fusion on", not the hardware a run was on ("On A100-SXM4-40GB")
    r"\bon\b(?!\s+(?:an?\s+|the\s+|\d+\s*[x×]\s*)?(?:[a-z]*\d|gpus?\b|nvidia|amd\b|rocm|hopper"
    r"|blackwell|ampere))|"
    r"\bfixed\b|\bimproved\b|\bnow\b|\b(?:pr|feature|my|new)\s+branch\b|\bpr\s*#?\d+|#\d{3,}",
    re.I,
)
_BASE_WEAK = re.compile(
    r"\btorch\b|\bpytorch\b|\beager\b|\bnative\b|\bnaive\b|\bpython\b|\bunfused\b|\bseparate\b|"
    r"\bcompiled?\b|\btorch\.compile\b|\bcublas\b|\bf\.linear\b|\bhugging\s*face\b|\bhf\b",
    re.I,
)
_OPT_WEAK = re.compile(
    r"\btriton\b|\bcuda\b|\bcustom\b|\bkernel\b|\bflashinfer\b|\bcutlass\b|\bdeepgemm\b|"
    r"\bsgl[-_ ]?kernel\b|\bfused\b|\bfusion\b|\bcute\b|\bcutedsl\b|\bjit\b|\bop\b|\bimpl\b",
    re.I,
)
_REFERENCE = re.compile(
    r"for reference|\breference\b|\bref\b|tensorrt|\btrt\b|trt-?llm|\bfa[23]\b|flash[- _]?attn|"
    r"flashattention|\bxformers\b|\bcudnn\b|\bupper bound\b|\bideal\b|\btheoretical\b|\bpeak\b|"
    r"\bsota\b|\bcompetitor\b",
    re.I,
)


#: 2.4: "prefix" is a word of its own (prefix caching), so "fix" needs a separator
_PRE_POST = re.compile(
    r"\b(pre|post)(?:[- ]?(?:pr|change|patch|opt(?:imi[sz]ation)?)|[- ]fix)\b", re.I
)


@dataclass(frozen=True, slots=True)
class Role:
    """What a label says about its side: ``kind`` and how sure (2 strong, 1 weak)."""

    kind: str | None  # "baseline" | "optimized" | "reference" | None
    strength: int = 0


NO_ROLE = Role(None, 0)


#: 2.8: whether the PR being read is a revert (its body opens with GitHub's own "Reverts
#: owner/repo#N"): its "before" and "after" are said of the change it reverts
REVERTED: ContextVar[bool] = ContextVar("gains_reverted", default=False)
_REVERT_BODY = re.compile(r"\s*Reverts\s+[\w.-]+/[\w.-]+#\d+\b")
_BEFORE_AFTER_ONLY = re.compile(r"^\W*(?:before|after)\b[^\d]{0,30}$", re.I)


def is_revert(text: str) -> bool:
    """Whether a PR text (first line title) is GitHub's revert of another PR."""
    return bool(_REVERT_BODY.match(text.partition("\n")[2]))


@contextmanager
def reading(text: str, repo: str | None = None) -> Iterator[None]:
    """While one PR is read, by the extractor or by the audit (both must see the same
    sides): whether it is a revert (:data:`REVERTED`), which its text alone says.

    ``repo`` is accepted and not read. Until 2.12 the PR's project named its side (a
    "vLLM" column was the PR's in a vLLM PR, another project's the baseline); the lake
    passed the repo and the CLI did not, so one text gave two readings, and a comparison
    against another engine or library became the PR's own gain (issue 40). The sides now
    come from the text only, so every caller reads a text alike."""
    del repo
    reverted = REVERTED.set(is_revert(text))
    try:
        yield
    finally:
        REVERTED.reset(reverted)


def role_of(label: str | None) -> Role:
    """The role a header / label / line prefix names (see module docstring)."""
    role = _role_of(label)
    if REVERTED.get() and label and _BEFORE_AFTER_ONLY.match(label.strip()):
        # a revert undoes the change its "before"/"after" runs measured: its own baseline
        # is "after", its result "before" (a "main" / "this PR" label is its own already)
        swap = {"baseline": "optimized", "optimized": "baseline"}
        return Role(swap.get(role.kind or "", role.kind), role.strength)
    return role


def _role_of(label: str | None) -> Role:
    if not label:
        return NO_ROLE
    # "pre-PR" / "post-PR" (and "-change", "-patch"): the side before / after the change,
    # not the PR's side because the word "PR" is in it
    s = _PRE_POST.sub(lambda m: "before" if m.group(1).lower() == "pre" else "after", label.strip())
    # 2.4: snake_case headers of benchmark scripts ("baseline_mean", "new_time_us") name
    # their side with the same words as prose does
    s = s.replace("_", " ")
    b, o = bool(_BASE_STRONG.search(s)), bool(_OPT_STRONG.search(s))
    if b and o:
        # "PR before" / "after (main)" are rare; "w/o X" beats "with"; "before" beats "pr"
        if re.search(r"\bw/o\b|\bwithout\b|\bbefore\b|\bbaseline\b", s, re.I) and not re.search(
            r"\bafter\b", s, re.I
        ):
            return Role("baseline", 2)
        if re.search(r"\bafter\b|\bthis\s+pr\b|\btuned\b|\bours\b", s, re.I):
            return Role("optimized", 2)
        return NO_ROLE
    if b:
        return Role("baseline", 2)
    if o:
        return Role("optimized", 2)
    if _REFERENCE.search(s):
        return Role("reference", 1)
    bw, ow = bool(_BASE_WEAK.search(s)), bool(_OPT_WEAK.search(s))
    if bw and not ow:
        return Role("baseline", 1)
    if ow and not bw:
        return Role("optimized", 1)
    return NO_ROLE


def strip_role_words(label: str) -> str:
    """The label minus role words: the metric/condition part (``main TTFT (ms)`` ->
    ``TTFT (ms)``)."""
    s = label
    for rx in (_OPT_STRONG, _BASE_STRONG):
        s = rx.sub(" ", s)
    s = re.sub(r"\(\s*\)|\[\s*\]", " ", s)
    s = re.sub(r"^[\s:_/|-]+|[\s:_/|-]+$", "", re.sub(r"\s+", " ", s))
    return s.strip()


# ------------------------------------------------------------------------- column kinds

SPEEDUP_HEADER = re.compile(
    r"speed-?up|\bratio\b|improve?(?:ment)?|\bgain\b|\bchange\b|\bdiff\b|\bdelta\b|Δ|\bvs\.?\b|"
    r"reduction|faster|relative|uplift|\bboost\b|\bx\s*faster|\bperf\s*\+|\bacceleration\b|%\s*$",
    re.I,
)
MULTIPLICATIVE_HEADER = re.compile(r"speed-?up|\bratio\b|\bx\b|\btimes\b|faster|acceleration", re.I)

ACCURACY = re.compile(
    r"accuracy|\bacc(?:_norm)?\b|exact[_ ]match|\bem\b|\bf1\b|gsm8k|mmlu|humaneval|math-?500|"
    r"gpqa|aime|\bscores?\b|pass@\d|bleu|rouge|perplexity|\bppl\b|flexible-extract|"
    r"strict-match|stderr|\binvalid\b|correctness|correct[ _-]?rate|win[ -]rate|mt-?bench|"
    r"lm[_-]eval|\bmbpp\b|"
    r"hellaswag|arc[_-]challenge|winogrande|\bmmmu\b|chartqa|\bcer\b|\bwer\b|\bmae\b|\bmse\b|"
    r"\bmax[_ ]?(?:abs[_ ]?)?(?:diff|err(?:or)?)\b|\brel(?:ative)?[_ ]err|\btolerance\b|"
    r"\batol\b|\brtol\b|"
    r"cosine|similarity|\bkl\b|\bloss\b",
    re.I,
)
#: metrics that are never performance results (counts, config, shares, memory, settings)
NON_PERF = re.compile(
    r"successful requests|failed requests|"
    r"total (?:input|generated|output)(?: text| vision)? tokens|"
    r"retokenized|benchmark duration|request rate|max(?:imum)?\.?[ _-](?:request[ _-])?concurrency|"
    r"\bruns?\b|\bprompts?(?:/run)?\b|\bfailed\b|\bn[-_ ]?shots?\b|"
    r"peak concurrent|^concurrency$|num[_ ]prompts|acc(?:ept(?:ance)?)?[ _.]?(?:length|len|rate)|"
    r"\bseed\b|"
    r"warm-?ups?|iterations?|\biters?\b|\brepeats?\b|(?<![a-z])std(?![a-z])|std[-_ ]?dev|stddev|"
    r"\bmemory\b|"
    r"\bmem\b|"
    r"kv[ _]cache|cache hit|\b(?:gpu|cpu|kv)[ _]?blocks\b|"
    r"\bbackend\b|\bstatus\b|\bcount\b|^#|\bptx\b|\bsass\b|\blines?\b|"
    r"\binstructions?\b|\bregisters?\b|\bregs\b|\bspills?\b|\bshare\b|% of|percent(?:age)?\b|"
    r"\bcalls?\b|\binstances\b|\bnum[_ ]?warps\b|\bnum[_ ]?stages\b|block[_ ]?size|group[_ ]?size|"
    r"\bsplit[_ ]?k\b|\bwaves?\b|occupancy|\bgpu[_ ]?util|\bsize\b|\bbytes\b|\bparams?\b|\bvram\b|"
    r"\bnum[_ ]?ctas\b|\bmaxnreg\b|\btiles?\b|\bversion\b|\bsteps?\b$|\btokens?$|\brequests?$|"
    r"\binput[_ ]?len|\boutput[_ ]?len|\bisl\b|\bosl\b|\bcompile time\b|\bstartup\b|"
    r"\bload(?:ing)? time\b",
    re.I,
)
#: row labels of rows that restate other rows
AGGREGATE = re.compile(
    r"^\W*(?:total|sum|avg\.?|average|mean|median|geomean|geo\.?\s?mean|geometric mean|overall|all)"
    r"(?:\s+(?:speed-?up|improvement|gain|of all|over all|all|shapes|rows|cases|configs|results))?"
    r"\W*(?:\([^)]*\))?\W*$",
    re.I,
)
#: row labels of counts and shares, never timings (PTX lines, registers, % of time)
COUNT_ROW = re.compile(
    r"\bptx\b|\bsass\b|\blines?\b|\binstructions?\b|\bregisters?\b|\bregs\b|\bspills?\b|"
    r"occupancy|\bmemory\b|\bmem\b|\bshare\b|% of|\bcount\b|\bcalls\b|\blaunches\b|\bbytes\b",
    re.I,
)
#: a header of profiling shares ("Time (%)", "% of total"): not a timing
SHARE_HEADER = re.compile(r"\(\s*%\s*\)|\bpercent(?:age)?\b|\bshare\b|% of|\bratio of time\b", re.I)
RUN_ROW = re.compile(r"^(?:run|trial|iter(?:ation)?|round|rep(?:eat)?|attempt|#)\s*#?\d+$", re.I)
#: config-table rows/columns: values are settings, not results
CONFIG_KEY = re.compile(
    r"^(?:block_size_[mnk]|block_[mnk]|group_size_m|num_warps|num_stages|split_k|waves_per_eu|"
    r"matrix_instr_nonkdim|kpack|tile_[mnk]|cluster_[mnk]|stages|warps|num_ctas)$",
    re.I,
)

BATCH_KEY = re.compile(
    r"^(?:bs|batch|batch[ _-]?size|batchsize|m|num[_ ]?tokens|#\s?tokens|n[_ ]?tokens|tokens|"
    r"num[_ ]?seqs|seqs|num[_ ]?reqs|batch \(m\)|m \(tokens\)|token[_ ]?num|ntok|num[_ ]?token|"
    r"max[_ ]?batch[_ ]?size)$",
    re.I,
)
MODEL_KEY = re.compile(r"^(?:model|models|model name|llm)$", re.I)
HW_KEY = re.compile(r"^(?:gpu|gpus|device|hardware|hw|platform|arch)$", re.I)
CONCURRENCY_KEY = re.compile(
    r"^(?:concurrency|max[_ ]?concurrency|num[_ ]?prompts|qps|rps|request[_ ]?rate)$", re.I
)

# ------------------------------------------------------------------------ metric words

METRIC_WORDS = re.compile(
    r"kernel time|step time|\blatenc(?:y|ies)\b|\bthroughput\b|\bttft\b|\btpot\b|\bitl\b|\be2el\b|"
    r"\b[tgp]?flops\b|\bbandwidth\b|\bduration\b|\bruntime\b|\bexecution time\b|\btime\b|\bmfu\b|"
    r"tok(?:en)?s?/s|req/s|requests?/s|\bspeed\b|\bqps\b|\bgoodput\b|\belapsed\b|\bperf\b|"
    r"\bms\b|\bus\b|\btpm\b",
    re.I,
)
E2E_WORDS = re.compile(
    r"\bttft\b|\btpot\b|\bitl\b|\be2el\b|\be2e\b|end[- ]to[- ]end|request throughput|"
    r"token throughput|output throughput|input throughput|\bserving\b|bench_serving|"
    r"bench_one_batch|"
    r"benchmark_serving|bench serve|benchmark_latency|benchmark_throughput|\bgoodput\b|\bqps\b|"
    r"\bserver\b|online|offline|sharegpt|tok(?:en)?s?/s|req/s|requests?/s|\bvllm bench\b|"
    r"\blm_eval\b|\bdecode throughput\b|\bprefill throughput\b|\bgen(?:eration)? throughput\b",
    re.I,
)
KERNEL_WORDS = re.compile(
    r"\bkernels?\b|micro-?bench|benchmark_moe|bench_\w+|benchmarks/kernels|\bop(?:erator)?s?\b|"
    r"\bgemm\b|\bop-level\b|\bunit bench|triton\.testing|do_bench|perf_report|\bnsys\b|\bncu\b|"
    r"\bcuda graph\b|\bmoe_align|\bfused_moe\b|\bquant(?:ize|ization)? kernel|all-?reduce|"
    r"all-?gather|"
    r"\bnccl\b|\bmatmul\b|\bscaled_mm\b|\bgemv\b|\brms_?norm\b|\blayernorm\b|\brope\b|"
    r"\bsampler\b|\btopk\b",
    re.I,
)
SHAPE_KEYS_KERNEL = re.compile(
    r"^(?:[mnkeh]|d|head[_ ]?dim|head[_ ]?size|heads|hidden(?:[_ ]size)?|topk|top_k|num[_ ]?heads|"
    r"mkn|shape|"
    r"num[_ ]?experts|experts|n[_ ]?experts|seq[_ ]?len|kv[_ ]?len|num[_ ]?tokens|"
    r"\(m,\s*n,\s*k\)|m,\s*n,\s*k|group[_ ]?size|page[_ ]?size)$",
    re.I,
)

UNIT_RE = re.compile(rf"(?<![A-Za-z])(?:{UNIT_PATTERN})(?![A-Za-z])", re.I)
_UNIT_WORDS = {
    "micro-seconds": "us",
    "microsecond": "us",
    "micro seconds": "us",
    "microseconds": "us",
    "milli-seconds": "ms",
    "millisecond": "ms",
    "milliseconds": "ms",
    "nanoseconds": "ns",
    "seconds": "s",
    "tflops/s": "TFLOPS",
    "tflop/s": "TFLOPS",
    "gb/s": "GB/s",
    "tb/s": "TB/s",
}


def unit_in(label: str | None) -> str | None:
    """A unit written in a header or label (``latency (us)``, ``TFLOPs/s``, ``micro-seconds``)."""
    if not label:
        return None
    label = re.sub(r"(?<=[A-Za-z])\s+/\s+(?=[A-Za-z])", "/", label)  # "toks / sec"
    low = label.lower()
    for word, unit in _UNIT_WORDS.items():
        if word in low:
            return unit
    paren = re.search(r"[(\[]\s*([^()\[\]]{1,16}?)\s*[)\]]", label)
    if paren:
        u = normalise_unit(paren.group(1))
        if u and _is_unit(u):
            return u
    m = re.search(r"(?:^|[\s_(/-])(" + UNIT_PATTERN + r")(?=$|[\s),:\]])", label, re.I)
    if m:
        u = normalise_unit(m.group(1))
        if u and _is_unit(u):
            return u
    return None


def _is_unit(u: str) -> bool:
    from dagster_project.gains.normalise import is_known_unit

    return is_known_unit(u) and u not in ("x", "%")


def metric_from_unit(unit: str | None) -> str:
    """A generic metric name when only the unit says what was measured."""
    from dagster_project.gains.normalise import TIME_UNITS

    u = normalise_unit(unit) or ""
    if u in TIME_UNITS or u.split("/", 1)[0] in TIME_UNITS:
        return "latency"
    if u in ("tok/s", "req/s", "it/s", "samples/s"):
        return "throughput"
    if "FLOPS" in u:
        return u
    if u.endswith("B/s"):
        return "bandwidth"
    return "value"


def is_non_measurement(label: str | None) -> bool:
    """True for accuracy, counts, configuration and share labels (never a measurement)."""
    if not label:
        return False
    s = label.strip()
    if METRIC_WORDS.search(s) and not re.search(
        r"accuracy|correct[ _-]?rate|\bmemory\b|\bmem\b|\bptx\b|\bsass\b|\bcompile time\b|% of|"
        r"\bshare\b|"
        r"warm-?up|iterations?|(?<![a-z])std(?![a-z])|stddev|\bstartup\b|\bload(?:ing)? time\b",
        s,
        re.I,
    ):
        return False
    return bool(ACCURACY.search(s) or NON_PERF.search(s) or CONFIG_KEY.match(s))
