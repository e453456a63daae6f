"""Gains extraction: the document model and one module per block kind (deterministic
extractor, :mod:`.choose`), and one entry point for both extractors: ``extract_text``
(what ``kernelhouse gains extract`` exposes) and ``extract_pr_gains`` (what the
``pr_gains`` asset calls per PR).

Modules: :mod:`.document` (blocks and context), :mod:`.tables` (markdown/HTML/aligned
tables), :mod:`.aligned` (whitespace/pandas tables), :mod:`.records` (label/value runs and
benchmark output), :mod:`.prose` (sentences), :mod:`.candidate` (metadata rules),
:mod:`.vocab` (role and metric words), :mod:`.choose` (pairs from candidates).

Whatever the extractor, the same post-processing runs here: speedups are recomputed in
code (:func:`~dagster_project.gains.normalise.finalise`) and every pair is audited
against the PR text (:mod:`~dagster_project.gains.audit`), so the two extractors' rows
are comparable and neither can skip the audit.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from dagster_project.gains.audit import audit_all
from dagster_project.gains.extract.choose import EXTRACTOR_VERSION, extract_table
from dagster_project.gains.llm_extractor import LLMExtractor, LLMResult
from dagster_project.gains.normalise import finalise
from dagster_project.gains.schema import Measurement


def pr_text(title: str | None, body: str | None) -> str:
    """The text extractors read: title on the first line, body after it."""
    return f"{(title or '').strip()}\n{body or ''}"


def body_sha256(text: str | None) -> str:
    """Hex SHA-256 of a PR body (``None`` counts as empty), the re-extraction trigger."""
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()


@dataclass
class PRGains:
    """Extraction result for one PR, ready to persist."""

    measurements: list[Measurement]
    extractor: Literal["table", "llm"]
    extractor_version: str
    ok: bool = True
    error: str | None = None
    model_used: str | None = None
    cache_key: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    raw_reply: str | None = None

    def gains(self) -> list[dict[str, Any]]:
        """The card's ``gains`` list (12 fields per measurement)."""
        return [m.to_gain() for m in self.measurements]


def _post(measurements: list[Measurement], text: str, repo: str | None = None) -> list[Measurement]:
    return audit_all([finalise(m) for m in measurements], text, repo)


def extract_text(
    text: str,
    extractor: Literal["table", "llm"] = "table",
    llm: LLMExtractor | None = None,
) -> list[Measurement]:
    """Measurements in a PR text (first line title, rest body), audited, speedups computed.

    ``extractor="llm"`` needs an :class:`~dagster_project.gains.llm_extractor.LLMExtractor`
    (an OpenAI-compatible endpoint); a failed LLM extraction yields an empty list. Use
    :func:`extract_pr_gains` to also get the failure reason and token usage.
    """
    return extract_pr_gains(text, extractor=extractor, llm=llm).measurements


def extract_pr_gains(
    text: str,
    *,
    extractor: Literal["table", "llm"] = "table",
    llm: LLMExtractor | None = None,
    repo: str | None = None,
    pr_number: int | None = None,
) -> PRGains:
    """Extract, finalise and audit one PR; lineage fields are stamped on every row."""
    if extractor == "table":
        ms = _post(extract_table(text, repo), text, repo)
        result = PRGains(ms, "table", EXTRACTOR_VERSION)
    elif extractor == "llm":
        if llm is None:
            raise ValueError(
                "the llm extractor needs an OpenAI-compatible endpoint: "
                "set KERNELHOUSE_LLM_BASE_URL"
            )
        res: LLMResult = llm.extract(text, repo=repo, pr_number=pr_number)
        ms = _post(res.measurements, text, repo)
        result = PRGains(
            ms,
            "llm",
            res.prompt_version,
            ok=res.ok,
            error=res.error,
            model_used=res.model_used,
            cache_key=res.cache_key,
            usage=res.usage,
            raw_reply=res.raw_reply,
        )
    else:
        raise ValueError(f"unknown extractor {extractor!r}: use 'table' or 'llm'")
    for m in result.measurements:
        m.repo, m.pr_number = repo, pr_number
        m.extractor = result.extractor
        m.extractor_version = result.extractor_version
        m.model_used = result.model_used
    return result
