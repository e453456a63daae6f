"""One test per block kind of gains/extract/, each with the traps the issue plants."""

from __future__ import annotations

from dagster_project.gains.extract import extract_text
from dagster_project.gains.extract.aligned import aligned_grids
from dagster_project.gains.extract.document import split_blocks
from dagster_project.gains.extract.vocab import role_of


def pairs(text: str) -> list[tuple[float | None, float | None]]:
    return [(m.baseline, m.optimized) for m in extract_text(text) if m.is_pair]


def test_roles() -> None:
    assert role_of("main (us)").kind == "baseline" and role_of("this PR").kind == "optimized"
    assert (
        role_of("TensorRT-LLM").kind == "reference"
        and role_of("FA3 (for reference)").kind == "reference"
    )
    assert role_of("torch").strength < role_of("before").strength


def test_markdown_table_traps() -> None:
    text = """[Kernel] faster topk
Benchmark with T=2048, repeat=200 on H100 (latency in micro-seconds).

| num_tokens | main | TensorRT | this PR | Speedup |
|---|---|---|---|---|
| 64 | 12.0 | 9.0 | 8.0 | 1.50x |
| 256 | 30.0 | 25.0 | 20.0 | 1.50x |
| geomean | 19.0 | 15.0 | 12.6 | 1.5x |
| 1024 | 80.0 | 70.0 |"""
    ms = extract_text(text)
    assert [(m.baseline, m.optimized) for m in ms] == [
        (12.0, 8.0),
        (30.0, 20.0),
    ]  # summary, truncated row out
    m = ms[0]
    assert (m.stated_speedup, m.speedup, m.batch_size, m.unit, m.scope) == (
        1.5,
        1.5,
        64,
        "us",
        "kernel",
    )
    assert m.audit_pass and m.same_structure and m.stated_agrees


def test_config_accuracy_and_row_role_tables() -> None:
    text = """t
| param | default | tuned |
|---|---|---|
| BLOCK_SIZE_M | 64 | 128 |
| num_warps | 4 | 8 |

| Task | main | PR |
|---|---|---|
| gsm8k | 0.76 | 0.77 |

| version | TTFT (ms) | TPOT (ms) |
|---|---|---|
| main | 210.5 | 44.0 |
| PR | 198.2 | 41.1 |"""
    assert pairs(text) == [(210.5, 198.2), (44.0, 41.1)]


def test_aligned_pandas_table() -> None:
    lines = [
        "moe-align:",
        "   num_tokens  triton  cuda",
        "0        16.0    9.81   4.20",
        "1       256.0   10.07   5.10",
    ]
    (g,) = aligned_grids(lines)
    assert g.header == ["num_tokens", "triton", "cuda"] and len(g.rows) == 2
    text = (
        "Faster op\nlatency (us):\n```\n"
        "   num_tokens   torch   triton\n0        16.0   36.42     9.81\n```"
    )
    (m,) = extract_text(text)
    assert (m.baseline, m.optimized, m.batch_size, m.scope) == (36.42, 9.81, 16, "kernel")


def test_records_runs_and_label_values() -> None:
    text = """t
main:
```
Successful requests:                     800
Benchmark duration (s):                  96.41
Request throughput (req/s):              8.30
Mean TTFT (ms):                          38120.67
```
this PR:
```
Successful requests:                     800
Benchmark duration (s):                  90.02
Request throughput (req/s):              8.89
Mean TTFT (ms):                          35702.09
```
- base: 9,812 tok/s
- new: 10,344 tok/s
"""
    # counts out; the benchmark duration of each run is a measurement (the real-PR labels pair
    # it whenever both runs show it: sglang#7687, sglang#20565)
    assert pairs(text) == [(96.41, 90.02), (8.30, 8.89), (38120.67, 35702.09), (9812.0, 10344.0)]


def test_prose_transitions_ratios_and_traps() -> None:
    text = """t
Latency drops from 58.4 ms to 51.9 ms. We scaled from 4 to 8 GPUs with batch size from 1 to 256.
This gives a ~10% gain in throughput, and ~2% perf degrade on the small model.
Gains range 4-11% depending on the shape; accuracy improves 0.5% on gsm8k."""
    ms = extract_text(text)
    assert [(m.baseline, m.optimized) for m in ms if m.is_pair] == [(58.4, 51.9)]
    # ratio-only claims only where no pair of that scope exists: here the pair is e2e
    assert all(m.is_pair for m in ms)
    ratio_only = extract_text(
        "t\nThis gives a ~10% gain in throughput, and ~2% perf degrade on the small model. "
        "2-5x in places."
    )
    assert [m.stated_speedup for m in ratio_only] == [1.1, round(1 / 1.02, 4)]
    assert all(m.audit_pass for m in ratio_only)


def test_html_table_and_comments() -> None:
    text = (
        "t\n<!-- template: | x | before | after | -->\n"
        "<table><tr><th>bs</th><th>before (ms)</th><th>after (ms)</th></tr>"
        "<tr><td>1</td><td>0.412</td><td>0.208</td></tr></table>"
    )
    assert [b.kind for b in split_blocks(text)] == ["text", "table"] or pairs(text) == [
        (0.412, 0.208)
    ]
    assert pairs(text) == [(0.412, 0.208)]


def test_boxed_tables_as_two_labelled_runs() -> None:
    box = """```
+-------------+--------+------------+-----------------+
| Latency (s) | Tokens | Acc Length | Speed (token/s) |
+-------------+--------+------------+-----------------+
|    {lat}    |  512   |   {acc}    |     {speed}      |
+-------------+--------+------------+-----------------+
```"""
    text = (
        "t\nBefore:\n"
        + box.format(lat="2.183", acc="3.303", speed="234.53")
        + "\n\nAfter\n"
        + box.format(lat="2.142", acc="3.391", speed="239.06")
    )
    got = {(m.baseline, m.optimized): m for m in extract_text(text) if m.is_pair}
    assert set(got) == {
        (2.183, 2.142),
        (234.53, 239.06),
    }  # acceptance length and tokens are not results
    assert got[(2.183, 2.142)].scope == "e2e" and all(m.audit_pass for m in got.values())


def test_slash_cells_in_two_tables_and_project_names() -> None:
    table = "| tp size | data size | latency(ms) |\n| --- | --- | --- |\n| 2/4 | 512 | {a}/{b} |\n"
    text = (
        "t\nvllm\n"
        + table.format(a="0.0095", b="0.0091")
        + "\ncustom allreduce\n"
        + table.format(a="0.0037", b="0.0048")
    )
    from dagster_project.gains.extract import extract_pr_gains

    # 2.12 (issue 40): a project's name ("vllm" above one table) names no side, whichever
    # repository the PR is read for: before 2.12 an SGLang PR paired the two tables and a
    # text without its repo (the CLI) did not
    assert extract_pr_gains(text, repo="sgl-project/sglang").measurements == []
    assert extract_pr_gains(text).measurements == []


def test_counts_shares_and_batch_keys() -> None:
    text = (
        """[Kernel] fused quant
| kernel | before | after |
|---|---|---|
| PTX lines | 1200 | 800 |
| registers | 128 | 96 |

| op | Time (%) before | Time (%) after |
|---|---|---|
| gemm | 61.2 | 48.0 |

| MKN | main (us) | PR (us) |
|---|---|---|
| (16, 4096, 4096) | 20.5 | 15.1 |

Decode with batch size 32: before: 12.0 ms, after: 10.5 ms. """
        """We ran 200 iterations (warmup 10 iterations)."""
    )
    ms = extract_text(text)
    assert [(m.baseline, m.optimized) for m in ms] == [(20.5, 15.1), (12.0, 10.5)]
    mkn, prose = ms
    assert (mkn.batch_size, mkn.scope, mkn.unit) == (16, "kernel", "us")
    assert prose.unit == "ms" and prose.speedup == round(12.0 / 10.5, 4)
    assert all(m.audit_pass for m in ms)


def test_round_two_layouts() -> None:
    """Layouts the dev-set misses of the second round showed (texts in our own words)."""
    # a transition that ends its sentence: the full stop is not part of the value
    assert pairs("t\nThe decode kernel went from ~41.5us to ~17.2us.\nPrefill: 9.1ms->8.4ms.") == [
        (41.5, 17.2),
        (9.1, 8.4),
    ]
    # a whole command in one ```...``` line is a code span: the table after it is still a table
    text = """t
```python3 -m bench --num-prompts 50```

TP | Length | Before Output Throughput (tok/s) | After Output Throughput (tok/s)
-- | -- | -- | --
2|512-256|700.5|733.25
4|1024-256|800.5|833.25

Configs only change the tile sizes.
"""
    assert pairs(text) == [(700.5, 733.25), (800.5, 833.25)]
    # one run edited to show both sides with an arrow on one key; a count line is no pair
    text = """t
```
Successful requests:                     200   ->  200
Total input tokens:                      4096  ->  8192
Benchmark duration (s):                  51.20  ->  47.75
```
"""
    assert pairs(text) == [(51.2, 47.75)]
    # sums written out are read by their totals, never by an addend
    assert pairs("t\nDecode time from 2.5+3.5+1.0=7.0us to 2.0+1.5=3.5us.") == [(7.0, 3.5)]


def test_round_two_traps() -> None:
    # versions in an environment list are not a run of values
    assert pairs("t\n**Environment**\nTorch: 2.9.1\nTriton: 3.5.0\nKernel: 12.5 us\n") == []
    # a geometric-mean summary is not a measurement
    assert [
        m.stated_speedup
        for m in extract_text(
            "t\n- 1.21x geometric mean speedup over the old backend across 40 shapes"
        )
    ] == []
    # "Nx slower than" said of what the PR replaces is N for the PR; said of the PR, 1/N
    assert [
        m.stated_speedup
        for m in extract_text(
            "t\nThe default path is about 3x slower than the fused kernel for long prompts."
        )
    ] == [3.0]
    assert [
        m.stated_speedup
        for m in extract_text(
            "t\nWith this PR the kernel is 1.25x slower than before for tiny batches."
        )
    ] == [0.8]


def test_cut_last_row_only_where_rows_close_with_a_pipe() -> None:
    head = "t\nTP | Before latency (us) | After latency (us)\n-- | -- | --\n2 | 10.5 | 9.5\n"
    # no outer pipes anywhere: the last row is whole, not cut
    assert pairs(head + "4 | 20.5 | 18.5") == [(10.5, 9.5), (20.5, 18.5)]
    piped = "t\n| TP | Before latency (us) | After latency (us) |\n|--|--|--|\n| 2 | 10.5 | 9.5 |\n"
    # rows that close with a pipe: one that does not, at the end of the text, is cut
    assert pairs(piped + "| 4 | 20.5 | 18") == [(10.5, 9.5)]


def test_bounds_and_extremes_are_not_measurements() -> None:
    """ "up to" maxima, lower bounds and min/max over the rows summarise, they do not measure."""
    for s in (
        "It brings up to 3x speedup on decode.",
        "Tiles are over 1.5x faster for small M.",
        "- smallest model: min speedup 0.71x. max speedup 3.9x.",
    ):
        assert [m.stated_speedup for m in extract_text(f"t\n{s}")] == [], s
    # a plain claim still counts
    assert [
        m.stated_speedup
        for m in extract_text("t\nThe fused kernel is 2.5x faster than the old one.")
    ] == [2.5]


def ratios(text: str) -> list[float | None]:
    return [m.stated_speedup for m in extract_text(text) if not m.is_pair]


def test_round_three_tables() -> None:
    # a spreadsheet paste: no outer pipes, an empty first header cell, the header's second
    # line below the separator, and two metrics per side
    sheet = """Faster scheduler steps
  |   | base | base | ours | ours
-- | -- | -- | -- | -- | --
steps | cp | req / s | tok / s | req / s | tok / s
4 | off | 10.5 | 2100.0 | 11.0 | 2200.0
4 | on | 9.5 | 1900.5 | 10.1 | 2020.2"""
    ms = [m for m in extract_text(sheet) if m.is_pair]
    assert [(m.baseline, m.optimized) for m in ms] == [
        (10.5, 11.0),
        (9.5, 10.1),
        (2100.0, 2200.0),
        (1900.5, 2020.2),
    ]
    assert {m.unit for m in ms} == {"req/s", "tok/s"} and all(
        m.speedup and m.speedup > 1 for m in ms
    )
    # rows are the sides, columns are metrics, a change column beside them: never a pair
    # across two metric columns
    rows = """t
| Build | Output tok/s | Mean TPOT | Relative |
| --- | ---: | ---: | ---: |
| main | 500.0 tokens/s | 20.0 ms | Baseline |
| this pr | 510.0 tokens/s | 19.5 ms | +2.0% |"""
    assert pairs(rows) == [(500.0, 510.0), (20.0, 19.5)]


def test_round_three_records() -> None:
    # JSON lines of a benchmark script under main / this PR labels: 2.13 no longer reads them
    # (they paid on no development text); what stays is that nothing wrong is read instead
    js = """t
main:
```
{"name": "x", "batch_size": 8, "latency": 3.5, "throughput": 120.25}
{"name": "x", "batch_size": 64, "latency": 9.0, "throughput": 700.0}
```
this PR:
```
{"name": "x", "batch_size": 8, "latency": 3.25, "throughput": 130.0}
{"name": "x", "batch_size": 64, "latency": 8.5, "throughput": 742.5}
```"""
    assert [m for m in extract_text(js) if m.is_pair] == []
    # two paragraphs under one line that names both sides, in order
    both = """t
Results before and after:
Score: 0.61
Latency: 40.5 s
Output throughput: 900.25 token/s

Score: 0.60
Latency: 39.0 s
Output throughput: 920.5 token/s
"""
    assert pairs(both) == [(40.5, 39.0), (900.25, 920.5)]
    # each side in a sentence of its own, the value inside the clause: 2.13 no longer reads
    # a value from a short clause (no development text had one); nothing is read
    clause = """t
Base: `my_kernel` needs about 120µs per call.

Ours: `my_kernel` needs about 45µs per call.
"""
    assert pairs(clause) == []
    # a clause with two numbers, or a range, is not a value of the run
    assert pairs("t\nBase: 2 launches of about 120µs.\n\nOurs: 1 launch of 45µs.\n") == []


def test_round_three_prose() -> None:
    assert pairs("t\nOn main branch: ~310tok/s, with this PR: ~335 tok/s\n") == [(310.0, 335.0)]
    # bounds written before the number, ranges with a unit on both ends, summaries over a
    # range of sizes, and arithmetic about a configuration are not measurements
    assert ratios("t\nThe op is more than 4x faster.\n") == []
    assert ratios("t\n3% - 4% higher output throughput at batch size 1.\n") == []
    assert (
        ratios(
            "t\nThe fallback is ~20% slower than the tuned one for the batch size range we serve.\n"
        )
        == []
    )
    assert (
        pairs("t\nWith expert parallelism (128/4=32 local experts) the file is picked up.\n") == []
    )
    # the scope of a claim is the one its own clause names
    (m,) = [
        m
        for m in extract_text(
            "t\n* Kernel got more than 3x faster. e2e gain is about 2% as it runs once per step\n"
        )
        if not m.is_pair
    ]
    assert (m.stated_speedup, m.scope) == (1.02, "e2e")
    # a signed change against a named baseline, on a quantity whose direction is known
    assert ratios("t\n- Total TPM: +7.5% vs the stock default config\n") == [1.075]


def test_round_four_tables() -> None:
    # "pre-PR" is the side before the change, "Heur" the heuristic a tuned config replaces
    pre = """t
| shape | pre-PR (ms) | this PR (ms) | speedup |
|---|---|---|---|
| 4x1024 | 2.50 | 2.00 | 1.25x |
| 8x1024 | 5.00 | 3.90 | 1.28x |"""
    assert pairs(pre) == [(2.5, 2.0), (5.0, 3.9)]
    heur = """t
| Batch | Heur (µs) | Tuned (µs) | Speedup |
|---:|---:|---:|---:|
| 512 | 10.50 | 7.00 | 1.50× |"""
    assert pairs(heur) == [(10.5, 7.0)]
    # each "speedup vs X" column names X as a baseline; beside a reference column, the PR's
    # side is the one the stated ratios were worked out from
    vs = """t
```
   M   ref-impl (us):   cuda (us)   ours (us)   speedup over cuda
   1        9.100         9.000       6.000          1.50x
   8        9.300         9.600       6.400          1.50x
```"""
    ms = [m for m in extract_text(vs) if m.is_pair]
    assert [(m.baseline, m.optimized, m.stated_speedup) for m in ms] == [
        (9.0, 6.0, 1.5),
        (9.6, 6.4, 1.5),
    ]
    assert all(m.audit_pass for m in ms)
    two = """t
| M | new us | old-path us | lib us | Speedup vs old-path | Speedup vs lib |
|---:|---:|---:|---:|---:|---:|
| 1 | 2.000 | 2.200 | 6.000 | 1.100x | 3.000x |"""
    # 2.12 (issue 40): "lib" beside the strongly named "old-path" is a third implementation:
    # its speedup column is no gain of the PR
    assert sorted(pairs(two)) == [(2.2, 2.0)]


def test_round_four_change_columns() -> None:
    # "A->B" heading a change column names both sides
    arrow = """t
```
bench-op-performance (unit: us):
   M         NEWJ     OLDA     OLDA->NEWJ
   1         2.50     2.40     +4.2%
   64        9.00     9.50     -5.3%
```"""
    ms = [m for m in extract_text(arrow) if m.is_pair]
    assert [(m.baseline, m.optimized) for m in ms] == [(2.4, 2.5), (9.5, 9.0)]
    assert {m.unit for m in ms} == {"us"} and all(m.audit_pass for m in ms)
    # two implementation names and a change column: the change is relative to the baseline
    pct = """t
| Mode | triton | cutlass | Diff |
|---|---|---|---|
| eager | 200 tok/s | 220 tok/s | +10.0% |
| graph | 900 tok/s | 810 tok/s | -10.0% |"""
    assert pairs(pct) == [(200.0, 220.0), (900.0, 810.0)]
    # sizes are not timings; "X / Y - 1" is a change column; a strongly named baseline
    # beside a weakly named side makes the weak one the PR's
    sizes = """t
| Topology | Cutoff | stock path | ours-auto | stock / ours - 1 |
|---|---:|---:|---:|---:|
| TP2 | 64 MiB | 150.0 us | 140.0 us | 7.1% |"""
    assert pairs(sizes) == [(150.0, 140.0)]


def test_round_four_prose() -> None:
    assert sorted(ratios("t\n- :arrow_down: TTFT ~50%\n- :arrow_up: Throughput ~20%\n")) == [
        1.2,
        2.0,
    ]
    # one run's median is a measurement, not a summary over rows
    assert ratios("t\nThis cuts median TPOT by 10% for small models.\n") == [1.1111]
    # a count word before the verb does not make the transition a configuration change
    assert pairs(
        "t\nFor 300 input tokens, latency went down, decreasing from 30 ms to 24 ms.\n"
    ) == [(30.0, 24.0)]


def test_round_five_tables() -> None:
    # snake_case headers of a benchmark script: "baseline_mean" names the baseline, the
    # std columns are dispersion (never a side), "max_len" is a condition; the one other
    # mean column is the PR's, and a positive gain fraction beside unitless timings says
    # lower is better
    snake = """t
```
bs   max_len   newk_mean   newk_std   baseline_mean   baseline_std   speedup_%
1    256       0.050       0.002      0.100           0.003          0.500
8    256       0.120       0.004      0.200           0.005          0.400
```"""
    ms = [m for m in extract_text(snake) if m.is_pair]
    assert [(m.baseline, m.optimized, m.batch_size) for m in ms] == [(0.1, 0.05, 1), (0.2, 0.12, 8)]
    assert [m.speedup for m in ms] == [2.0, 1.6667] and all(m.audit_pass for m in ms)
    # rows: one strongly named baseline and one unnamed variant per load, in a table pasted
    # without outer pipes: 2.13 no longer pairs such rows (no development text had them);
    # nothing is read. "prefix" is a word, not "pre-fix"
    rows = """t
Load | Method | Requests/s | Latency
-- | -- | -- | --
5 QPS | Prefix Reuse | 4.90 requests/s | 1.10 s
5 QPS | Base | 4.80 requests/s | 1.60 s
9 QPS | Prefix Reuse | 8.70 requests/s | 1.90 s
9 QPS | Base | 7.20 requests/s | 5.00 s"""
    assert [m for m in extract_text(rows) if m.is_pair] == []
    assert role_of("prefix cache").kind is None and role_of("pre-fix").kind == "baseline"


def test_round_five_tables_across_role_labels() -> None:
    # the same table under "before" and "after": the sides are the two tables; the
    # columns and the ratio inside each compare two modes of one run, not the PR's change
    text = """t
before

```
Size      Serial (ms)     Grouped (ms)     Ratio
1         100.00 ms       110.00 ms        0.91x
4         400.00 ms       380.00 ms        1.05x
```

after

```
Size      Serial (ms)     Grouped (ms)     Ratio
1         10.00 ms        11.50 ms         0.87x
4         40.00 ms        36.00 ms         1.11x
```"""
    assert sorted(pairs(text)) == [(100.0, 10.0), (110.0, 11.5), (380.0, 36.0), (400.0, 40.0)]


def test_round_five_records() -> None:
    # two runs of one benchmark: an unnamed one, then one "compared to" a named baseline;
    # further values with words before their unit; a distribution summary per metric
    # (count and std are not measurements, min is not minutes); a correctness rate is not
    # a timing
    text = """t
Results with the new backend:

```
Throughput: 2.00 requests/s, 900.00 total tokens/s, 400.00 output tokens/s Correct rate is 100.0 %
Wait time(msecs):
count     5.000000
mean     20.000000
std       1.000000
min      18.000000
max      22.000000
dtype: float64
```

Compared to the old backend

```
Throughput: 1.00 requests/s, 450.00 total tokens/s, 200.00 output tokens/s Correct rate is 100.0 %
Wait time(msecs):
count     5.000000
mean     40.000000
std       2.000000
min      37.000000
max      44.000000
dtype: float64
```"""
    ms = [m for m in extract_text(text) if m.is_pair]
    got = {(m.baseline, m.optimized): (m.unit, m.speedup) for m in ms}
    assert got == {
        (1.0, 2.0): ("req/s", 2.0),
        (450.0, 900.0): ("tok/s", 2.0),
        (200.0, 400.0): ("tok/s", 2.0),
        (40.0, 20.0): ("ms", 2.0),
        (37.0, 18.0): ("ms", 2.0556),
        (44.0, 22.0): ("ms", 2.0),
    }
    # a third, strongly named side keeps the unnamed run out of the comparison
    named = """t
Accuracy run:
```
latency: 50.0 s
throughput: 10.0 token/s
```
main:
```
latency: 6.0 s
throughput: 70.0 token/s
```
this PR:
```
latency: 5.0 s
throughput: 80.0 token/s
```"""
    assert sorted(pairs(named)) == [(6.0, 5.0), (70.0, 80.0)]


def test_round_six_tables() -> None:
    # three weakly named implementations and one ratio column: until 2.12 the pair was the
    # one the stated ratios reproduce; a ratio between two variants the text never names
    # the PR's before and after is no gain of the PR (issue 40), so nothing is read
    three = """t
| tokens | heads | eager | triton | cuda | speedup |
| --- | --- | --- | --- | --- | --- |
| 128 | 8 | 0.300ms | 0.060ms | 0.020ms | 3.0000x |
| 256 | 8 | 0.310ms | 0.080ms | 0.025ms | 3.2000x |"""
    assert extract_text(three) == []
    # "origin" / "origin+overlap" in a version column: 2.13 no longer reads a row name that
    # extends another as the PR's (no development text had one); nothing is read
    rows = """t
| GPU | in/out | tensor_parallel | latency/ms | throuput | build |
| --- | --- | --- | --- | --- | --- |
| H100 | 2048/1 | 2 | 800.0 | 5000 | origin |
| H100 | 2048/1 | 2 | 700.0 | 5600 | origin+overlap |"""
    assert [m for m in extract_text(rows) if m.is_pair] == []


def test_round_six_lines() -> None:
    # a value under a strongly named baseline, the next line's value in the same unit under
    # a name of its own, and the stated ratio after them
    text = """t
Setup A, one GPU:
Baseline (plain decoding): 300.00 s
Draft-model decoding: 200.00 s
Speedup: 1.50×
"""
    ms = [m for m in extract_text(text) if m.is_pair]
    assert [(m.baseline, m.optimized, m.stated_speedup, m.unit) for m in ms] == [
        (300.0, 200.0, 1.5, "s")
    ]
    # a different unit on the next line is not the PR's value
    other = """t
Baseline (plain decoding): 300.00 s
Tokens generated: 5000 tok/s
"""
    assert pairs(other) == []


def test_round_seven_tables() -> None:
    # a spreadsheet paste: a title line over the separator, the real header below it with
    # an empty first cell, names with digits in them; "M=…" cells key the batch
    sheet = """t
opt-13b/TP2 |   |   |  
-- | -- | -- | --
  | eager_mm (micro-seconds) | fp8 - main (micro seconds) | fp8 - this PR (micro seconds)
MKN=(1x2048x2048) | 30.0 | 20.0 | 10.0
MKN=(32x2048x2048) | 40.0 | 30.0 | 15.0"""
    ms = [m for m in extract_text(sheet) if m.is_pair]
    assert [(m.baseline, m.optimized, m.batch_size, m.unit) for m in ms] == [
        (20.0, 10.0, 1, "us"),
        (30.0, 15.0, 32, "us"),
    ]
    # two "speedup vs X" columns, each beside its own PR column ("paired with X" names X
    # as what it is compared with, not as X); a shape cell "M=…, N=…" gives batch and scope
    two = "\n".join(
        [
            "t",
            "| # | Shape | Old (ms) | New with old (ms) | Speedup vs old "
            "| Tuned (ms) | New with tuned (ms) | Speedup vs tuned |",
            "|---|---|---|---|---|---|---|---|",
            "| 1 | M=8, N=1024, K=1024 / bf16 | 0.040 | 0.020 | 2.0x | 0.025 | 0.020 | 1.25x |",
        ]
    )
    ms = [m for m in extract_text(two) if m.is_pair]
    assert sorted((m.baseline, m.optimized, m.stated_speedup, m.batch_size) for m in ms) == [
        (0.025, 0.02, 1.25, 8),
        (0.04, 0.02, 2.0, 8),
    ]
    assert {m.scope for m in ms} == {"kernel"} and all(m.audit_pass for m in ms)


def test_round_seven_unfenced_aligned_table() -> None:
    # benchmark output pasted as indented text, no code fence; a summary line is no claim
    text = """t
Results (vs the old kernel):
  Batch   Old(us)   New(us)   Speedup
      1     4.00      2.00     2.00x
      2     5.00      4.00     1.25x
      4     8.00      5.00     1.60x
      8    12.00     10.00     1.20x

Summary: Avg 1.5x, Min 1.2x, Max 2.0x
"""
    ms = [m for m in extract_text(text) if m.is_pair]
    assert [(m.baseline, m.optimized, m.batch_size) for m in ms] == [
        (4.0, 2.0, 1),
        (5.0, 4.0, 2),
        (8.0, 5.0, 4),
        (12.0, 10.0, 8),
    ]
    assert all(m.audit_pass for m in ms)
    assert not [m for m in extract_text(text) if not m.is_pair]
    # prose with two-space gaps is not a table
    prose = """t
  We ran it twice.  The first run  was slow.
  Then it  got faster  on the second.
  Nothing  else  changed  here.
  The end  of  the story.
"""
    assert extract_text(prose) == []


def test_round_seven_rows_by_unit_ratio() -> None:
    # a ratio column normalised to 1.00x on one row per group: 2.13 no longer names that row
    # the baseline (no development text had one); two metrics of one row (a latency and a
    # throughput) are still never two sides of a pair, so nothing is read
    text = """t
| backend | EP | Mean TPOT | Output tps | perf |
|---|---|---|---|---|
| plain | 8 | 100.0 | 5000.0 | 1.00x |
| fastpath | 8 | 80.0 | 6000.0 | 1.20x |
| plain (eager) | 16 | 300.0 | 2000.0 | 1.00x |
| fastpath | 16 | 100.0 | 5000.0 | 2.50x |"""
    assert [m for m in extract_text(text) if m.is_pair] == []
    # an unfenced aligned table starting at the first column
    flat = """t
Gains on one host:

Metric            Before    After     Speedup
Throughput (rps)   0.40     0.60      +50%
Total tok/s       400.00   600.00     +50%
Out tok/s          40.00    60.00     +50%
"""
    assert pairs(flat) == [(0.4, 0.6), (400.0, 600.0), (40.0, 60.0)]


def test_round_seven_columns() -> None:
    # a bandwidth written "GB / second" is not a size; headers that extend one another
    # ("X", "X w/ A", "X w/ A + B") no longer name sides (2.13: no development text had
    # them), so nothing is read; a speedup column makes a table timings even beside an error
    # column
    bw = """t
| # of pages | New implementation | Old implementation |
|---|---|---|
| Copy 1 page | 1.00 GB / second | 1.00 GB / second |
| Copy 900 pages | 10.0 GB / second | 2.50 GB / second |"""
    ms = [m for m in extract_text(bw) if m.is_pair]
    assert [(m.baseline, m.optimized, m.unit) for m in ms] == [
        (1.0, 1.0, "GB/s"),
        (2.5, 10.0, "GB/s"),
    ]
    nested = """t
| Docs | engine | engine w/ reuse | engine w/ reuse + offload |
|---|---|---|---|
| 8 | 10.00 | 2.00 | 1.50 |
| 16 | 20.00 | 9.00 | 3.00 |"""
    assert [m for m in extract_text(nested) if m.is_pair] == []
    err = """t
Checked against the reference for correctness.

| Case | Main | This PR | Speedup | max_abs_diff |
| --- | ---: | ---: | ---: | ---: |
| `S1024` | `40.000 us` | `20.000 us` | `2.00x` | `0.0` |"""
    ms = [m for m in extract_text(err) if m.is_pair]
    assert [(m.baseline, m.optimized, m.stated_speedup) for m in ms] == [(40.0, 20.0, 2.0)]


def test_round_eight_lines_and_deltas() -> None:
    # a setting before a metric and a verb of change: the change is the metric's
    prose = """t
- Load 100: Throughput improved 150.00 -> 165.00
"""
    assert pairs(prose) == [(150.0, 165.0)]
    # two readings named by a "Speedup (A/B)" line under them: 2.13 no longer reads the sides
    # from that line (no development text had one); nothing is read
    named = """t
```
Case 1
NEW: 0.010000ms, OLD: 0.012000ms
Speedup (OLD/NEW): 1.20x
Case 2
NEW: 0.020000ms, OLD: 0.030000ms
Speedup (OLD/NEW): 9.99x
```"""
    assert [m for m in extract_text(named) if m.is_pair] == []
    # signed percentage deltas of the PR's side, one claim per cell (two columns with the
    # same number in one row are two claims); run settings are not measurements
    deltas = """t
| Round | Patched throughput delta | Patched TPOT delta | Patched ITL delta |
|---|---:|---:|---:|
| 1 | `+5.00%` | `-4.00%` | `-4.00%` |"""
    claims = sorted(m.stated_speedup for m in extract_text(deltas) if not m.is_pair)
    assert claims == [1.0417, 1.0417, 1.05]
    settings = """t
main:
```
runs: 3
max-concurrency: 32
prompts/run: 384
duration: 105.7 s
```
this PR:
```
runs: 3
max-concurrency: 32
prompts/run: 384
duration: 100.8 s
```"""
    assert pairs(settings) == [(105.7, 100.8)]


def test_round_nine_parallel_runs_and_repeated_readings() -> None:
    """2.8: two runs under "Before" and two under "After" pair position by position (not the
    last baseline run with the first optimized one), a reading logged twice in both runs
    pairs in turn, and the launch command's ``FOO=0`` is no run of the comparison."""
    text = """t
On H200-SXM

## Before

```
FAST_PATH=0 python3 serve.py --model m
```

First launch
```
[12:00:01] Graph build done. Time elapsed: 41.20 s. mem usage=1.10 GB.
```

Second launch
```
[12:01:01] Graph build done. Time elapsed: 6.10 s. mem usage=1.10 GB.
[12:02:01] Graph build done. Time elapsed: 6.30 s. mem usage=1.10 GB.
```

## After

First launch
```
[12:10:01] Graph build done. Time elapsed: 39.80 s. mem usage=1.10 GB.
```

Second launch
```
[12:11:01] Graph build done. Time elapsed: 5.90 s. mem usage=1.10 GB.
[12:12:01] Graph build done. Time elapsed: 5.70 s. mem usage=1.10 GB.
```"""
    assert sorted(pairs(text)) == [(6.1, 5.9), (6.3, 5.7), (41.2, 39.8)]
    # the hardware a run was on names no side ("On H200" is not "fusion on")
    assert role_of("On H200-SXM").kind is None
    assert role_of("On 8x MI300X").kind is None
    assert role_of("fusion on").kind == "optimized"


def test_round_nine_revert_and_minutes() -> None:
    """2.8: a revert PR's "before"/"after" are said of the reverted change, so the PR's own
    baseline is the "after" run; minutes as a bare "m" only after a time metric; KV-cache
    block counts are no measurement."""
    revert = """Revert "faster sampler"
Reverts acme/engine#1234

It slowed the nightly run down.

before
Mean latency: 0.50 seconds

after
Mean latency: 2.00 seconds"""
    ms = [m for m in extract_text(revert) if m.is_pair]
    assert [(m.baseline, m.optimized, m.speedup) for m in ms] == [(2.0, 0.5, 4.0)]
    not_revert = revert.replace("Reverts acme/engine#1234", "Speeds up the sampler.")
    assert [(m.baseline, m.optimized) for m in extract_text(not_revert) if m.is_pair] == [
        (0.5, 2.0)
    ]
    minutes = "t\n- Cuts the cold start time from 12.5m to 8.0m on one node"
    ms = [m for m in extract_text(minutes) if m.is_pair]
    assert [(m.baseline, m.optimized, m.unit, m.speedup) for m in ms] == [(12.5, 8.0, "m", 1.5625)]
    assert pairs("t\nThe corpus grew from 3m to 5m documents") == []
    blocks = """t
before:
```
# GPU blocks: 31000, # CPU blocks: 4096
Mean latency: 2.00 seconds
```
after:
```
# GPU blocks: 30500, # CPU blocks: 4096
Mean latency: 1.60 seconds
```"""
    assert pairs(blocks) == [(2.0, 1.6)]


def test_round_nine_range_cell_and_reference_column() -> None:
    """2.8: a range in a table cell ("~610–625 TFLOPs") is no value, in any unit; the PR's
    column is then a side without a value, and the reference column beside the baseline
    ("FA3") never takes its place. The claim in the prose is then the measurement."""
    text = """t
| Before | After | FA3 (reference) |
|---|---|---|
| ~480 TFLOPs | ~610–625 TFLOPs | ~700 TFLOPs |

**+28% total improvement** over the series of commits."""
    ms = extract_text(text)
    assert [m for m in ms if m.is_pair] == []
    assert [m.stated_speedup for m in ms if not m.is_pair] == [1.28]
    one = text.replace("~610–625 TFLOPs", "~615 TFLOPs")
    assert pairs(one) == [(480.0, 615.0)]


def test_round_nine_vs_lines_parent_column_and_accuracy_runs() -> None:
    """2.8: ``name: a vs b`` lines under a caption naming both sides in order; "Parent" is
    the baseline column; an lm_eval table under "main" / "this PR" labels is accuracy; a
    sign written after the hedge ("improved ~ +4.2%") still goes with its cue."""
    vs = """t
Kernel time of the old split-K path vs the new persistent kernel in us:
qkv_proj: 30.5 vs 21.0
down_proj: 55.0 vs 44.0

Something else: 3 vs 4"""
    ms = [m for m in extract_text(vs) if m.is_pair]
    assert [(m.baseline, m.optimized, m.unit) for m in ms] == [
        (30.5, 21.0, "us"),
        (55.0, 44.0, "us"),
    ]
    assert all(m.audit_pass for m in ms)
    unnamed = vs.replace("the old split-K path vs the new persistent kernel", "run A vs run B")
    assert pairs(unnamed) == []
    parent = """t
| Metric | Parent | This PR |
|---|--:|--:|
| TTFT p50 | 80.5 ms | 61.0 ms |"""
    assert pairs(parent) == [(80.5, 61.0)]
    accuracy = """t
with this PR:
```
|Tasks|Version|Filter|n-shot|Metric|Value|Stderr|
|-----|------:|------|-----:|------|----:|-----:|
|gsm8k|3|strict-match|5|exact_match|0.9510|0.0060|
```
main
```
|Tasks|Version|Filter|n-shot|Metric|Value|Stderr|
|-----|------:|------|-----:|------|----:|-----:|
|gsm8k|3|strict-match|5|exact_match|0.9530|0.0058|
```"""
    assert pairs(accuracy) == []
    signed = "t\nDecode throughput improved ~ +4.2% on the long-context run."
    assert [m.stated_speedup for m in extract_text(signed)] == [1.042]


def test_round_ten_log_layouts_were_removed() -> None:
    """2.12 (issue 40, fewer rules): 2.9 read hyperfine summaries, a stage's "finished in N
    seconds" log line, "Stage 41s." and a role line of comma-separated readings; on the two
    blind sets that met them (fresh9, fresh10) 2.7, 2.9 and 2.10 scored the same labels, so
    they were removed. These layouts are read no more (a rule comes back with blind evidence).
    A role heading that carries a commit sha still names its side."""
    log = """t
### Before (main at 0a1b2c3d4e5f60718293a4b5c6d7e8f901234567)

```
[09:00:05] [VaeStage] finished in 4.2500 seconds
```

### After (this PR at 9f8e7d6c5b4a39281706f5e4d3c2b1a098765432)

```
[09:10:04] [VaeStage] finished in 3.1000 seconds
```"""
    assert pairs(log) == []
    assert pairs("t\nBefore:\n\nUnetStage 52s.\n\nPR:\n\nUnetStage 33s.\n") == []
    sha = """t
### Before (main at 0a1b2c3d4e5f60718293a4b5c6d7e8f901234567)

latency: 4.25 s

### After (this PR at 9f8e7d6c5b4a39281706f5e4d3c2b1a098765432)

latency: 3.10 s"""
    assert pairs(sha) == [(4.25, 3.1)]


def test_round_ten_commands_ratio_columns_and_arrowed_readings() -> None:
    """2.9: a command line over a run names no side (``python bench.py``: "python" is no
    baseline here); a ratio column between two value columns that name no side is no
    claim; a reading written as its own change ("a -> b") is not also a run's value."""
    commands = """t
Before
```
python bench/serve_bench.py --rounds 3
Accuracy: 0.801
Latency: 30.500 s
Output throughput: 900.250 token/s
```
After
```
python bench/serve_bench.py --rounds 3
Accuracy: 0.801
Latency: 20.250 s
Output throughput: 1350.500 token/s
```"""
    assert sorted(pairs(commands)) == [(30.5, 20.25), (900.25, 1350.5)]
    unnamed = """t
Batch | Tokens | Flex In (tok/s) | Dense In (tok/s) | In Speedup | Flex Out (tok/s) \
| Dense Out (tok/s) | Out Speedup
-- | -- | -- | -- | -- | -- | -- | --
1 | 300 | 1,100.50 | 1,320.60 | 1.20x | 2,000.00 | 2,400.00 | 1.20x
2 | 900 | 700.00 | 2,800.00 | 4.00x | 300.00 | 1,500.00 | 5.00x"""
    assert [m.stated_speedup for m in extract_text(unnamed) if not m.is_pair] == []
    arrowed = """t
### before:
first gemm: 8.20ms

### after:
first gemm: 8.20ms -> 2.75ms
"""
    assert pairs(arrowed) == [(8.2, 2.75)]


def test_round_eleven_direction_units_and_stated_ratios() -> None:
    """2.10: a unit read from the context ("- 20 QPS" above the table) never overrides the
    direction the metric names itself (TPOT is lower-better); a unit may end its sentence
    ("25.4 s."), a range "10.2s..10.9s" is still no value; a ratio written right after a
    transition or in the row of an arrow cell is that pair's stated ratio."""
    qps = """t
- 20 QPS

| metric | main | this PR |
|---|---|---|
| TPOT (mean) | 80.00 | 64.00 |"""
    ms = [m for m in extract_text(qps) if m.is_pair]
    assert [(m.baseline, m.optimized, m.higher_is_better, m.speedup) for m in ms] == [
        (80.0, 64.0, False, 1.25)
    ]
    sentence = """t
before:
```
Warm cache done. Time elapsed: 12.50 s. mem usage=0.50 GB.
```
after:
```
Warm cache done. Time elapsed: 10.00 s. mem usage=0.50 GB.
```"""
    ms = [m for m in extract_text(sentence) if m.is_pair]
    assert [(m.baseline, m.optimized, m.unit) for m in ms] == [(12.5, 10.0, "s")]
    ranged = "t\nmain:\n- duration: 10.2s..10.9s (mean 10.5s)\n\nthis PR:\n- duration: 9.1s..9.4s\n"
    assert (10.2, 9.1) not in pairs(ranged)
    prose = "t\nP99 latency improved from **5000 ms to 400 ms** (~**12.5× faster**) here."
    ms = [m for m in extract_text(prose) if m.is_pair]
    assert [(m.baseline, m.optimized, m.stated_speedup, m.audit_pass) for m in ms] == [
        (5000.0, 400.0, 12.5, True)
    ]
    cells = """t
| batch | wall clock | speedup |
|---|---|---|
| 4 | 3.00s → 2.40s | 1.25x |"""
    ms = [m for m in extract_text(cells) if m.is_pair]
    assert [(m.baseline, m.optimized, m.stated_speedup) for m in ms] == [(3.0, 2.4, 1.25)]
