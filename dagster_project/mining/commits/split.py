"""Temporal train/test split of kernel_commits.

The newest ~10% of rows are test: that code is the least likely to sit in a model's
pretraining data, which is the point of the card's split. Two guarantees hold exactly:

* every test row is strictly newer (``authored_at``) than every train row — the split is
  one cut-off instant, test = ``authored_at >= cutoff``;
* no PR is in both splits — rows of one PR (or, without a PR number, of one commit) share
  a split. If a PR's rows straddle the first candidate cut-off, the cut-off moves back to
  that PR's oldest row, so the test share can grow a little above ``test_fraction``.
* no near-duplicate pair is in both splits — a row with ``duplicate_of`` (a reland or
  resubmit, ``reverts.duplicate_ids``) is one group with the row it repeats, so a reland
  in the newest tenth pulls the cut-off back to its first landing (the same rule as a
  straddling PR): both land in test rather than the answer sitting in train.

The split is global, not per repository, as on the card. A repository whose history ends
before the cut-off (the vLLM mirror stops on 2026-05-19 while SGLang and FlashInfer run to
2026-08) contributes **no test rows**: all its rows are train. That is the honest outcome of
a temporal split (its newest code is older than the others' test code); per-repo cut-offs
would put old vLLM code into "recent" test data. The cut-off is returned so the build can
record it.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

#: Version of the temporal train/test split. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "2"

#: The share of rows (newest first) in the test split: this rule's one home.
TEST_FRACTION = 0.10


def _group_key() -> pl.Expr:
    """One key per PR, or per commit when the subject has no PR number."""
    return (
        pl.when(pl.col("pr_number").is_not_null())
        .then(pl.concat_str([pl.col("repo"), pl.lit("#"), pl.col("pr_number").cast(pl.Utf8)]))
        .otherwise(pl.concat_str([pl.col("repo"), pl.lit("@"), pl.col("sha")]))
    )


def _merge_duplicate_groups(keyed: pl.DataFrame) -> pl.DataFrame:
    """``_g`` of every row joined with the ``_g`` of the row it is ``duplicate_of``
    (union-find over the links, so a chain of relands is one group)."""
    if "duplicate_of" not in keyed.columns:
        return keyed
    group_of = dict(keyed.select("id", "_g").iter_rows())
    parent: dict[str, str] = {}

    def find(g: str) -> str:
        while parent.get(g, g) != g:
            g = parent[g]
        return g

    for rid, dup in keyed.select("id", "duplicate_of").iter_rows():
        if dup is not None and dup in group_of:
            a, b = find(group_of[rid]), find(group_of[dup])
            if a != b:
                parent[max(a, b)] = min(a, b)
    if not parent:
        return keyed
    return keyed.with_columns(
        pl.col("_g").replace_strict({g: find(g) for g in set(group_of.values())})
    )


def assign_temporal_split(
    rows: pl.DataFrame, test_fraction: float = TEST_FRACTION
) -> tuple[pl.DataFrame, datetime | None]:
    """Add ``split`` ("train"/"test") to ``rows``; return them with the cut-off instant.

    ``rows`` needs ``repo``, ``sha``, ``pr_number`` and ``authored_at`` (and ``id`` with
    ``duplicate_of`` to keep near-duplicates together, when present). With no rows, or a
    ``test_fraction`` of 0, everything is train and the cut-off is None.
    """
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError("test_fraction must be in [0, 1)")
    n = rows.height
    n_test = round(n * test_fraction)
    if n == 0 or n_test == 0:
        return rows.with_columns(pl.lit("train").alias("split")), None
    times = rows["authored_at"].sort(descending=True)
    cutoff = times[n_test - 1]
    keyed = _merge_duplicate_groups(rows.with_columns(_group_key().alias("_g")))
    while True:
        spans = keyed.group_by("_g").agg(
            pl.col("authored_at").min().alias("lo"), pl.col("authored_at").max().alias("hi")
        )
        straddling = spans.filter((pl.col("lo") < cutoff) & (pl.col("hi") >= cutoff))
        if straddling.height == 0:
            break
        cutoff = straddling["lo"].min()
    out = keyed.with_columns(
        pl.when(pl.col("authored_at") >= cutoff)
        .then(pl.lit("test"))
        .otherwise(pl.lit("train"))
        .alias("split")
    ).drop("_g")
    return out, cutoff
