"""The licence of one blob version, read from its header.

Decided per blob, never per path: FlashInfer's ``csrc/xqa/*`` was under the NVIDIA
TensorRT licence until 2025-11-13 and is Apache-2.0 afterwards, so the before and after
sides of one row can differ (reference §4). Order matters:

1. ``TensorRT Source Code License`` → NVIDIA-TensorRT (not open source: exclude).
2. NVIDIA proprietary markers → NVIDIA-proprietary (exclude). This runs **before** the BSD
   rule because ``include/flashinfer/trtllm/fmha/kernelParams.h`` carries a BSD-looking
   NVIDIA header that says redistribution "are not permit-ted".
3. The first ``SPDX-License-Identifier:`` decides.
4. Otherwise the licence text: Apache 2.0, BSD-3 ("Neither the name"), BSD, MIT (quoted, or
   named as the origin's licence: "licensed under the MIT license").
5. No header → None; the row then takes the repository's default (Apache-2.0 for all three).

Which licences a row may carry is decided once, here: ``OPEN_SOURCE`` is the allow-list.
It is a Python tuple beside the detector rather than a data file because the ids it holds
are the ones ``detect_license`` spells (the text rules below use the same constants), so a
new detector label and its admission are one edit in one file. Both consumers derive from
it: the miner's filter (``exclusion_reason``) and the Great Expectations value sets of
``license``, ``license_before``, ``license_after`` in ``expectations/kernel_commits.json``
(``value_set_from``, resolved by ``quality.suites.load_suite`` when the suite is loaded).

A licence id in neither the allow-list nor the two NVIDIA labels (say an SPDX
``GPL-2.0-only`` header, or a spec's ``default_license`` outside the list) is excluded by
the miner with reason ``license_unlisted``: it never reaches the dataset, so the blocking
gate cannot fail on a licence the miner let through. (Before issue 23 such a row passed the
miner and failed the gate. No row of the fixture or real clones has one, so no mined row
changes, but the rule did: ``RULES_VERSION`` 2, so a lake mined under 1 is re-mined and
cannot keep such a row.)

Only the first 4 KiB are read: headers sit at the top, and a later quoted licence string
(say, in a test fixture or a docstring) must not relabel a file.
"""

from __future__ import annotations

import re

#: Version of licence detection and the non-OSS exclusion. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
#: 2 (issue 23): a licence id outside ``OPEN_SOURCE`` is excluded (``license_unlisted``)
RULES_VERSION = "2"

HEAD_BYTES = 4096

TENSORRT = "NVIDIA-TensorRT"
PROPRIETARY = "NVIDIA-proprietary"
NON_OSS = frozenset({TENSORRT, PROPRIETARY})
EXCLUSION_REASON = {TENSORRT: "license_tensorrt", PROPRIETARY: "license_proprietary"}
#: Exclusion reason of a licence that is neither open source (``OPEN_SOURCE``) nor NVIDIA's.
UNLISTED_REASON = "license_unlisted"

APACHE_2 = "Apache-2.0"
BSD_3 = "BSD-3-Clause"
BSD = "BSD"
MIT = "MIT"
#: The allow-list: the only licence ids a kernel_commits row may carry on either side or as
#: its label. The GX suite reads it (``value_set_from``), in this order.
OPEN_SOURCE: tuple[str, ...] = (APACHE_2, BSD_3, BSD, MIT)

# Words of a phrase may be split across comment lines ("// ... \n// ..." or
# " * ... \n * ..."), so every space in a phrase also matches a run of whitespace and
# comment markers. Phrases are matched case-blind on a lower-cased copy with plain
# patterns: an IGNORECASE regex loses the engine's literal-prefix search (5x slower).
_SEP = r"[\s*/#]+"


def _phrase(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(a.lower().replace(" ", _SEP) for a in alternatives))


_TENSORRT_RE = _phrase("TensorRT Source Code License")
_PROPRIETARY_RE = _phrase(
    "LicenseRef-Nvidia",
    "are not permit",
    "proprietary rights in and to this (?:material|software)",
    "without an express license agreement from NVIDIA",
)
_SPDX_RE = re.compile(r"SPDX-License-Identifier:[ \t]*([^\r\n]*)")
_TEXT_RULES = (
    (_phrase(r"Apache License,? Version 2\.0"), APACHE_2),
    (_phrase("Neither the name"), BSD_3),
    (_phrase("Redistribution and use"), BSD),
    (_phrase("Permission is hereby granted,? free of charge"), MIT),
    # Vendored code that names its origin's licence instead of quoting it (SGLang's
    # fla/kda.py: "The original source code was licensed under the MIT license").
    (_phrase("licensed under the MIT license"), MIT),
)


def _spdx_value(raw: str) -> str:
    """The SPDX expression without trailing comment closers (``*/``, ``-->``)."""
    value = re.sub(r"\s*(\*/|-->|\*)\s*$", "", raw.strip())
    return value.strip().strip('"').strip()


def detect_license(blob: bytes | str | None) -> str | None:
    """The licence named in the header of one blob version, or None when it has none."""
    if blob is None:
        return None
    head = blob[:HEAD_BYTES]
    text = head.decode("utf-8", "replace") if isinstance(head, bytes) else head
    low = text.lower()
    if _TENSORRT_RE.search(low):
        return TENSORRT
    if _PROPRIETARY_RE.search(low):
        return PROPRIETARY
    m = _SPDX_RE.search(text)
    if m:
        value = _spdx_value(m.group(1))
        if value:
            return value
    for pattern, name in _TEXT_RULES:
        if pattern.search(low):
            return name
    return None


def row_license(before: str | None, after: str | None, default: str = APACHE_2) -> str:
    """The label of a row: the after version's header, else the before's, else the repo's."""
    return after or before or default


def exclusion_reason(before: str | None, after: str | None, label: str | None = None) -> str | None:
    """Why a row must not be kept for its licence, or None when it may.

    ``license_tensorrt`` / ``license_proprietary`` when either side carries an NVIDIA
    label; otherwise ``license_unlisted`` when a side's header or the row's ``label``
    (``row_license``: where no side has a header, the repository's default) names an id
    outside ``OPEN_SOURCE``. A side without a header (None) is not judged by itself.
    """
    for nvidia in (TENSORRT, PROPRIETARY):
        if nvidia in (before, after):
            return EXCLUSION_REASON[nvidia]
    if any(x is not None and x not in OPEN_SOURCE for x in (before, after, label)):
        return UNLISTED_REASON
    return None
