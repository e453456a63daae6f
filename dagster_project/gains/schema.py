"""The shape of one benchmark measurement extracted from a PR description.

The kernel-opt-rl card fixes the public format of ``gains`` / ``config_pr_gains``: a JSON
list of ``{scope, hardware, model, shape, batch_size, metric, unit, higher_is_better,
baseline, optimized, stated_speedup, speedup}``. :class:`Measurement` carries exactly those
fields plus lineage (which PR, which extractor and model) and the verbatim-audit flags;
:meth:`Measurement.to_gain` produces the card's dict, :meth:`Measurement.to_row` the lake
row of ``derived.pr_gains``.

``LLM_OUTPUT_SCHEMA`` is the JSON Schema the LLM reply must satisfy. It is deliberately a
*different* shape from the stored measurement: the model copies values as the strings it
sees (no ``speedup`` field at all), and code parses and computes everything else, so a
model can never smuggle a computed number into the dataset unflagged.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from jsonschema import Draft202012Validator

Scope = Literal["kernel", "e2e"]
ExtractorName = Literal["table", "llm"]

#: Field order of one entry of the card's ``gains`` list.
GAIN_FIELDS: tuple[str, ...] = (
    "scope",
    "hardware",
    "model",
    "shape",
    "batch_size",
    "metric",
    "unit",
    "higher_is_better",
    "baseline",
    "optimized",
    "stated_speedup",
    "speedup",
)


@dataclass(slots=True)
class Measurement:
    """One documented measurement: a baseline/optimized pair or a stated ratio.

    ``speedup`` is always computed in code (see :mod:`.normalise`), normalised so that a
    value above 1 means the PR is better. ``stated_speedup`` is the ratio the PR states:
    the only value of a ratio-only claim, or an explicit multiplicative ratio written
    beside a pair (kept next to it, never instead of it).

    Audit flags are ``None`` until :func:`dagster_project.gains.audit.audit_measurement`
    has run; afterwards ``audit_pass`` is set for every measurement, pairs and stated
    ratios alike, and only audited measurements feed speedup columns.
    """

    scope: Scope
    metric: str
    baseline: float | None = None
    optimized: float | None = None
    stated_speedup: float | None = None
    speedup: float | None = None
    unit: str | None = None
    higher_is_better: bool | None = None
    hardware: str | None = None
    model: str | None = None
    shape: str | None = None
    batch_size: int | None = None
    # lineage
    repo: str | None = None
    pr_number: int | None = None
    extractor: ExtractorName | None = None
    extractor_version: str | None = None
    model_used: str | None = None
    #: the ratio/percentage as written ("1.41x", "~10% gain"), when one was stated
    stated_text: str | None = None
    #: the header/label naming each side ("main", "this PR", "torch", "triton")
    baseline_label: str | None = None
    optimized_label: str | None = None
    #: the structure both values came from: "table:row", "table:rows", "records", "sentence"…
    structure: str | None = None
    #: the row / record / sentence text the values were read from (trimmed, for review)
    evidence: str | None = None
    # audit (see dagster_project.gains.audit): every flag plain, the verdict and its reason
    baseline_verbatim: bool | None = None
    optimized_verbatim: bool | None = None
    #: both values sit in one row/record/sentence (or two role-labelled records of one
    #: comparison), baseline under a baseline role and optimized under an optimized role
    same_structure: bool | None = None
    #: the stated ratio's text appears verbatim in the PR
    stated_verbatim: bool | None = None
    #: a stated ratio beside a pair agrees with the pair within 5% (None: nothing to compare)
    stated_agrees: bool | None = None
    audit_pass: bool | None = None
    #: why the audit failed ("" when it passed)
    audit_reason: str | None = None
    #: which layout produced it (``table:columns``, ``runs``, ``prose:stated``, ``llm``…);
    #: kept in lake rows for debugging, never in the card's ``gains``
    source: str | None = field(default=None, compare=False)
    # publication policy (see dagster_project.gains.policy), set after the audit
    #: the structure the audit found the values in (``pair:table:roles``, ``ratio:prose``…),
    #: the same for both extractors because the audit locates them, not the extractor
    evidence_class: str | None = None
    #: how often measurements of this evidence class were right on the development sets
    confidence: float | None = None
    #: the policy's verdict: only published measurements reach dataset columns and medians
    published: bool | None = None
    #: why a measurement was not published ("" when it was)
    withheld_reason: str | None = None

    @property
    def is_pair(self) -> bool:
        """True when both baseline and optimized values are present."""
        return self.baseline is not None and self.optimized is not None

    @property
    def documented_speedup(self) -> float | None:
        """The speedup to use downstream: computed from the pair, else the stated ratio."""
        return self.speedup if self.speedup is not None else self.stated_speedup

    @property
    def usable_speedup(self) -> float | None:
        """:attr:`documented_speedup` if the measurement passed the audit and was not withheld by
        the publication policy, else ``None``.

        The one rule for every derived speedup column (kernel_speedup, e2e_speedup,
        speedup_vs_default): an unaudited or audit-failed value never feeds them.
        """
        if self.audit_pass is not True or self.published is False:
            return None  # a withheld measurement (publication policy) never feeds them either
        return self.documented_speedup

    def to_gain(self) -> dict[str, Any]:
        """The card's ``gains`` entry (exactly :data:`GAIN_FIELDS`, in order)."""
        return {name: getattr(self, name) for name in GAIN_FIELDS}

    def to_row(self) -> dict[str, Any]:
        """Every field, for ``derived.pr_gains``."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        """Rebuild from :meth:`to_row`/:meth:`to_gain` output; unknown keys are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


#: JSON Schema for the LLM reply. ``strict``-mode compatible (every property required,
#: nullable via type unions, no additional properties) so OpenAI-style structured output
#: can enforce it server-side where supported; :func:`validate_llm_output` enforces it
#: client-side everywhere (with ``jsonschema``).
LLM_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["measurements"],
    "properties": {
        "measurements": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": [
                    "scope",
                    "hardware",
                    "model",
                    "shape",
                    "batch_size",
                    "metric",
                    "unit",
                    "higher_is_better",
                    "baseline",
                    "optimized",
                    "stated_speedup",
                ],
                "properties": {
                    "scope": {"type": "string", "enum": ["kernel", "e2e"]},
                    "hardware": {"type": ["string", "null"]},
                    "model": {"type": ["string", "null"]},
                    "shape": {"type": ["string", "null"]},
                    "batch_size": {"type": ["string", "integer", "null"]},
                    "metric": {"type": "string"},
                    "unit": {"type": ["string", "null"]},
                    "higher_is_better": {"type": ["boolean", "null"]},
                    "baseline": {"type": ["string", "number", "null"]},
                    "optimized": {"type": ["string", "number", "null"]},
                    "stated_speedup": {"type": ["string", "number", "null"]},
                },
            },
        }
    },
}


def _json_path(path: str, parts: Any) -> str:
    out = path
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


#: Order of a value's own errors (as before: its type, its enum, then its keys).
_KEYWORD_ORDER = {"type": 0, "enum": 1, "required": 2, "additionalProperties": 3}


@functools.lru_cache(maxsize=16)
def _validator(schema_json: str) -> Draft202012Validator:
    schema = json.loads(schema_json)
    Draft202012Validator.check_schema(schema)  # a broken schema is our bug: say so loudly
    return Draft202012Validator(schema)


def validate_json(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Errors of ``value`` against ``schema`` (JSON Schema 2020-12), one line per problem.

    Validation is ``jsonschema``'s; only the wording is ours, so that each line names the
    field by its JSON path (``$.measurements[0].scope: 'gpu' not in ['kernel', 'e2e']``,
    ``$.measurements[0]: missing 'metric'``, ``$: unexpected 'extra'``,
    ``$.measurements[0].higher_is_better: expected boolean|null, got int``). A value of
    the wrong type reports only that (not also its enum). ``True`` is not a JSON integer.
    """
    validator = _validator(json.dumps(schema, sort_keys=True))
    found: list[tuple[str, int, str]] = []
    mistyped: set[str] = set()
    for err in validator.iter_errors(value):
        where = _json_path(path, err.absolute_path)
        kind = str(err.validator)
        inst = err.instance
        if kind == "type":
            types = err.validator_value
            allowed = [types] if isinstance(types, str) else list(types)
            mistyped.add(where)
            found.append(
                (where, 0, f"{where}: expected {'|'.join(allowed)}, got {type(inst).__name__}")
            )
        elif kind == "enum":
            found.append((where, 1, f"{where}: {inst!r} not in {err.validator_value}"))
        elif kind == "required" and isinstance(inst, dict):
            found.extend(
                (where, 2, f"{where}: missing {k!r}") for k in err.validator_value if k not in inst
            )
        elif kind == "additionalProperties" and isinstance(inst, dict):
            props = err.schema.get("properties", {}) if isinstance(err.schema, dict) else {}
            found.extend((where, 3, f"{where}: unexpected {k!r}") for k in inst if k not in props)
        else:
            found.append((where, _KEYWORD_ORDER.get(kind, 9), f"{where}: {err.message}"))
    out: list[str] = []
    for where, rank, message in sorted(found, key=lambda e: (e[0], e[1])):
        if rank > 0 and where in mistyped:
            continue
        if message not in out:
            out.append(message)
    return out


def validate_llm_output(value: Any) -> list[str]:
    """Errors of a parsed LLM reply against :data:`LLM_OUTPUT_SCHEMA` (empty = valid)."""
    return validate_json(value, LLM_OUTPUT_SCHEMA)
