"""Specs for the fla rows of the execution census (issue 35, stop 35): filled in by
the spec work of this round; empty means none written yet."""

from __future__ import annotations

from .base import Spec

SPECS: tuple[Spec, ...] = ()
