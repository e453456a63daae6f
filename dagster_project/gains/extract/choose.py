"""The deterministic extractor: blocks → candidates (one module per block kind) → pairs.

Choosing among candidates, in one place:

* a pair is one comparison; the same (baseline, optimized) values found twice (a table and
  the sentence restating it) are one measurement, the table's reading kept;
* a stated ratio beside a pair stays on it as ``stated_speedup``; a ratio-only claim in
  prose is kept only for a scope without pairs (otherwise it summarises them);
* values are never computed here: everything is copied from one row / record / sentence.

Bump :data:`EXTRACTOR_VERSION` whenever output can change: the lake re-extracts PRs whose
stored version differs.
"""

from __future__ import annotations

import re

from dagster_project.gains.extract.aligned import aligned_grids
from dagster_project.gains.extract.candidate import Candidate, to_measurement
from dagster_project.gains.extract.document import Block, Grid, split_blocks
from dagster_project.gains.extract.prose import prose_candidates
from dagster_project.gains.extract.records import (
    block_role,
    inline_candidates,
    pair_candidates,
    run_candidates,
    table_runs,
)
from dagster_project.gains.extract.tables import table_candidates
from dagster_project.gains.extract.vocab import reading
from dagster_project.gains.normalise import finalise
from dagster_project.gains.schema import Measurement

#: 2.1 (2026-12-01): transitions ending a sentence, ``a -> b`` on one key of a run, summed
#: expressions by their totals, one-line code spans, versions and geometric means refused,
#: "Nx slower than" said of the replaced side, benchmark duration kept as a measurement;
#: bounds ("up to 3x", "over 1.0x") and extremes ("min/max speedup") are not measurements
#: 2.2 (2026-12-01): spreadsheet pastes (empty first header cell, the header's second line
#: under the separator, spaced units "toks / sec"), no pair across two metric columns of a
#: rows-are-sides table, JSON-lines benchmark output, two paragraphs under "X before and
#: after:", a role line whose value sits in a short clause, inline roles with "~", bounds
#: written before the number ("more than 5x"), ranges with a unit on the first end, claims
#: over a "range" of sizes, "a/b=c <noun>" arithmetic, a claim's scope from its own clause,
#: a signed percentage "vs" a named baseline
#: 2.3 (2026-12-01): "pre-PR"/"post-PR", "Heur"/"fallback"/"stock" name the baseline; each
#: "speedup vs X" column names X's column a baseline (the PR's side among several found
#: from the stated ratios); an "A->B" change header names both sides; two weakly named
#: sides are ordered by their change/ratio column's numbers; a strong baseline beside a
#: weakly named side; size cells ("64 MiB") skipped; aligned headers with a colon cell;
#: a code block's title line gives its table's unit; direction emoji; "median TPOT" is a
#: metric; a verb before "from X to Y" clears an earlier count word
#: 2.4 (2026-12-02): snake_case headers name sides ("baseline_mean"); std columns are
#: dispersion; a strong baseline beside one unnamed (or reference-named) value column, and a
#: two-name row column with one strong baseline, name the other the PR's side (the audit
#: reads those rows alike: ``tables.row_side_overrides``); a positive gain column beside
#: unitless timings gives the direction; the same table under "before" and "after" labels is
#: paired across the two tables, not inside each; an unnamed run beside a "compared to"
#: run is the PR's when no run is named so; ``describe()`` summaries as one record per
#: statistic (count/std dropped); further values with words before their unit; "prefix"
#: is not "pre-fix"; load/QPS and max_*len columns are conditions; a correct rate is
#: accuracy
#: 2.5 (2026-12-02, read off the retired fresh4 set): units written in the cells
#: ("0.0116 ms") give the direction; among three or more weakly named implementations the
#: pair is the one a single ratio column reproduces; a row name that is another plus a change
#: ("origin" / "origin+overlap") is the PR's; in/out, isl/osl and *_parallel columns are
#: conditions; head counts are kernel keys; "TF" is TFLOPS; a value after a strongly named
#: baseline line, in the same unit under a name of its own, is the PR's, with a "Speedup:"
#: line after it as its stated ratio; "throuput" is a throughput
#: 2.6 (2026-12-02, read off the retired fresh5 set): a spreadsheet paste's title line over
#: the separator with the real header under it; digits inside names do not make a header
#: row numeric; a key cell naming its key ("MKN=(1x4096x4096)", "M=1, N=…") gives the batch
#: and a kernel scope; several "speedup vs X" columns each with its own PR column ("paired
#: with X" does not name X's column); an unfenced, indented aligned table in a text block
#: (found in one place, ``table_grids``, for the extractor and the audit), also at the
#: first column; a ratio column at 1.00x on one row per group names that row the baseline
#: (``tables.unit_ratio_rows``, read alike by the audit); one ratio beside several metrics
#: stays on the metric it reproduces; a latency and a throughput column are never two sides;
#: headers that extend one another ("X", "X w/ A + B") name the longest the PR's state; a
#: bandwidth ("GB / second") is not a size; a speedup column keeps a table beside an error
#: column or a correctness check
#: 2.7 (2026-12-02, read off the retired fresh6 set): a setting named before a metric and a
#: verb of change ("Request Rate 200: Throughput improved a -> b") is the metric's change; a
#: "Speedup (A/B)" line names the sides of the two readings above it; signed percentages
#: under a "delta"/"change" header are claims even under the PR's name, one per column;
#: runs, prompts, failed counts, max-concurrency and n-shot are settings, not measurements
#: 2.8 (2026-12-03): two groups of as many runs under "Before" / "After" pair position by
#: position, a reading repeated as often in both runs pairs in turn, "on A100" names no
#: side, a revert PR's "before"/"after" are its own after/before, minutes as "12.5m" after
#: a time metric, KV-cache block counts, range cells ("683–690") and lm_eval tables under
#: role labels are no measurements, a strong PR column without values keeps a reference
#: column from its place, "Parent" is the baseline, ``name: a vs b`` lines under a caption
#: naming the sides, a sign after the hedge ("improved ~ +6.4%")
#: 2.9 (2026-12-03): hyperfine summaries, a stage's "finished in N seconds" log line,
#: "Stage 49s.", a role line of comma-separated "name value unit" readings, shell commands
#: and commit shas on role lines, no ratio-only claims from a speedup column between value
#: columns that name no side, a reading written "a -> b" is not also a run's value
#: 2.10 (2026-12-03): a unit read from the block's context never contradicts the direction
#: the metric names (a "10 QPS" line over a TPOT table), a unit may end its sentence, a ratio
#: right after a transition or in an arrow cell's row is the pair's stated ratio
#: 2.11 (2026-12-06): plausibility in the audit (issue 42): no pair value from a key column
#: (batch, shape, parameter), a speedup beyond the scope's bound (audit.PLAUSIBLE_SPEEDUP)
#: fails with its reason
#: 2.12 (2026-12-06, issue 40: fewer rules, known harmful classes): the PR's repository no
#: longer names a side (the lake passed it and the CLI did not: one text, two readings; an
#: engine compared with another was the PR's gain); a weakly named implementation beside a
#: strongly named side is a third one, never a side, in columns and rows; the 2.5 pair "a
#: single ratio column reproduces among three weakly named implementations" is gone (a ratio
#: between two variants the text never names the PR's); a ratio column gives claims only
#: beside a strongly named baseline and PR column; a reference-named column or row is never
#: the PR's side beside a strong baseline; an implementation's name under a strongly named
#: run ("Before:" / "FlashInfer: 10 ms") is what the run timed, not a side; a shape or
#: parameter header of a rows-are-sides table is a key, never the metric; a "speedup vs X"
#: column beside a strong baseline neither names X the baseline nor states the pair's ratio;
#: role lines alike ("main" / "torch" / "this PR" pair main with the PR; "torch" / "this PR"
#: is no pair); a prose ratio said against a reference, or against a weakly named
#: implementation by the PR's strongly named side, is no claim. Removed for paying on no
#: blind set (fresh9 and fresh10 scored alike under 2.7, 2.9 and 2.10): 2.9's hyperfine
#: summaries, "finished in N seconds" log lines, "Stage 49s." and comma-separated "name
#: value unit" role lines
#: 2.13 (2026-12-07, 40d): removed for paying on no development text (none fired on 105
#: cached texts of ``prs.csv``, fresh … fresh11; ``benchmarks/gains_rule_ablation.py``) or
#: costing more false values than true ones: the "A->B" change header, headers extending one
#: another, two-name and 1.00x-ratio row columns (``row_side_overrides`` with them), JSON
#: lines, tqdm rates (one false value, none right), a value in a short clause, one line's two
#: readings, "Speedup (A/B)" lines
EXTRACTOR_VERSION = "2.13"


def candidates(text: str) -> list[Candidate]:
    """Every candidate comparison in ``text`` (first line = title), in block order."""
    title = text.partition("\n")[0]
    blocks = split_blocks(text)
    found: list[Candidate] = []
    record_blocks: list[Block] = []
    quiet: list[tuple[Block, Grid]] = []  # tables with no comparison inside
    grids = table_grids(blocks)
    across = _paired_across(grids)
    for b in blocks:
        if b.kind == "table" and b.grid is not None:
            got = [] if id(b.grid) in across else table_candidates(b.grid, b)
            found.extend(got)
            if not got:
                quiet.append((b, b.grid))
        elif b.kind == "text" and grids.get(b.index):
            got = [c for sub, g in grids[b.index] for c in table_candidates(g, sub)]
            found.extend(got)
            record_blocks.append(b)
        elif b.kind == "code":
            got = []
            for sub, g in grids.get(b.index, []):
                mine = [] if id(g) in across else table_candidates(g, sub)
                got.extend(mine)
                if not mine:
                    quiet.append((sub, g))
            found.extend(got)
            if not got:
                record_blocks.append(b)
        else:
            record_blocks.append(b)
    found.extend(run_candidates(record_blocks))
    found.extend(pair_candidates(table_runs(blocks, quiet)))
    found.extend(inline_candidates(record_blocks))
    found.extend(prose_candidates([b for b in blocks if b.kind == "text"], title))
    return found


def table_grids(blocks: list[Block]) -> dict[int, list[tuple[Block, Grid]]]:
    """Every table of the text by block index: a markdown/HTML table as it is, the aligned
    tables of a code block (or of an unfenced run of aligned lines in a text
    block) each as a table block labelled by its title line. The one place tables are
    found: the extractor and the audit (:mod:`~dagster_project.gains.audit`) both read it."""
    out: dict[int, list[tuple[Block, Grid]]] = {}
    for b in blocks:
        if b.kind == "table" and b.grid is not None:
            out[b.index] = [(b, b.grid)]
        elif b.kind == "text" and _unfenced_table(b.lines):
            # 2.6: benchmark output pasted without a fence (aligned columns)
            out[b.index] = [
                (_table_block(b, g), g)
                for g in aligned_grids(b.lines)
                if len(g.rows) >= 3 and len(g.header) >= 3
            ]
        elif b.kind == "code":
            out[b.index] = [(_table_block(b, g), g) for g in aligned_grids(b.lines)]
    return out


def _table_block(b: Block, g: Grid) -> Block:
    """An aligned table found inside block ``b`` as a table block of its own, labelled by
    the title line above its header (else by ``b``'s label)."""
    label = _title_above(b.lines, g) or b.label
    return Block("table", b.lines, b.index, g, b.heading, b.before, label, b.after, b.title)


def _unfenced_table(lines: list[str]) -> bool:
    """Whether a text block holds an unfenced aligned table: a header line and at least
    three lines under it with two or more gaps of two spaces, most of their cells numbers."""
    run = best = 0
    for ln in lines:
        cells = re.split(r"\s{2,}", ln.strip())
        aligned = len(cells) >= 3
        numeric = (
            aligned
            and sum(bool(re.fullmatch(r"[-+]?\d[\d,.]*[x%]?", c)) for c in cells) >= len(cells) / 2
        )
        run = run + 1 if (aligned and (numeric or run == 0)) else 0
        best = max(best, run)
    return best >= 4


def _paired_across(grids: dict[int, list[tuple[Block, Grid]]]) -> set[int]:
    """``id`` of the grids read as runs of one comparison across tables (2.4): two tables
    with the same header, one under a strong baseline label ("before", "main") and the next
    under a strong optimized one ("after", "this PR"). The sides are named outside the
    tables, so what their columns might say about sides inside (``Sequential`` / ``Batch``
    and a speedup between them) is a comparison within one run, not the PR's."""
    flat = [(b, g, block_role(b)) for subs in grids.values() for b, g in subs]
    out: set[int] = set()
    for (_b1, g1, r1), (_b2, g2, r2) in zip(flat, flat[1:], strict=False):
        if r1 is None or r2 is None or r1.strength < 2 or r2.strength < 2:
            continue
        if {r1.kind, r2.kind} == {"baseline", "optimized"} and [
            h.strip().lower() for h in g1.header
        ] == [h.strip().lower() for h in g2.header]:
            out |= {id(g1), id(g2)}
    return out


def _title_above(lines: list[str], grid: Grid) -> str:
    """The line above an aligned table's header inside its code block (a benchmark's
    ``name-performance (unit: us):`` title), which names what the table measures."""
    if not grid.raw or grid.raw[0] not in lines:
        return ""
    k = lines.index(grid.raw[0]) - 1
    seen_header = False
    while k >= 0:
        ln = lines[k].strip()
        if ln and not re.fullmatch(r"[-=+|: ]{3,}", ln):
            if seen_header:
                return ln
            seen_header = True  # the header line itself
        k -= 1
    return ""


def c_scope_hint(m: Measurement) -> str | None:
    """The scope a sentence names itself (kept on the measurement as its scope when set)."""
    return m.scope if m.source and m.source.endswith(":hinted") else None


def choose(found: list[Candidate]) -> list[Measurement]:
    """Measurements from candidates (rules in the module docstring), finalised."""
    out: list[Measurement] = []
    seen_pairs: set[tuple[float | None, float | None]] = set()
    seen_keyed: set[tuple[object, ...]] = set()
    stated_only: list[Measurement] = []
    for c in found:
        m = finalise(to_measurement(c))
        if c.scope_hint and c.structure == "sentence":
            m.source = f"{m.source}:hinted"
        if m.is_pair:
            # the same two values under other keys (bs=2, bs=4 both 0.0059 -> 0.0034) are two
            # measurements; the same values again without keys (a sentence restating a row) are not
            key = (m.baseline, m.optimized)
            keyed = (m.baseline, m.optimized, m.batch_size, m.shape)
            if keyed in seen_keyed or (
                key in seen_pairs and (m.structure == "sentence" or not (m.batch_size or m.shape))
            ):
                continue
            seen_pairs.add(key)
            seen_keyed.add(keyed)
            out.append(m)
        elif m.stated_speedup is not None:
            stated_only.append(m)
    paired_scopes = {m.scope for m in out}
    seen_stated: set[tuple[float, str, str]] = set()
    for m in stated_only:
        s = m.stated_speedup or 0.0
        if (
            m.structure == "sentence"
            and paired_scopes
            and (c_scope_hint(m) in paired_scopes or c_scope_hint(m) is None)
        ):
            continue  # a summary ("overall 1.8x faster") of pairs already read
        skey = (s, m.evidence or "", m.metric or "")  # 2.7: two columns of one row are two
        if skey in seen_stated:
            continue
        seen_stated.add(skey)
        out.append(m)
    return out


def extract_table(text: str, repo: str | None = None) -> list[Measurement]:
    """Deterministic measurements of one PR text (first line title), speedups computed,
    not yet audited (:func:`dagster_project.gains.extract.extract_pr_gains` audits).

    ``repo`` (``vllm``, ``sgl-project/sglang``…) names the PR's own project, so that in a
    ``| vLLM | SGL Kernel |`` table of an SGLang PR the SGLang column is the PR's side."""
    with reading(text, repo):
        out = choose(candidates(text))
    for m in out:
        m.extractor, m.extractor_version = "table", EXTRACTOR_VERSION
    return out
