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

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

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
        """:attr:`documented_speedup` if the measurement passed the audit, else ``None``.

        The one rule for every derived speedup column (kernel_speedup, e2e_speedup,
        speedup_vs_default): an unaudited or audit-failed value never feeds them.
        """
        return self.documented_speedup if self.audit_pass is True else None

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
#: client-side everywhere.
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

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _type_ok(value: Any, expected: str) -> bool:
    # bool is an int in Python but not a JSON number/integer
    if expected in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _JSON_TYPES[expected])


def validate_json(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Errors of ``value`` against the JSON-Schema subset used in this package.

    Supports ``type`` (incl. unions), ``enum``, ``required``, ``properties``,
    ``additionalProperties: false`` and ``items``, which is all :data:`LLM_OUTPUT_SCHEMA`
    uses. A dependency-free validator keeps the domain package's imports to what
    ``pyproject.toml`` already declares.
    """
    errors: list[str] = []
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else list(types)
        if not any(_type_ok(value, t) for t in allowed):
            return [f"{path}: expected {'|'.join(allowed)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: missing {key!r}")
        if schema.get("additionalProperties") is False:
            errors.extend(f"{path}: unexpected {k!r}" for k in value if k not in props)
        for key, sub in props.items():
            if key in value:
                errors.extend(validate_json(value[key], sub, f"{path}.{key}"))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors.extend(validate_json(item, schema["items"], f"{path}[{i}]"))
    return errors


def validate_llm_output(value: Any) -> list[str]:
    """Errors of a parsed LLM reply against :data:`LLM_OUTPUT_SCHEMA` (empty = valid)."""
    return validate_json(value, LLM_OUTPUT_SCHEMA)
