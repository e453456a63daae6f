"""THE title filter: which commit subjects carry a performance signal.

This is the one place the rule lives. It is applied to the commit subject (for squash
merges, the PR title plus `` (#N)``), before anything else is read, because the title is
the cheapest signal and the one the card describes ("a performance signal in the title").

Three variants were measured against the card (``shared/reference/commits.md`` §2):

====== ======= ===== ==================================================================
rule    rows    PRs   verdict
====== ======= ===== ==================================================================
core    1,112   542   precise (40/40 sampled titles are perf work) but misses fusions
mid     1,269   623   core + fusions, overhead/sync/copy removal, split-k, persistent
                      kernels, warp specialisation: real perf work core misses
ext     1,767   903   adds bare improve/reduce/avoid/cuda graph: many bugfixes, too loose
card    1,517   850   built from clones ~2-5 months newer than ours
====== ======= ===== ==================================================================

**We use ``mid`` by default.** Every borderline case the reference lists that mid adds
("Fuse RoPE and MLA KV-cache write", "Fuse FP8 output quantization into merge_attn_states",
"Reduce MoE memory usage", "Adding SplitK in fused_moe_lora kernel") is genuine performance
work, while ``ext``'s extra matches were mostly bug fixes. The card's extra months (vLLM's
mirror stops at 2026-05, the card at 2026-10) account for the remaining gap to 850 PRs.
Each row stores ``rule`` (``"core"`` when the strict rule already matches, else ``"mid"``),
so a strict subset is one filter away.

Two documented refinements of the reference exclusion: compile-time work is recognised
through any ``compil*`` spelling ("compiliation time" slipped through), and a "wheel"
mention no longer vetoes a title that also names a perf *regression* fix.

**Measured (issue 21).** The table above predates a labelled sample. Since then the rule
is scored on hand-labelled commits of the real clones (``benchmarks/labelled/data/
perf_filter_sample.csv``, ``benchmarks/bench_perf_filter.py``), drawn in rounds: each
round's held-out half (or whole round) is scored once, then the rule is tuned on it and a
fresh round is drawn. Versions 2-4 widened ("Opt …", "Improve(d) … kernel", fusions
mid-title, needless work skipped, hoisting, TTFT/TPOT) and vetoed (bug fixes, feature
support and ``feat:`` titles without a perf word, DeepEP's "Low Latency"/"HighThroughput"
mode names, autotuner-only titles, ``[benchmark]``-only, logging/metrics, refactors).
Each fresh round scored lower than the previous in-sample figure: v2 on round 1's
held-out half P 0.92 / R 0.81, v3 on round 2 P 0.87 / R 0.83, v4 on round 3 P 0.85 /
R 0.91 (``benchmarks/RESULTS.md``): a title alone seems to top out below P 0.97.

Version 5 was tuned on rounds 1-3 (all development rows now; in-sample P 0.945 / R 0.949)
and scored once on a fresh, blind-labelled round 4 of 200 commits: P 0.84 / R 0.82, the
same as v4 on that round (P 0.83 / R 0.82). Its errors are mostly titles that say
"remove redundant/unnecessary …" about clean-ups, and perf work named only by its
mechanism ("Halving warps … to reduce spilling", "PDL improvements", "reduce one draft
forward"). More title rules fit the rows they are tuned on and not the next round.

Version 6 was tuned on rounds 1-4 (in-sample P 0.946 / R 0.926) by kinds of error, not
titles: clean-ups of objects that are no work ("remove redundant print/assert/override"),
guards and restrictions of a path without an outcome word, start-up time, FlashInfer's
``perf:`` type beating the fix/support vetoes, PDL and spilling as mechanisms. Scored once
on a fresh blind round 5 (200 commits): P 0.86 / R 0.79, against v5's P 0.85 / R 0.78 on
the same rows. A second blind reader of round 4 agreed with the first on 196 of 200
commits (kappa 0.96): the labels are reproducible, so the gap to the goal (P 0.97 / R 0.92)
is the title's, not the labels'.

Version 7 (issue 41) fixes two classes the issue names, from how titles are written, not
from a scored round: branch-style ``Feat/...`` / ``Feature/...`` titles now meet the feature
veto like ``feat:``, and perf words inside kernel *names* no longer read as perf claims
(``KERNEL_NAME_RE``: a library's "fused MoE" such as "TRT-LLM fused MoE", a
"throughput"/"latency" MoE, backend or kernel variant). Scored once on a fresh round 6
(``benchmarks/title_round6/``), labelled before this change: v6 P 0.89 / R 0.86, v7 P 0.91 /
R 0.86 (72 commits; ``benchmarks/RESULTS.md``). In sample (rounds 1-5) v7 removes two false
positives and loses no true one.

Version 8 (issue 41, 41d) was written after a fresh round 7 (``benchmarks/title_round7/``,
125 commits, three strata) had been drawn and blind-labelled, from the errors of rounds 1-6
pooled (929 development commits). It reads the title's structure: a verb about the code
itself ("correct/handle/set/simplify/refactor/modularize/rename/move …") or a new
backend/option/mode added or supported turns the title down unless an outcome word (or a
``[Perf]`` tag / ``perf:`` type, or a hoist out of a loop) says what it buys; one-time work
(weight pre-processing time, warm-ups during start-up, RL weight updates/syncs) is excluded
like compile time; less computation, communication, forwards, steps or workspaces is less
work. In sample: P 0.929 / R 0.890 (v7) -> P 0.956 / R 0.897 (v8). The commit's own message
body and diff were measured as extra evidence on the same rows and not used: a measured
gain in the body is as common in turned-down non-perf commits as in perf ones (7 vs 6), and
the kernel files' count, kinds and additions do not separate v8's remaining false positives
from its true ones (``benchmarks/title_round7/develop.py``). Scored once on round 7, held
out: v8 P 0.883 [0.778, 0.942] / R 0.855 [0.747, 0.922], exactly v7's figures (the same
7 false positives and 9 misses: build, weight-loading and set-up time phrased otherwise
than the one-time patterns, a check, a fix, a first implementation, an autotuner feature;
fusions and collectives named without a perf word). The in-sample gain did not carry over,
as with v5-v7: the targets (P 0.95 / R 0.90) are not met by a title rule, and round 7's
third stratum (titles with no perf-ish word; 2 of 20 were perf work) puts the population
recall near 0.5.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Version of the title rule (CORE_RE, MID_EXTRA_RE, EXCLUDE_RE, vetoes). Bump it whenever
#: mined output changes: it is part of the miner version (``mining/versions.py``); a bump
#: re-mines.
RULES_VERSION = "8"

CORE_RE = re.compile(
    r"\[\s*perf(ormance)?\s*\]|^perf(\(|:)|\bperf\b|\bperformance\b|optimi[sz]"
    r"|speed[\s-]?ups?\b|sped up|\bfaster\b"
    r"|\b(re-?)?tun(e|ed|es|ing)\b|throughput|latency"
    r"|\baccelerat(e|es|ed|ing|ion)\b|\bboost|\befficien|\bvectori[sz]"
    r"|\bfast(er)?[\s-]path\b|\bspeed\b|\bquicker\b"
    r"|\breduce[sd]? (the )?(overhead|latency|memory (traffic|footprint|usage)|register"
    r"|bank conflicts?|launch)"
    r"|\bimprov(e|es|ed|ing|ement)s?\b.*\b(perf|speed|efficien|throughput|bandwidth|occupancy)",
    re.IGNORECASE,
)

# What ``mid`` adds: work whose title names the mechanism rather than the outcome.
MID_EXTRA_RE = re.compile(
    r"^(\[[^\]]*\]\s*)*(fuse|fusing)\b"
    r"|\bfuse[sd]?\b.*\binto\b"
    # v2: a dot inside a name ("torch.zeros") no longer ends the phrase; fewer blocks,
    # registers, iterations or allocations are perf work too.
    r"|\b(reduc\w*|eliminat\w*|avoid\w*|remov\w*|minimi[sz]\w*|sav(e|es|ed|ing))\b"
    r"(?:[^.;]|\.(?=\S)){0,60}?"
    r"\b(overhead|sync\w*|latency|launch(es)?|cop(y|ies)|memcpy|h2d|d2h|bank conflicts?"
    r"|register spills?|registers|smem|shared memory|memory( usage| traffic| footprint)?"
    r"|round[\s-]?trips?|(num|number of) (blocks|registers|iterations)|allocations?"
    # v8: less computation, communication, forwards, steps or workspaces is less work.
    r"|computations?|communications?|forwards?|steps?|workspaces?)\b"
    # v2: SGLang's "Opt <thing>" prefix, "Improve(d) ... kernel", a fusion mid-title,
    # "fast <thing>", a naive implementation replaced.
    r"|^(\[[^\]]*\]\s*)*opt(?![-\w])"
    r"|\bimprov(e|es|ed|ing)\b[^;]*\bkernels?\b"
    r"|\b(fuse|fusion)\b"
    # v3: "fused <thing>" as an adjective ("Fused rope kv store"); fused_moe is a name.
    r"|\bfused\b(?=\s)"
    r"|\bfast\b"
    r"|\breplac\w*\b[^;]*\bnaive\b"
    # v4: skipping or removing needless work, hoisting out of loops, serving latencies.
    r"|\b(skip\w*|avoid\w*|remov\w*|drop\w*|reduc\w*|eliminat\w*)\s+(\w+\s+)?"
    r"(unnecessary|redundant|needless)\b"
    r"|\b(move|moves|moved|hoist\w*)\b[^;]*\bout of\b[^;]*\bloops?\b"
    r"|\b(ttft|tpot|itl)\b"
    r"|\bfast[\s-](path|kernel|topk|decode)\b"
    r"|\bsplit[\s-]?k\b"
    r"|\bpersistent (kernel|attention|mla|gemm|moe)"
    r"|\bwarp[\s-]?speciali[sz]"
    r"|\bvectoriz"
    # v5 (tuned on rounds 1-3): any persistent kernel ("warp-level persistent qk norm"),
    # contention and data movement removed, one-pass kernels, cache hints.
    r"|\bpersistent\b|\bcontention\b|\bdata[\s-]movement\b"
    r"|\bone[\s_-]pass\b|\bcache[\s-]hint"
    # v6 (tuned on rounds 1-4): programmatic dependent launch and register spilling are
    # perf mechanisms by name.
    r"|\bpdl\b|\bprogrammatic dependent launch|\bspill(s|ing|ed)?\b",
    re.IGNORECASE,
)

EXCLUDE_RE = re.compile(
    r"^\s*revert\b|\brevert(s|ed)?\b|^\s*merge\b"
    r"|^\s*\[?(ci|ci/build|build|docs?|tests?|testing|test/ci|chore|style|lint|typo|misc/ci"
    r"|release|bump|dependencies)\]?\s*[:\]\)]"
    r"|\[(ci|ci/build|build|docs?|tests?|testing|ci fix|ci failure|ci/test)\]"
    r"|^(ci|build|docs?|tests?|chore|style)(\([^)]*\))?!?:"
    r"|\b(unit[\s-]?tests?|add(s|ed|ing)? (a |more |unit )?tests?"
    r"|fix(es|ed)? (flaky |failing |broken )?tests?|benchmark(ing)? script|readme|typos?"
    r"|documentation|docstrings?|docs?|scripts?|compil\w*[\s-]?(time|speed)"
    r"|(speed[\s-]?up|accelerat\w*|faster|reduc\w*)\s+(the\s+)?(jit\s+)?compil\w*"
    # v6: start-up work is not inference speed ("Optimize CUDA graph capture time").
    r"|(capture|start[\s-]?up|warm[\s-]?up|init\w*|import)[\s-]time|\(start[\s-]?up\)"
    # v8: one-time work: weight pre-processing, start-up warm-ups, RL weight updates.
    r"|pre-?processing[\s-]time|during start[\s-]?up|update_weights\w*"
    r"|weights?[\s_-](update|sync|refit)\w*"
    r"|build[\s-]time|cmake|dockerfile|pre-commit|lint)\b",
    re.IGNORECASE,
)
# Packaging work, unless the same title fixes a perf regression (FlashInfer #3132).
WHEEL_RE = re.compile(r"\bwheels?\b", re.IGNORECASE)
PERF_REGRESSION_RE = re.compile(r"\bperf\w*\s+regression", re.IGNORECASE)

PR_NUMBER_RE = re.compile(r"\(#(\d+)\)\s*$")

# Speed only: every title either positive rule can match contains one of these
# substrings (checked against the regexes in the tests). ``in`` on a lower-cased title
# costs ~2 us; the regexes cost ~50 us, and ~95% of titles contain none of these.
_KEYWORDS = (
    "perf",
    "optimi",
    "speed",
    "sped",
    "faster",
    "tun",
    "throughput",
    "latency",
    "accelerat",
    "boost",
    "efficien",
    "vectori",
    "fast",
    "quicker",
    "reduc",
    "improv",
    "fuse",
    "fusing",
    "elimin",
    "avoid",
    "remov",
    "minimi",
    "sav",
    "split",
    "persistent",
    "warp",
    "opt",
    "fusion",
    "naive",
    "skip",
    "drop",
    "move",
    "hoist",
    "ttft",
    "tpot",
    "itl",
    "fusion",
    "persistent",
    "contention",
    "movement",
    "pass",
    "cache",
    "pdl",
    "programmatic",
    "spill",
)

RULES = ("core", "mid")
DEFAULT_RULE = "mid"


@dataclass(frozen=True)
class TitleMatch:
    """Why a title passed: the rule that matched first and the text it matched."""

    rule: str  # "core" | "mid"
    matched: str


# -- v2 vetoes (measured on the dev half of benchmarks/labelled/data/perf_filter_sample.csv) ------

#: Leading tags and conventional-commit prefixes: ``[Kernel][ROCm] ``, ``perf(moe): ``.
_LEAD_RE = re.compile(r"^\s*(?:(?:\[[^\]]*\]|[A-Za-z][\w-]*(?:\([^)]*\))?!?:)\s*)+")
_TAG_RE = re.compile(r"\[([^\]]*)\]")
#: Mode names that contain a perf word but name a mode, not an improvement (DeepEP's
#: "Low Latency" / "HighThroughput" modes, "min-latency" kernels).
MODE_NAME_RE = re.compile(r"(low|min(imum)?)[\s_-]?latency|high[\s_-]?throughput", re.IGNORECASE)
#: v7: kernel and backend names that contain a perf word: a library's fused MoE/experts/A-GEMM
#: ("TRT-LLM fused MoE", "cutlass fused moe": an existing kernel, named), and a "throughput"
#: or "latency" MoE, backend or kernel (a variant's name). A bare "fused MoE" keeps counting:
#: "Add … fused MoE path", "apply fused moe gate" are mostly new fused work (rounds 1-5).
KERNEL_NAME_RE = re.compile(
    r"\b(trt[\s_-]?llm|tensorrt[\s_-]?llm|cutlass|flashinfer|aiter|deep[\s_-]?gemm|triton)"
    r"[\s_-]+fused[\s_-]?(moe|experts?|a[\s_-]?gemm)\b"
    r"|\b(throughput|latency)[\s_-]+(moe|backend|kernels?|gemms?|mode|variant|fmha)\b",
    re.IGNORECASE,
)
#: Words that make a fix a perf change after all (outside tags and mode names): a fix
#: *of* a fusion is still a fix, so mechanisms do not count here.
FIX_PERF_WORD_RE = re.compile(
    r"\bperf\w*|\bslow|regression|speed|faster|optimi|accelerat|throughput|latency"
    r"|overhead|efficien"
    # v5: a fix whose body names vectorisation, overlap or contention is perf work.
    r"|vectori[sz]\w*|\boverlap\b|contention",
    re.IGNORECASE,
)
#: Words that make a "support" or "feat" title perf work: outcomes and mechanisms
#: named as verbs or nouns (fuse, fusion), not the adjective "fused", which names kernels.
PERF_WORD_RE = re.compile(
    FIX_PERF_WORD_RE.pattern + r"|\bfuses?\b|fusion|fusing|\btun(e|ed|ing)\b|\bsync\b"
    r"|memory|boost|^opt\b"
    # v5: "fused <op> + <op>" / "fused <op> quantization|norm" names a new fusion of two
    # ops; a bare "fused GEMM/w8a8 kernel/MoE" names an existing kernel (measured: those are
    # features).
    r"|\bfused\b(?![\s_-]*moe)[^;]{0,30}(\+|quanti[sz]\w*|\bnorm\b)"
    r"|\bpersistent\b|\bsplit[\s-]?k\b|\bvectori[sz]",
    re.IGNORECASE,
)
#: A feature title: ``feat:``, ``feat(x):``, ``[feat]``, ``[Feature]`` before the text.
_FEAT_LEAD_RE = re.compile(
    r"^\s*(?:\[[^\]]*\]\s*)*(?:\[\s*feat(ure)?\s*\]|feat(ure)?(\([^)]*\))?\s*:"
    # v7: a branch name as the title ("Feat/deepseek fused moe ...").
    r"|feat(ure)?/)",
    re.IGNORECASE,
)
#: CI/build/docs/tests named after other tags ("[diffusion] CI: ...").
_CI_AFTER_TAGS_RE = re.compile(
    r"^\s*(?:\[[^\]]*\]\s*)+(ci|ci/build|build|docs?|tests?)\s*[:\]]", re.IGNORECASE
)
#: A fix after the tags, as a word or a conventional prefix (``fix:``, ``[ROCm] fix …``).
_FIX_LEAD_RE = re.compile(
    r"^\s*(?:\[[^\]]*\]\s*)*(bug\s*fix(es)?|hot\s*fix|fix(es|ed|ing)?)\b", re.IGNORECASE
)
_FIX_TAG_RE = re.compile(r"^\s*(bug\s*fix|bug|fix|hotfix)\s*$", re.IGNORECASE)
_PERF_TAG_RE = re.compile(r"^\s*perf(ormance)?\s*$", re.IGNORECASE)
_SUPPORT_RE = re.compile(r"\bsupport(s|ed|ing)?\b", re.IGNORECASE)
_BENCHMARK_ONLY_RE = re.compile(r"^\s*\[\s*bench(mark)?s?\s*\]\s*(?!\[)", re.IGNORECASE)
_LOGGING_RE = re.compile(
    r"\[\s*log(ging)?\s*\]|\b(startup|debug|optimi[sz]ation)\s+logs?\b|\blogging\b"
    r"|\blogs\b|\bmetrics\b",
    re.IGNORECASE,
)
#: v4: refactors and API moves are not perf work unless an outcome word says so.
_REFACTOR_RE = re.compile(
    r"^\s*(?:\[[^\]]*\]\s*)*refactor\b|\bto (the )?(unified|new) api\b", re.IGNORECASE
)


#: v5: titles about plumbing that merely mention a fused kernel or a tuned config: weight
#: loading, fallbacks, disabling a path, unused code removed, clean-ups/simplifications.
_PLUMBING_RE = re.compile(
    r"\bweights?[\s_-]load\w*|^\s*(?:\[[^\]]*\]\s*)*(fall[\s-]?back|disabl\w*)\b|\bunused\b"
    r"|\bsimplif\w*|\bclean[\s-]?up\b|\bdisk[\s-]cache\b",
    re.IGNORECASE,
)
#: v6: "remove unnecessary/redundant X" where X is not work the GPU or host does per step
#: (prints, asserts, comments, overrides, registrations, fallbacks): a clean-up.
_CLEANUP_OBJECT_RE = re.compile(
    r"\b(remov|drop|delet|skip|clean)\w*\s+(the\s+)?(\w+\s+)?(unnecessary|redundant|unused|needless)"
    r"\s+(\S+\s+){0,2}?(prints?|asserts?|assertions?|comments?|overrides?|fallbacks?|imports?"
    r"|args?|arguments?|checks?|logs?|logging|warnings?|code|files?|tests?|dependenc\w*"
    r"|mutates_args|dispatch_key|fields?|variables?|params?|parameters?|flags?|options?)\b",
    re.IGNORECASE,
)
#: v6: a guard or a restriction of an existing path ("Guard X by layout", "enable X only
#: for CUDA", "disable X when …") changes where a kernel runs, not how fast it is.
_GUARD_RE = re.compile(
    r"^\s*(?:\[[^\]]*\]\s*)*(guard|restrict|gate)\w*\b"
    r"|\b(enabl|disabl|us|allow|apply|run)\w*\b[^;]{0,60}\bonly\s+(for|when|on|if|with)\b"
    r"|^\s*(?:\[[^\]]*\]\s*)*disabl\w*\b[^;]{0,60}\b(when|for|on|if|unless)\b",
    re.IGNORECASE,
)
#: v6: outcome words (not mechanisms) that keep a guarded title perf work.
_OUTCOME_RE = re.compile(
    r"\bperf\w*|\bslow|regression|speed|faster|optimi|accelerat|throughput|\blatency"
    r"|overhead|efficien",
    re.IGNORECASE,
)
#: v6: FlashInfer's conventional ``perf:`` / ``perf(x):`` prefix types the commit as perf
#: work, so it beats the fix and support vetoes ("perf: fix the iteration bound …");
#: the ``[Perf]`` tag does not (measured: tagged "support"/"extend" titles are features).
_PERF_PREFIX_RE = re.compile(r"^\s*perf(\([^)]*\))?!?:", re.IGNORECASE)
#: v8: titles whose verb is about the code, not its speed ("correct/handle/set/simplify/
#: refactor/modularize/rename/move …"): a perf word after them names a kernel or a fusion
#: ("correct allreduce fusion …", "Handle NaNs in fused top-k", "Little refactor of … fusion").
_NON_WORK_LEAD_RE = re.compile(
    r"^\s*((little|small|minor)\s+)?(correct\w*|handl(e|es|ing)|set|simplif\w*|refactor\w*"
    r"|modulari[sz]\w*|renam\w*|mov(e|es|ed|ing))\b",
    re.IGNORECASE,
)
#: v8: hoisting out of a loop is the one "move" that is perf work by its mechanism.
_HOIST_RE = re.compile(r"\bout of\b[^;]*\bloops?\b", re.IGNORECASE)
#: v8: a new backend, option or mode added/supported/enabled is a feature unless an outcome
#: word beyond "efficient"/"optimizations" says what it buys ("… backend for improved
#: performance" counts; "… backend with AMD GPU optimizations" does not).
_FEATURE_OBJECT_RE = re.compile(
    r"^\s*(add|support|introduc|integrat|enabl|allow|extend)\w*\b[^;]*\b(backends?|options?"
    r"|modes?)\b",
    re.IGNORECASE,
)
_STRONG_OUTCOME_RE = re.compile(
    r"\bperf\w*|\bslow|regression|speed|faster|throughput|\blatency|overhead|accelerat"
    r"|\d+(\.\d+)?\s*(x|×|%)(?!\w)",
    re.IGNORECASE,
)
#: v5: a title that ends in "fixes" ("gpt-oss fusion/padding fixes") is a bug fix.
_FIX_TAIL_RE = re.compile(r"\bfix(es)?\s*$", re.IGNORECASE)


def without_names(text: str) -> str:
    """``text`` with mode names and kernel names that contain perf words blanked (v7)."""
    return KERNEL_NAME_RE.sub(" ", MODE_NAME_RE.sub(" ", text))


def _body(title: str) -> str:
    """The title without leading tags/prefixes and without mode or kernel names."""
    return without_names(_LEAD_RE.sub("", pr_title(title)))


def _kind_veto(title: str, body: str) -> str | None:
    """Vetoes that name the kind of work whatever perf words the title has: benchmark-only,
    logging, clean-ups of non-work objects, guards without an outcome word (v6)."""
    if _BENCHMARK_ONLY_RE.search(title):
        return "benchmark_only"
    if _LOGGING_RE.search(title):
        return "logging"
    if _CLEANUP_OBJECT_RE.search(title):
        return "cleanup"
    if (
        _GUARD_RE.search(pr_title(title))
        and not _OUTCOME_RE.search(body)
        and not re.search(r"\bby default\b", title, re.IGNORECASE)
    ):
        return "guard"
    return None


def _structure_veto(title: str, body: str, typed_perf: bool) -> str | None:
    """v8: the title's verb says what the work is: a change to the code itself
    (``non_work_verb``) or a new backend/option/mode (``feature_object``), with no outcome
    word to make it perf work; a ``[Perf]`` tag or ``perf:`` type keeps it."""
    if typed_perf:
        return None
    if (
        _NON_WORK_LEAD_RE.match(body)
        and not _OUTCOME_RE.search(body)
        and not _HOIST_RE.search(body)
    ):
        return "non_work_verb"
    if _FEATURE_OBJECT_RE.match(body) and not _STRONG_OUTCOME_RE.search(body):
        return "feature_object"
    return None


def _is_fix(title: str, body: str, tags: list[str], perf_tag: bool) -> bool:
    """A bug fix by its lead word, its tail ("… fixes") or a fix tag without a perf tag."""
    return bool(
        _FIX_LEAD_RE.match(title)
        or _FIX_LEAD_RE.match(body)
        or _FIX_TAIL_RE.search(pr_title(title))
        or (any(_FIX_TAG_RE.match(t) for t in tags) and not perf_tag)
    )


def veto_reason(title: str) -> str | None:
    """Why a title with a perf word is still not perf work, or None.

    Bug fixes ("[Bugfix] …", "fix …" after the tags) and feature support ("… support …")
    count only when the words outside tags and mode names say perf, or the title is typed
    ``perf:``; ``[benchmark]``-only titles and logging work never count.
    """
    tags = _TAG_RE.findall(title)
    body = _body(title)
    perf_tag = any(_PERF_TAG_RE.match(t) for t in tags)
    perf_prefix = _PERF_PREFIX_RE.match(title) is not None
    no_perf_word = PERF_WORD_RE.search(body.strip()) is None
    kind = _kind_veto(title, body) or _structure_veto(title, body, perf_tag or perf_prefix)
    if kind is not None:
        return kind
    fix_allowed = perf_prefix or FIX_PERF_WORD_RE.search(body) is not None
    if not fix_allowed and _is_fix(title, body, tags, perf_tag):
        return "bug_fix"
    if _CI_AFTER_TAGS_RE.search(title):
        return "ci"
    if not perf_tag and no_perf_word and _FEAT_LEAD_RE.search(title):
        return "feature"
    if not perf_tag and not perf_prefix and no_perf_word and _SUPPORT_RE.search(body):
        return "feature_support"
    if FIX_PERF_WORD_RE.search(body) is None and _REFACTOR_RE.search(title):
        return "refactor"
    if not perf_tag and no_perf_word and _PLUMBING_RE.search(pr_title(title)):
        return "plumbing"
    return None


def is_excluded_title(title: str) -> bool:
    """Build, CI, docs, tests, reverts and merges are never perf rows, whatever they say;
    nor are bug fixes, feature support, benchmark-only and logging titles (``veto_reason``)."""
    if EXCLUDE_RE.search(title):
        return True
    if WHEEL_RE.search(title) is not None and PERF_REGRESSION_RE.search(title) is None:
        return True
    return veto_reason(title) is not None


def match_title(title: str, rule: str = DEFAULT_RULE) -> TitleMatch | None:
    """The perf rule a subject satisfies under ``rule`` (``core`` or ``mid``), or None.

    Exclusions win over every positive signal ("Speed up the JIT compile" is build work).
    """
    if rule not in RULES:
        raise ValueError(f"unknown title rule {rule!r}; expected one of {RULES}")
    low = title.lower()
    if not any(k in low for k in _KEYWORDS):
        return None
    signal = without_names(title)
    m = CORE_RE.search(signal)
    match = TitleMatch("core", m.group(0)) if m else None
    if match is None and rule == "mid":
        m = MID_EXTRA_RE.search(signal)
        match = TitleMatch("mid", m.group(0)) if m else None
    if match is None or is_excluded_title(title):
        return None
    return match


def pr_number(subject: str) -> int | None:
    """The PR of a squash-merge subject: the last ``(#N)`` at its end (reverts carry two)."""
    m = PR_NUMBER_RE.search(subject)
    return int(m.group(1)) if m else None


def pr_title(subject: str) -> str:
    """The subject without its trailing `` (#N)``: the PR title as GitHub shows it."""
    return PR_NUMBER_RE.sub("", subject).rstrip()
