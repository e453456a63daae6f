"""Keep the upstream-file loader's import stubs inside the test that used them.

``commit_exec.device.loader`` puts a finder on ``sys.meta_path`` that turns every module
under ``STUB_ROOTS`` (``psutil``, ``pydantic``, ``huggingface_hub``, ``transformers`` ...)
into an inert stub. On the GPU machine that is what the runner process wants for its whole
life; in a pytest worker it leaked into later tests of the same process, where
``import dask`` got a stubbed ``psutil`` and failed (``assert affinity``). After each test
here the finders are taken off again and the stub modules dropped from ``sys.modules``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from dagster_project.commit_exec.device.loader import StubModule


@pytest.fixture(autouse=True)
def _loader_stubs_stay_in_the_test() -> Iterator[None]:
    meta_path = list(sys.meta_path)
    before = set(sys.modules)
    yield
    sys.meta_path[:] = meta_path
    for name in set(sys.modules) - before:
        if isinstance(sys.modules.get(name), StubModule):
            del sys.modules[name]
