"""Does each rule of the deterministic gains extractor pay? (issue 40, "fewer rules")

    .venv/bin/python benchmarks/gains_rule_ablation.py [--sets fixtures,fresh4,...] [--json]
    .venv/bin/python benchmarks/gains_rule_ablation.py --list

A rule here is a function of ``dagster_project/gains/extract/`` (tables, records, prose,
aligned text tables, the table finder) that reads one layout or overrides one reading, and
whose "did not fire" answer is plain from its signature (``None``, an empty list, dict or
set, ``False``). It is measured by ablation, the one instrument that needs no tag in the
code path: for each rule the extractor runs once more with that function answering "not
here" (in every module that bound it, the audit included, so extraction and audit agree),
and the PR-by-PR difference against the full extractor is the rule's contribution:

* **fires**: PRs whose measurements change without the rule;
* **TP**: labels matched with the rule and not without it (lost when it goes);
* **FP**: predictions that match no label with the rule and are gone without it.

A rule pays when TP > FP on the pooled blind sets; one that fires on none, or costs more
false values than it adds true ones, is a removal candidate (RESULTS lists what was removed
and why). Matching is ``benchmarks/eval_extractors.py``'s: a pair matches a labelled pair
with equal baseline and optimized (relative 1e-6), a ratio-only claim a labelled one whose
stated speedup agrees within 1%, each label at most once.

Sets: ``fixtures`` (our own 38 texts in ``tests/fixtures/prs``: written for the unit tests,
in sample, never a score) and the retired blind sets of ``benchmarks/labelled/pr_devset``
(``main`` = ``prs.csv``, ``fresh`` … ``fresh11``), whose texts are a git-ignored cache a
fresh machine lacks (refill: ``fetch_texts.py --root …`` with ``GITHUB_TOKEN``, or search
excerpts checked by its sha256): a set without texts is reported as such and skipped. The list
of sets is fixed to retired sets: the held-out set of the round (``fresh12``) is never read
here, so measuring rules never spends a held-out scoring.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: ``--code DIR``: read the extractor from another tree (``git archive <rev> dagster_project``),
#: for the before / after figures of one change on the same texts
_CODE = sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv else str(ROOT)
sys.path.insert(0, _CODE)

from dagster_project.gains.extract import extract_pr_gains  # noqa: E402
from dagster_project.gains.schema import Measurement  # noqa: E402

DEVSET = ROOT / "benchmarks" / "labelled" / "pr_devset"
FIXTURES = ROOT / "tests" / "fixtures" / "prs"
#: the retired blind sets this script may read (never a set labelled after it)
BLIND_SETS = ("main", "fresh", *(f"fresh{i}" for i in range(2, 12)))
RULE_MODULES = ("tables", "records", "prose", "aligned", "choose")
#: functions that are the extractor's frame, not a rule about a layout
FRAME = {"candidates", "extract_table", "choose", "table_candidates", "classify", "collect_runs"}
NEUTRAL: dict[str, Callable[[], Any]] = {"None": lambda: None, "list": list, "dict": dict}


@dataclass
class Labelled:
    """One PR: its text (first line title) and labels, as plain values."""

    key: str
    text: str
    pairs: list[tuple[float, float]]
    ratios: list[float]


@dataclass
class Effect:
    called: int = 0
    fires: int = 0
    tp: int = 0
    fp: int = 0
    prs: list[str] = field(default_factory=list)


def _close(a: float | None, b: float | None, rel: float) -> bool:
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def score(ms: list[Measurement], pr: Labelled) -> tuple[int, int]:
    """(matched, false) predictions of one PR, matched greedily in predicted order."""
    pairs, ratios = list(pr.pairs), list(pr.ratios)
    tp = 0
    for m in ms:
        if m.baseline is not None and m.optimized is not None:
            hit = next(
                (
                    p
                    for p in pairs
                    if _close(p[0], m.baseline, 1e-6) and _close(p[1], m.optimized, 1e-6)
                ),
                None,
            )
            if hit is not None:
                pairs.remove(hit)
                tp += 1
        elif m.stated_speedup is not None:
            r = next((x for x in ratios if _close(x, m.stated_speedup, 0.01)), None)
            if r is not None:
                ratios.remove(r)
                tp += 1
    return tp, len(ms) - tp


def _fixture_set() -> list[Labelled]:
    labels = json.loads((FIXTURES / "labels.json").read_text())["fixtures"]
    return [
        Labelled(
            f"fixture:{name}",
            (FIXTURES / name).read_text(),
            [(p["baseline"], p["optimized"]) for p in lab.get("pairs", [])],
            [s["stated_speedup"] for s in lab.get("stated", [])],
        )
        for name, lab in labels.items()
    ]


def _devset_loader() -> Any:
    spec = importlib.util.spec_from_file_location("pr_devset", DEVSET / "fetch_texts.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pr_devset"] = mod
    spec.loader.exec_module(mod)
    return mod


def _blind_set(name: str) -> tuple[list[Labelled], int]:
    """(PRs with their text present, PRs in the set) of one retired blind set."""
    if name not in BLIND_SETS:
        raise SystemExit(f"{name}: not a retired blind set this script may read {BLIND_SETS}")
    devset = _devset_loader()
    root = DEVSET if name == "main" else DEVSET / name
    prs = devset.load_devset(root, require_texts=False)
    out = []
    for pr in prs:
        if pr.text is None:
            continue
        text = pr.text if not pr.truncated or pr.text.endswith("\n") else pr.text.rsplit("\n", 1)[0]
        out.append(
            Labelled(
                pr.key,
                "\n" + text,  # the labelled text is the body; no title was stored
                [(lab.baseline, lab.optimized) for lab in pr.labels if lab.kind == "pair"],
                [lab.stated_speedup for lab in pr.labels if lab.kind == "ratio_only"],
            )
        )
    return out, len(prs)


def rules() -> list[tuple[str, str]]:
    """(module, function) of every ablatable rule, in source order."""
    out = []
    for mod_name in RULE_MODULES:
        mod = importlib.import_module(f"dagster_project.gains.extract.{mod_name}")
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if fn.__module__ != mod.__name__ or name in FRAME:
                continue
            if _neutral(fn) is not None:
                out.append((mod_name, name))
    order = {
        (m, n): inspect.getsourcelines(
            getattr(importlib.import_module(f"dagster_project.gains.extract.{m}"), n)
        )[1]
        for m, n in out
    }
    return sorted(out, key=lambda mn: (RULE_MODULES.index(mn[0]), order[mn]))


def _neutral(fn: Callable[..., Any]) -> Callable[[], Any] | None:
    ann = str(inspect.signature(fn).return_annotation).replace(" ", "")
    if ann.endswith("|None") or ann.startswith("None|"):
        return NEUTRAL["None"]
    for prefix, make in (("list[", list), ("dict[", dict)):
        if ann.startswith(prefix):
            return make
    return None


@contextmanager
def without(mod_name: str, name: str) -> Iterator[None]:
    """The extractor (and the audit) with one rule answering "not here"."""
    mod = importlib.import_module(f"dagster_project.gains.extract.{mod_name}")
    original = getattr(mod, name)
    neutral = _neutral(original)
    assert neutral is not None

    def off(*_a: Any, **_k: Any) -> Any:
        return neutral()

    bound = [
        m
        for m in list(sys.modules.values())
        if getattr(m, "__name__", "").startswith("dagster_project.gains")
        and getattr(m, name, None) is original
    ]
    for m in bound:
        setattr(m, name, off)
    try:
        yield
    finally:
        for m in bound:
            setattr(m, name, original)


@contextmanager
def traced(names: list[tuple[str, str]], calls: dict[str, set[str]], current: list[str]):  # noqa: ANN201
    """Every rule wrapped to note the PR (``current[0]``) it was called for."""
    patched = []
    for mod_name, name in names:
        mod = importlib.import_module(f"dagster_project.gains.extract.{mod_name}")
        original = getattr(mod, name)
        key = f"{mod_name}.{name}"

        def wrap(*a: Any, _f: Any = original, _k: str = key, **k: Any) -> Any:
            calls.setdefault(_k, set()).add(current[0])
            return _f(*a, **k)

        for m in list(sys.modules.values()):
            if getattr(m, "__name__", "").startswith("dagster_project.gains") and (
                getattr(m, name, None) is original
            ):
                setattr(m, name, wrap)
                patched.append((m, name, original))
    try:
        yield
    finally:
        for m, name, original in patched:
            setattr(m, name, original)


def _readings(prs: list[Labelled], calls: dict[str, set[str]]) -> dict[str, list[Measurement]]:
    current = [""]
    out = {}
    with traced(rules(), calls, current):
        for pr in prs:
            current[0] = pr.key
            out[pr.key] = extract_pr_gains(pr.text).measurements
    return out


def _sig(ms: list[Measurement]) -> list[tuple[Any, ...]]:
    return [(m.baseline, m.optimized, m.stated_speedup, m.metric) for m in ms]


def measure(
    prs: list[Labelled], *, ablate: bool = True
) -> tuple[dict[str, Effect], dict[str, tuple[int, int]]]:
    """Each rule's effect over ``prs`` and the full extractor's (matched, false) per PR."""
    calls: dict[str, set[str]] = {}
    full = _readings(prs, calls)
    base = {pr.key: score(full[pr.key], pr) for pr in prs}
    effects: dict[str, Effect] = {}
    for mod_name, name in rules() if ablate else []:
        called = calls.get(f"{mod_name}.{name}", set())
        e = Effect(called=len(called))
        with without(mod_name, name):
            for pr in (p for p in prs if p.key in called):
                ms = extract_pr_gains(pr.text).measurements
                if _sig(ms) == _sig(full[pr.key]):
                    continue
                tp, fp = score(ms, pr)
                e.fires += 1
                e.tp += base[pr.key][0] - tp
                e.fp += base[pr.key][1] - fp
                e.prs.append(pr.key)
        effects[f"{mod_name}.{name}"] = e
    return effects, base


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="fixtures," + ",".join(BLIND_SETS))
    ap.add_argument("--list", action="store_true", help="list the ablatable rules and exit")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--code", help="tree to import dagster_project from (before / after)")
    ap.add_argument("--score-only", action="store_true", help="the full extractor's score only")
    args = ap.parse_args(argv)
    if args.list:
        for m, n in rules():
            print(f"{m}.{n}")
        return 0
    report: dict[str, Any] = {"sets": {}, "rules": {}}
    pooled: list[Labelled] = []
    by_set: dict[str, list[Labelled]] = {}
    for name in [s for s in args.sets.split(",") if s]:
        if name == "fixtures":
            prs, n = _fixture_set(), len(_fixture_set())
        else:
            prs, n = _blind_set(name)
        report["sets"][name] = {"prs": n, "with_text": len(prs)}
        by_set[name] = prs
        pooled.extend(prs)
    t0 = time.perf_counter()
    effects, base = measure(pooled, ablate=not args.score_only)
    tp, fp = sum(t for t, _ in base.values()), sum(f for _, f in base.values())
    report["full"] = {"prs": len(pooled), "matched": tp, "false": fp}
    for name, prs_of in by_set.items():
        m = sum(base[p.key][0] for p in prs_of)
        f = sum(base[p.key][1] for p in prs_of)
        n = sum(len(p.pairs) + len(p.ratios) for p in prs_of)
        report["sets"][name].update(labels=n, matched=m, false=f)
    report["rules"] = {k: vars(v) for k, v in effects.items()}
    report["seconds"] = round(time.perf_counter() - t0, 1)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for name, s in report["sets"].items():
        print(
            f"{name:9} {s['with_text']:4} of {s['prs']:4} PRs with text: {s['labels']} labels, "
            f"matched {s['matched']}, false {s['false']}"
        )
    print(f"full extractor: {len(pooled)} PRs, matched {tp}, false {fp}")
    print(f"{'rule':50} {'called':>6} {'fires':>5} {'TP':>4} {'FP':>4}  verdict")
    for k, e in effects.items():
        verdict = "never fired" if not e.fires else ("pays" if e.tp > e.fp else "does not pay")
        print(f"{k:50} {e.called:6} {e.fires:5} {e.tp:4} {e.fp:4}  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
