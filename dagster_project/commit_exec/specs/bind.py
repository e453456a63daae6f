"""Call a launcher by parameter *name*: the adapter for signatures that change by sha.

Launchers gain optional parameters (``out_q``, ``use_ue8m0``, ``output_scale``, ``sinks``)
from one commit to the next. A spec builds every value it knows under the names launchers
use, and ``call_by_name`` passes each parameter of *this side's* signature that it has a
value for; a parameter without a value keeps its default. A required parameter without a
value is an adapter gap, raised as ``AdapterGap`` (the row's ``run_error`` names it)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any


class AdapterGap(TypeError):
    """The launcher requires a parameter the spec has no value for."""


def call_by_name(fn: Callable[..., Any], values: Mapping[str, Any]) -> Any:
    """``fn(**{p: values[p] for p in fn's parameters if p in values})``."""
    sig = inspect.signature(fn)
    kwargs = {}
    for name, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if name in values:
            kwargs[name] = values[name]
        elif param.default is inspect.Parameter.empty:
            raise AdapterGap(f"{getattr(fn, '__name__', fn)} requires {name!r}")
    return fn(**kwargs)
