"""Generators shared by the reward tests: random before/after file pairs from a seeded RNG."""

from __future__ import annotations

import random

# Lines chosen to stress anchoring: duplicates, blanks, braces, tabs, trailing spaces and
# a CRLF-looking line, drawn from a pool whose size decides how repetitive a file is.
_COMMON = ["}", "", "  }", "\treturn acc;", "  acc += x[i];", "#pragma unroll", "a", "a ", "b"]


def random_pair(rng: random.Random) -> tuple[str, str]:
    """A random file and a randomly edited copy (inserts, deletes, replaces, EOL changes)."""
    pool = _COMMON + [f"line_{i} = f({i});" for i in range(rng.choice([1, 5, 40, 400]))]
    eol = "\r\n" if rng.random() < 0.15 else "\n"
    lines = [rng.choice(pool) for _ in range(rng.randint(0, 80))]
    edited = list(lines)
    for _ in range(rng.randint(0, 7)):
        at = rng.randint(0, len(edited))
        span = rng.randint(1, 4)
        op = rng.random()
        if op < 0.3:
            del edited[at : at + span]
        elif op < 0.65:
            edited[at:at] = [rng.choice(pool) for _ in range(span)]
        else:
            edited[at : at + span] = [rng.choice(pool) + "  // new" for _ in range(span)]

    def text(rows: list[str]) -> str:
        body = eol.join(rows)
        return body + eol if rows and rng.random() < 0.85 else body

    return text(lines), text(edited)
