"""THE diff-reading perf filter (issue 41, 41e): a linear model over the commit's own diff.

Why it exists: five rounds of title rules (v4-v8) each looked better in sample than on the
next blind round (round 7: v8 P 0.883 / R 0.855), while two blind *readers*, who judged from
the file list and the diff, agree with each other at 0.98. So the evidence changes: this
model reads what the readers read. A commit becomes a set of binary features:

* ``t:`` the title's words and ``tag:`` its ``[tags]`` (the PR title, ``(#N)`` dropped);
* ``rule:`` / ``veto:`` the title rule's verdict (``core``, ``mid`` or ``none``) and its veto
  reason, so the model starts from the rule and learns where the diff overrules it;
* ``+:`` / ``-:`` identifier tokens of the lines the diff adds and removes in non-test,
  non-doc files (identifiers whole and split at ``_`` and case changes, lower-cased, plus a
  few kernel operators such as ``#pragma unroll`` and ``__syncthreads``);
* ``p:`` / ``ext:`` tokens and extensions of the changed paths;
* ``n:`` coarse sizes (files, added and removed lines in buckets; tests, docs, new files,
  tuned-config JSON touched; more lines removed than added).

The score is ``bias + sum(weights[f])`` over the commit's features (log-odds); a commit is
perf work when the score reaches ``threshold``. Weights, bias, threshold and the feature
groups in use live in ``perf_diffmodel.json`` beside this module, written by
``benchmarks/perf_filter_diffmodel.py`` (an L2 logistic regression fitted on labelled rounds
1-7; the groups, the regularisation and the threshold chosen by leave-one-round-out
cross-validation, precision first). Only that script writes the JSON; this module only reads
it, and ``DIFFMODEL_VERSION`` must equal the JSON's ``version``, so a re-fit that is not
versioned fails loudly.

Measured (``benchmarks/RESULTS.md``, issue 41 41e). Leave-one-round-out CV on rounds 1-7
(1,054 commits, in sample) chose ``rule`` + ``title`` + ``paths`` + ``sizes`` (C 0.1,
threshold +0.664: P 0.951 / R 0.881, v8 on the same rows P 0.947 / R 0.892): the added and
removed code tokens lowered recall at P 0.95 at every weighting tried, and without the title
rule's verdict the model fell to P 0.78 / R 0.82. Scored once on the blind round 8
(``benchmarks/title_round8/``): P 0.944 [0.849, 0.981] / R 0.864 [0.755, 0.930], against v8's
P 0.927 / R 0.864 on the same commits; targets (P 0.95 / R 0.90) not met.

Status: an evaluated alternative to title rule v8, not the miner's filter: one commit better
on round 8 is not a measurable gain, and it would cost a diff read for every kernel-touching
commit: on the 11,975 of the mirrors, 6-7 ms of ``git show`` plus 8-15 ms of features and
score each (about 3 minutes a full mine on 2 cores); it would keep 1,311 commits where v8
keeps 1,330 (4 added, 23 dropped).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from dagster_project.mining.commits.perf_filter import match_title, pr_title, veto_reason
from dagster_project.mining.git import GitRepo

#: Version of the feature extraction + the fitted weights (``perf_diffmodel.json``). It
#: continues the title rule's numbering: v9 is the first filter that reads the diff.
DIFFMODEL_VERSION = "9"
WEIGHTS_PATH = Path(__file__).with_name("perf_diffmodel.json")
#: At most this many bytes of one commit's diff are read (a vendored library or a
#: generated file would otherwise dominate the cost and the features).
MAX_DIFF_BYTES = 300_000
#: Longer identifiers are kept only as parts (hashes, generated names).
MAX_TOKEN_LEN = 40
#: Feature groups, by prefix.
GROUPS: dict[str, tuple[str, ...]] = {
    "title": ("t:", "tag:"),
    "rule": ("rule:", "veto:"),
    "diff": ("+:", "-:"),
    "paths": ("p:", "ext:"),
    "sizes": ("n:",),
}

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PART_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_KERNEL_OPS_RE = re.compile(
    r"#pragma\s+unroll|__syncthreads|__shfl\w*|<<<|__launch_bounds__|tl\.constexpr|asm\s+volatile"
)
_WORD_RE = re.compile(r"[a-z0-9]+")
_TAG_RE = re.compile(r"\[([^\]]{1,40})\]")
_TEST_PATH_RE = re.compile(r"(^|/)(tests?|testing)(/|$)|(^|/)test_[^/]*$|_test\.\w+$")
_DOC_PATH_RE = re.compile(r"(^|/)docs?(/|$)|\.(md|rst|txt|ipynb)$")
_CONFIG_JSON_RE = re.compile(r"configs?/.*\.json$")


@dataclass(frozen=True)
class Model:
    """The fitted model as ``perf_diffmodel.json`` stores it."""

    version: str
    bias: float
    threshold: float
    groups: tuple[str, ...]
    weights: dict[str, float]


def identifier_tokens(text: str) -> set[str]:
    """Lower-cased identifiers of ``text``, whole (up to ``MAX_TOKEN_LEN``) and split at
    underscores and case changes, plus kernel operators; single letters and numbers dropped."""
    out: set[str] = set()
    for ident in _IDENT_RE.findall(text):
        low = ident.lower()
        if 2 <= len(low) <= MAX_TOKEN_LEN and not low.strip("_").isdigit():
            out.add(low.strip("_") or low)
        for part in _PART_RE.findall(ident):
            if len(part) >= 2 and not part.isdigit():
                out.add(part.lower())
    out |= {re.sub(r"\s+", " ", m.group(0).lower()) for m in _KERNEL_OPS_RE.finditer(text)}
    return out


def _bucket(n: int) -> str:
    """0, 1, 2-3, 4-7, … (powers of two) as a short label."""
    if n <= 1:
        return str(n)
    lo = 2 ** int(math.log2(n))
    return f"{lo}-{2 * lo - 1}"


@dataclass
class _DiffScan:
    """What one pass over a unified diff collects."""

    paths: list[str]
    added: set[str]
    removed: set[str]
    n_added: int = 0
    n_removed: int = 0
    new_files: int = 0


def _scan(diff: str) -> _DiffScan:
    """Paths, added/removed tokens (test and doc files skipped) and line counts of a diff."""
    scan = _DiffScan(paths=[], added=set(), removed=set())
    skip = False
    for line in diff.split("\n"):
        if line.startswith("diff --git "):
            path = line.rsplit(" b/", 1)[-1]
            scan.paths.append(path)
            skip = bool(_TEST_PATH_RE.search(path) or _DOC_PATH_RE.search(path))
        elif line.startswith("new file mode"):
            scan.new_files += 1
        elif line.startswith(("+++", "---")):
            continue
        elif line.startswith("+"):
            scan.n_added += 1
            if not skip:
                scan.added |= identifier_tokens(line[1:])
        elif line.startswith("-"):
            scan.n_removed += 1
            if not skip:
                scan.removed |= identifier_tokens(line[1:])
    return scan


def _title_features(subject: str) -> set[str]:
    title = pr_title(subject).lower()
    out = {f"tag:{t.strip()}" for t in _TAG_RE.findall(title)}
    out |= {f"t:{w}" for w in _WORD_RE.findall(_TAG_RE.sub(" ", title)) if not w.isdigit()}
    match = match_title(subject)
    out.add(f"rule:{match.rule if match else 'none'}")
    veto = veto_reason(subject)
    if veto:
        out.add(f"veto:{veto}")
    return out


def _size_features(scan: _DiffScan) -> set[str]:
    paths = scan.paths
    out = {
        f"n:files:{_bucket(len(paths))}",
        f"n:added:{_bucket(scan.n_added)}",
        f"n:removed:{_bucket(scan.n_removed)}",
    }
    flags = {
        "n:tests": any(_TEST_PATH_RE.search(p) for p in paths),
        "n:docs": any(_DOC_PATH_RE.search(p) for p in paths),
        "n:new_file": scan.new_files > 0,
        "n:config_json": any(_CONFIG_JSON_RE.search(p) for p in paths),
        "n:net_removal": scan.n_removed > scan.n_added,
    }
    return out | {k for k, v in flags.items() if v}


def features(subject: str, diff: str) -> set[str]:
    """Every feature of one commit: its subject line and its unified diff (``git show``)."""
    scan = _scan(diff[:MAX_DIFF_BYTES])
    out = _title_features(subject) | _size_features(scan)
    out |= {f"+:{t}" for t in scan.added} | {f"-:{t}" for t in scan.removed}
    for path in scan.paths:
        stem, dot, ext = path.rpartition(".")
        if dot and "/" not in ext:
            out.add(f"ext:{ext.lower()}")
        out |= {f"p:{t}" for t in identifier_tokens(stem if dot else path)}
    return out


def in_groups(feats: Iterable[str], groups: Sequence[str]) -> set[str]:
    """The features of ``feats`` whose prefix belongs to one of ``groups``."""
    prefixes = tuple(p for g in groups for p in GROUPS[g])
    return {f for f in feats if f.startswith(prefixes)}


def load(path: Path = WEIGHTS_PATH) -> Model:
    """The fitted model; refuses a JSON whose version is not ``DIFFMODEL_VERSION``."""
    data: dict[str, Any] = json.loads(path.read_text())
    if data["version"] != DIFFMODEL_VERSION:
        raise ValueError(
            f"{path.name} holds diff model {data['version']}, code is {DIFFMODEL_VERSION}"
        )
    return Model(
        version=data["version"],
        bias=float(data["bias"]),
        threshold=float(data["threshold"]),
        groups=tuple(data["groups"]),
        weights={k: float(v) for k, v in data["weights"].items()},
    )


@cache
def shipped() -> Model:
    """The model shipped in the package (read once per process)."""
    return load()


def score(feats: Iterable[str], model: Model) -> float:
    """Log-odds that the commit is perf work."""
    return model.bias + sum(model.weights.get(f, 0.0) for f in in_groups(feats, model.groups))


def is_perf(subject: str, diff: str, model: Model | None = None) -> bool:
    """The filter's verdict on one commit."""
    m = model or shipped()
    return score(features(subject, diff), m) >= m.threshold


def read_diffs(repo: GitRepo, shas: Sequence[str], chunk: int = 200) -> dict[str, str]:
    """sha -> unified diff (``-U0``, no renames, each cut at ``MAX_DIFF_BYTES``), one ``git
    show`` per ``chunk`` commits: the per-commit cost the miner would pay."""
    out: dict[str, str] = {}
    for i in range(0, len(shas), chunk):
        part = list(shas[i : i + chunk])
        raw = repo.run(
            [
                "show",
                "--format=%x01%H",
                "-U0",
                "--no-renames",
                "--no-color",
                "--no-ext-diff",
                *part,
            ],
            config=("core.quotepath=false",),
        )
        for block in raw.split(b"\x01")[1:]:
            sha, _, body = block.partition(b"\n")
            out[sha.decode()] = body[:MAX_DIFF_BYTES].decode("utf-8", "replace")
    return out
