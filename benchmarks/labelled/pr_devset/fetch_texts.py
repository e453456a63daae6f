"""Refill and check the git-ignored text cache of the real-PR development set.

Why this exists: the development set (issue 17) is made of real vLLM, SGLang and FlashInfer
pull-request descriptions. Those texts are third-party, so they are never committed; only
``prs.csv`` (which PR, how many characters of its body were labelled, and the sha256 of that
prefix) and ``labels.jsonl`` (the measurements we read in it) are. This script brings the texts
back on a fresh clone and proves they are the very prefixes the labels were made on:

    # fetch bodies, cut, verify:
    GITHUB_TOKEN=... python benchmarks/labelled/pr_devset/fetch_texts.py
    python benchmarks/labelled/pr_devset/fetch_texts.py --check            # offline: verify texts/

A fetched body is normalised (``\\r\\n`` -> ``\\n``), cut to ``n_chars`` and hashed; a mismatch
(the author edited the description since, or the labelled text came from a search excerpt that
differs in whitespace) is reported and the file is not overwritten, so a good cache is never
replaced by a text the labels do not describe.

It is also the loader: :func:`load_devset` returns every PR with its text and labels, for
``benchmarks/eval_extractors.py``. Import it by path (``benchmarks`` is not a package)::

    spec = importlib.util.spec_from_file_location(
        "pr_devset", "benchmarks/labelled/pr_devset/fetch_texts.py"
    )
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_ROOT = Path(__file__).resolve().parent
SHORT_NAMES: dict[str, str] = {
    "vllm-project/vllm": "vllm",
    "sgl-project/sglang": "sglang",
    "flashinfer-ai/flashinfer": "flashinfer",
}
#: folds an extractor author may read: all five since 2026-12-01. Folds 3-4 were the held-out
#: folds of extractor 2.0; their aggregate score was printed five times while it was written, so
#: they were retired into development (LABELLING.md, "Retired held folds"). The held-out set is
#: now the separate ``fresh/`` folder, scored once per round.
DEV_FOLDS: frozenset[int] = frozenset({0, 1, 2, 3, 4})
#: the former held folds, kept for the record (results quoted "held" before 2026-12-01 mean these)
RETIRED_HELD_FOLDS: frozenset[int] = frozenset({3, 4})
HELD_FOLDS: frozenset[int] = frozenset()
N_FOLDS = 5
#: the held-out set of extractor 2.1 (``split=fresh``), retired into development for 2.2
#: (LABELLING.md, "Retired fresh set"): ``load_devset(FRESH_ROOT)``
FRESH_ROOT = Path(__file__).resolve().parent / "fresh"
#: the held-out set of extractor 2.2 (``split=fresh2``), scored once, then retired into
#: development for 2.3 (LABELLING.md, "Retired fresh sets")
FRESH2_ROOT = Path(__file__).resolve().parent / "fresh2"
#: the held-out set of extractor 2.3 (``split=fresh3``), scored once, then retired into
#: development for 2.4
FRESH3_ROOT = Path(__file__).resolve().parent / "fresh3"
#: the held-out set of extractor 2.4 (``split=fresh4``), scored once, then retired into
#: development for 2.5
FRESH4_ROOT = Path(__file__).resolve().parent / "fresh4"
#: the held-out set of extractor 2.5 (``split=fresh5``), scored once, then retired into
#: development for 2.6
FRESH5_ROOT = Path(__file__).resolve().parent / "fresh5"
#: the held-out set of extractor 2.6 (``split=fresh6``), scored once, then retired into
#: development for 2.7
FRESH6_ROOT = Path(__file__).resolve().parent / "fresh6"
#: the held-out set of extractor 2.7 (``split=fresh7``), scored once, then retired into
#: development for 2.8
FRESH7_ROOT = Path(__file__).resolve().parent / "fresh7"
#: the held-out set of extractor 2.8 (``split=fresh8``), scored once, then retired into
#: development for 2.9
FRESH8_ROOT = Path(__file__).resolve().parent / "fresh8"
#: the held-out set of extractor 2.9 (``split=fresh9``), scored once, then retired into
#: development for 2.10
FRESH9_ROOT = Path(__file__).resolve().parent / "fresh9"
#: the held-out set of extractor 2.10 (``split=fresh10``), scored once, then retired into
#: development for issue 40
FRESH10_ROOT = Path(__file__).resolve().parent / "fresh10"
#: the held-out set of issue 40's first part (``split=fresh11``: publication policy, per-PR
#: scoring), scored once (``scorings.jsonl``), then retired into development for 40d
FRESH11_ROOT = Path(__file__).resolve().parent / "fresh11"
#: the held-out set of issue 40d (``split=fresh12``: fewer rules), scored once at its end
#: (``eval_extractors.py --held``, recorded in ``scorings.jsonl``)
HELD_ROOT = Path(__file__).resolve().parent / "fresh12"


class DevsetError(ValueError):
    """A devset file is missing or does not match ``prs.csv``; the message names the file."""


@dataclass(frozen=True)
class DevLabel:
    """One labelled measurement (one line of ``labels.jsonl``)."""

    repo: str
    number: int
    kind: str  # "pair" | "ratio_only"
    metric: str
    unit: str | None
    higher_is_better: bool | None
    baseline: float | None
    optimized: float | None
    baseline_raw: str | None
    optimized_raw: str | None
    speedup: float | None
    stated_speedup: float | None
    stated_raw: str | None
    scope: str  # "kernel" | "e2e"
    batch_size: int | None
    shape: str | None
    hardware: str | None
    model: str | None
    baseline_label: str | None
    optimized_label: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DevLabel:
        return cls(**{name: data.get(name) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class DevPR:
    """One PR of the set: its ``prs.csv`` row, its labelled text and its labels."""

    repo: str
    number: int
    url: str
    kind: str  # "config" | "kernel" | "e2e" | "negative"
    layouts: tuple[str, ...]
    fold: int
    # "dev" | "fresh" … "fresh11" (retired held-out sets) | "fresh12" (held out); "held" was
    # folds 3-4
    split: str
    truncated: bool
    n_chars: int
    sha256: str
    text: str | None
    labels: tuple[DevLabel, ...]

    @property
    def key(self) -> str:
        return f"{self.repo}#{self.number}"


def fold_of(repo: str, number: int) -> int:
    """The fold of a PR: ``int(sha256("owner/name#N"), 16) % 5`` (fixed, so folds never move)."""
    digest = hashlib.sha256(f"{repo}#{number}".encode()).hexdigest()
    return int(digest, 16) % N_FOLDS


def text_path(root: Path, repo: str, number: int) -> Path:
    """Where the cached text of a PR lives: ``texts/<short repo>-<number>.md``."""
    return root / "texts" / f"{SHORT_NAMES.get(repo, repo.replace('/', '_'))}-{number}.md"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def loose_form(text: str) -> str:
    """``text`` with line endings unified, blank runs collapsed and line ends stripped.

    The labelled texts came from search excerpts; a body fetched from GitHub may differ from
    them in invisible whitespace only (``\\r\\n``, trailing blanks, tabs). The labels are
    values, not offsets, so such a body still carries the same measurements: ``prs.csv`` keeps
    ``sha256_loose``/``n_chars_loose`` of this form to accept it.
    """
    lines = normalise_body(text).split("\n")
    return "\n".join(re.sub(r"[ \t]+", " ", line).rstrip() for line in lines)


def text_matches(text: str, row: dict[str, Any]) -> bool:
    """Whether ``text`` is the labelled text of ``row``, exactly or up to whitespace."""
    if sha256_text(text) == row["sha256"]:
        return True
    return bool(row.get("sha256_loose")) and sha256_text(loose_form(text)) == row["sha256_loose"]


def read_prs(root: Path) -> list[dict[str, Any]]:
    """Rows of ``prs.csv`` with typed fields; raises :class:`DevsetError` naming the file."""
    path = root / "prs.csv"
    if not path.is_file():
        raise DevsetError(f"{path}: missing")
    rows: list[dict[str, Any]] = []
    with path.open(newline="", encoding="utf-8") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            try:
                rows.append(
                    {
                        **row,
                        "number": int(row["number"]),
                        "fold": int(row["fold"]),
                        "n_chars": int(row["n_chars"]),
                        "n_chars_loose": int(row.get("n_chars_loose") or 0),
                        "truncated": row["truncated"] == "true",
                        "layouts": tuple(x for x in row["layouts"].split(";") if x),
                    }
                )
            except (KeyError, ValueError) as exc:
                raise DevsetError(f"{path}:{line}: malformed row ({exc})") from exc
    return rows


def read_labels(root: Path) -> list[DevLabel]:
    """Lines of ``labels.jsonl``; raises :class:`DevsetError` naming file and line."""
    path = root / "labels.jsonl"
    if not path.is_file():
        raise DevsetError(f"{path}: missing")
    labels: list[DevLabel] = []
    for line, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            labels.append(DevLabel.from_json(json.loads(raw)))
        except (json.JSONDecodeError, TypeError) as exc:
            raise DevsetError(f"{path}:{line}: malformed label ({exc})") from exc
    return labels


def load_devset(
    root: Path = DEFAULT_ROOT,
    *,
    folds: Iterable[int] | None = None,
    require_texts: bool = True,
) -> list[DevPR]:
    """Every PR of the set (optionally only those in ``folds``) with its text and labels.

    With ``require_texts`` a missing text raises :class:`DevsetError` naming the file and the
    command that refills it, and a text whose sha256 differs from ``prs.csv`` raises too (the
    labels would not describe it). With ``require_texts=False`` missing texts give
    ``text=None`` (enough for checks on the committed files alone).
    """
    root = Path(root)
    wanted = set(folds) if folds is not None else None
    by_pr: dict[tuple[str, int], list[DevLabel]] = {}
    for label in read_labels(root):
        by_pr.setdefault((label.repo, label.number), []).append(label)
    out: list[DevPR] = []
    for row in read_prs(root):
        if wanted is not None and row["fold"] not in wanted:
            continue
        path = text_path(root, row["repo"], row["number"])
        text: str | None = None
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            if not text_matches(text, row):
                raise DevsetError(
                    f"{path}: sha256 does not match prs.csv (re-run "
                    "benchmarks/labelled/pr_devset/fetch_texts.py, or the labels are for another "
                    "text)"
                )
        elif require_texts:
            raise DevsetError(
                f"{path}: text missing; fill the cache with "
                "`GITHUB_TOKEN=... python benchmarks/labelled/pr_devset/fetch_texts.py`"
            )
        out.append(
            DevPR(
                repo=row["repo"],
                number=row["number"],
                url=row["url"],
                kind=row["kind"],
                layouts=row["layouts"],
                fold=row["fold"],
                split=row["split"],
                truncated=row["truncated"],
                n_chars=row["n_chars"],
                sha256=row["sha256"],
                text=text,
                labels=tuple(by_pr.get((row["repo"], row["number"]), ())),
            )
        )
    return out


def normalise_body(body: str | None) -> str:
    """A PR body as the labels saw it: ``\\r\\n``/``\\r`` line endings turned into ``\\n``."""
    return (body or "").replace("\r\n", "\n").replace("\r", "\n")


def check_cache(root: Path) -> list[str]:
    """Problems of the local cache against ``prs.csv`` (empty list: all present and matching)."""
    problems: list[str] = []
    for row in read_prs(root):
        path = text_path(root, row["repo"], row["number"])
        if not path.is_file():
            problems.append(f"{path}: missing")
            continue
        text = path.read_text(encoding="utf-8")
        if not text_matches(text, row):
            problems.append(
                f"{path}: {len(text)} chars, sha256 matches neither the exact nor the loose form"
            )
    return problems


def fetch(
    root: Path, token: str, *, overwrite: bool = False, base_url: str = "https://api.github.com"
) -> list[str]:
    """Fetch each PR body with PyGithub, cut it to ``n_chars``, verify, write; return problems.

    A text is written only when it matches ``prs.csv`` (exactly, or up to whitespace); anything
    else is reported and leaves the cache as it was. Problems name the PR, never the token.
    """
    from github import Auth, Github, GithubException

    gh = Github(auth=Auth.Token(token), base_url=base_url.rstrip("/"), retry=None)
    problems: list[str] = []
    repos: dict[str, Any] = {}
    for row in read_prs(root):
        path = text_path(root, row["repo"], row["number"])
        if path.is_file() and not overwrite and text_matches(path.read_text("utf-8"), row):
            continue
        try:
            repo = repos.setdefault(row["repo"], gh.get_repo(row["repo"], lazy=True))
            body = normalise_body(repo.get_pull(row["number"]).body)
        except GithubException as exc:
            problems.append(f"{row['repo']}#{row['number']}: GitHub error {exc.status}")
            continue
        text = body[: row["n_chars"]]
        if sha256_text(text) != row["sha256"] and row["n_chars_loose"]:
            # same measurements, different invisible whitespace: keep the loose form
            text = loose_form(body)[: row["n_chars_loose"]]
        if not text_matches(text, row):
            problems.append(
                f"{row['repo']}#{row['number']}: fetched body does not match prs.csv "
                f"(got {len(text)} of {row['n_chars']} chars); {path} left as it was"
            )
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--check", action="store_true", help="verify texts/ offline; no network")
    parser.add_argument(
        "--overwrite", action="store_true", help="re-fetch texts that already match"
    )
    parser.add_argument("--base-url", default="https://api.github.com", help="GitHub REST API root")
    args = parser.parse_args(argv)
    if args.check:
        problems = check_cache(args.root)
    else:
        token = os.environ.get("GITHUB_TOKEN")
        if not token:
            print(
                "GITHUB_TOKEN is not set (needed to fetch PR bodies); try --check", file=sys.stderr
            )
            return 2
        problems = fetch(args.root, token, overwrite=args.overwrite, base_url=args.base_url)
    for problem in problems:
        print(problem)
    total = len(read_prs(args.root))
    print(f"{total - len(problems)} of {total} texts ok", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
