"""Declared schemas for the Hub: an Arrow schema as a card's ``dataset_info.features``.

Why declare it: without ``dataset_info``, ``datasets`` and the Hub viewer infer each
config's schema from the first file they read and then cast every later file to it. Any
column whose type depends on the rows (a field that is null in the whole first file, a
nested object whose keys vary by op) then fails on a later file. With the features in the
card, every file is cast to the same declared schema, whatever its size or its first rows.

Why this is written here instead of calling ``datasets.Features.from_arrow_schema``:
``datasets`` is a large optional dependency of users, not of the build; the mapping for
the types our queries produce (integers, floats, booleans, strings, timestamps, structs
and lists of them) is twenty lines, and ``tests/unit/publish/test_features.py`` checks
it against ``datasets``' own conversion. Strings are always ``string`` (a JSON reader never
yields ``large_string``); a type outside that set is refused with its column's name rather
than guessed.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .report import ExportError

__all__ = ["dataset_info", "features_yaml"]

_FLOATS = {"double": "float64", "float": "float32", "halffloat": "float16"}


def _dtype(t: pa.DataType, where: str) -> Any:
    """The YAML form of one type: a dtype string, a struct's field list, or a list dict."""
    if pa.types.is_struct(t):
        return [{"name": f.name, **_named(f.type, f"{where}.{f.name}")} for f in t]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"list": _dtype(t.value_type, f"{where}[]")}
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_floating(t):
        return _FLOATS[str(t)]  # Arrow says "double", datasets "float64"
    if pa.types.is_integer(t):
        return str(t)  # int64, uint8: the same names in both
    if pa.types.is_date(t):
        return "date32" if pa.types.is_date32(t) else "date64"
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}" + (f", tz={t.tz}]" if t.tz else "]")
    if pa.types.is_null(t):
        return "null"
    raise ExportError(f"column {where}: Arrow type {t} has no declared dataset feature")


def _named(t: pa.DataType, where: str) -> dict[str, Any]:
    form = _dtype(t, where)
    if isinstance(form, str):
        return {"dtype": form}
    if isinstance(form, list):
        return {"struct": form}
    return form  # {"list": ...}


def features_yaml(schema: pa.Schema) -> list[dict[str, Any]]:
    """``schema`` in the card's YAML form (what ``datasets.Features._to_yaml_list`` writes)."""
    return [{"name": f.name, **_named(f.type, f.name)} for f in schema]


def dataset_info(config: str, schema: pa.Schema) -> dict[str, Any]:
    """One ``dataset_info`` entry: the config and its features.

    No ``splits``: ``datasets`` accepts a split entry only with ``num_bytes``, the size of
    the split *as Arrow*, which only loading it would tell; a guessed figure would be
    shown as fact. Row counts are in the card's statistics."""
    return {"config_name": config, "features": features_yaml(schema)}
