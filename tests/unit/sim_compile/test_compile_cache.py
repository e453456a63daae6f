"""The nvcc result cache of ``compile_check``: real nvcc, a wrapper that counts its runs.

A rebuild with unchanged templates must not run nvcc again; a changed source (which is
what a changed template renders) must be compiled again, and its new verdict used.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dagster_project.sim.compile_check import (
    NvccCache,
    compile_sample,
    load_shipped_answers,
    nvcc_compile,
    nvcc_path,
    render_case,
    stratified_cases,
    toolchain_id,
    write_shipped_answers,
)

REAL_NVCC = nvcc_path()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(REAL_NVCC is None, reason="nvcc not installed")]

GOOD = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
BAD = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f }\n"  # missing semicolon


def counting_nvcc(tmp_path: Path) -> tuple[str, Path]:
    """A real nvcc behind a script that appends one line per compile (not per --version)."""
    log = tmp_path / "nvcc_runs.log"
    script = tmp_path / "nvcc"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$1" in --version) ;; *) echo run >> "{log}" ;; esac\n'
        f'exec "{REAL_NVCC}" "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), log


def runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def cmd(nvcc: str) -> list[str]:
    return [nvcc, "-O3", "-std=c++17", "-arch=sm_80", "-c", "candidate.cu", "-o", "candidate.o"]


def test_same_source_is_answered_from_the_cache_and_a_changed_one_is_compiled(
    tmp_path: Path,
) -> None:
    nvcc, log = counting_nvcc(tmp_path)
    cache = NvccCache(tmp_path / "cache")
    ok, err, hit = nvcc_compile(GOOD, cmd(nvcc), tmp_path / "w1", cache=cache)
    assert (ok, hit, runs(log)) == (True, "nvcc", 1)
    ok, err, hit = nvcc_compile(GOOD, cmd(nvcc), tmp_path / "w2", cache=cache)
    assert (ok, hit, runs(log)) == (True, "home cache", 1)  # nvcc not run again
    # The "template" changes: what it renders differs, so it is compiled, and its new
    # (failing) verdict is what comes back, with nvcc's own message.
    ok, err, hit = nvcc_compile(BAD, cmd(nvcc), tmp_path / "w3", cache=cache)
    assert (ok, hit, runs(log)) == (False, "nvcc", 2)
    assert "candidate.cu(1)" in err and "error" in err
    ok, err2, hit = nvcc_compile(BAD, cmd(nvcc), tmp_path / "w4", cache=cache)
    assert (ok, hit, err2, runs(log)) == (False, "home cache", err, 2)  # failures too
    # Other flags are another key.
    other = [*cmd(nvcc)[:3], "-arch=sm_90a", *cmd(nvcc)[4:]]
    assert nvcc_compile(GOOD, other, tmp_path / "w5", cache=cache)[2] == "nvcc"
    assert runs(log) == 3 and (cache.hits, cache.misses) == (2, 3)


def test_a_damaged_cache_file_is_a_miss_and_is_rewritten(tmp_path: Path) -> None:
    nvcc, log = counting_nvcc(tmp_path)
    cache = NvccCache(tmp_path / "cache")
    nvcc_compile(GOOD, cmd(nvcc), tmp_path / "w1", cache=cache)
    (entry,) = (tmp_path / "cache").rglob("*.json")
    entry.write_text('{"returncode": ')  # a torn write from some other tool
    assert nvcc_compile(GOOD, cmd(nvcc), tmp_path / "w2", cache=cache)[2] == "nvcc"
    assert runs(log) == 2
    assert nvcc_compile(GOOD, cmd(nvcc), tmp_path / "w3", cache=cache)[2] == "home cache"
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.name.endswith(".tmp")]


def test_compile_sample_twice_runs_nvcc_once_per_case_with_the_same_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvcc, log = counting_nvcc(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    assert nvcc_path() == nvcc  # the asset's own lookup finds the counting wrapper
    first = compile_sample(3, 7, tmp_path / "w1", impls=("cuda",), jobs=2, cache_dir=tmp_path / "c")
    assert runs(log) == 3 and not any(r["cached"] for r in first)
    second = compile_sample(
        3, 7, tmp_path / "w2", impls=("cuda",), jobs=2, cache_dir=tmp_path / "c"
    )
    assert runs(log) == 3 and all(r["cached"] for r in second)
    assert {r["answer"] for r in first} == {"nvcc"}
    assert {r["answer"] for r in second} == {"home cache"}
    strip = ("seconds", "cached", "answer")
    assert [{k: v for k, v in r.items() if k not in strip} for r in first] == [
        {k: v for k, v in r.items() if k not in strip} for r in second
    ]
    # The key is the rendered source: the stored files are exactly those of today's render.
    cases = {(r["op"], r["variant"], r["arch"], r["inject"]) for r in first}
    picked = [
        c
        for c in stratified_cases(7, impls=("cuda",))
        if (c.op, c.variant, c.arch, c.inject or "") in cases
    ]
    keys = {
        NvccCache.key(
            render_case(c)[0],
            [
                "-O3",
                "-std=c++17",
                f"-arch={c.extra['flag']}",
                "-c",
                "candidate.cu",
                "-o",
                "candidate.o",
            ],
            toolchain_id(nvcc),
        )
        for c in picked
    }
    stored = {p.stem for p in (tmp_path / "c").rglob("*.json")}
    assert stored and stored <= keys


def test_shipped_answers_serve_a_cold_cache_only_for_the_same_nvcc_build_and_source(
    tmp_path: Path,
) -> None:
    """A cold home with the package's answers of this nvcc build runs no nvcc; the
    answers are written by ``write_shipped_answers`` and read back exactly; another
    source (a changed template) is compiled for real and its own verdict used."""
    nvcc, log = counting_nvcc(tmp_path)
    filled = NvccCache(tmp_path / "filled")
    for src, w in ((GOOD, "w1"), (BAD, "w2")):
        nvcc_compile(src, cmd(nvcc), tmp_path / w, cache=filled)
    assert runs(log) == 2
    shipped_csv = tmp_path / "nvcc_answers.csv"
    tool = toolchain_id(nvcc)
    assert "unknown nvcc" not in tool  # the path is not part of the key, the build is
    n = write_shipped_answers(tmp_path / "filled", tool, "9.9.9", "2026-12-01", shipped_csv)
    answers = load_shipped_answers(shipped_csv)
    assert n == 2 and sorted(rc for rc, _ in answers.values()) == [0, 2]
    cold = NvccCache(tmp_path / "cold", answers)
    ok, err, where = nvcc_compile(BAD, cmd(nvcc), tmp_path / "w3", cache=cold)
    assert (ok, where, runs(log)) == (False, "shipped", 2) and "candidate.cu(1)" in err
    changed = GOOD.replace("2.0f", "3.0f")
    ok, _, where = nvcc_compile(changed, cmd(nvcc), tmp_path / "w4", cache=cold)
    assert (ok, where) == (True, "nvcc")
    assert runs(log) == 3 and (cold.shipped_hits, cold.misses) == (1, 1)


def test_a_damaged_shipped_file_is_an_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "nvcc_answers.csv"
    bad.write_text("key,returncode\nabc,not-a-number\n")
    with pytest.raises(ValueError, match="nvcc_answers.csv"):
        load_shipped_answers(bad)


def test_the_shipped_answers_cover_the_default_build_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package's answers are those of today's templates: a cold default build with the
    nvcc build they were made with compiles nothing. Fails after a template change that
    alters the sample's sources: run ``benchmarks/device/ship_nvcc_answers.py`` again."""
    import csv

    from dagster_project.settings import DEFAULT_SIM_SEED
    from dagster_project.sim.compile_check import SHIPPED_ANSWERS, toolchain_build

    assert REAL_NVCC is not None
    with SHIPPED_ANSWERS.open(newline="", encoding="utf-8") as fh:
        builds = {row["toolchain"] for row in csv.DictReader(fh)}
    if builds != {toolchain_build(toolchain_id(REAL_NVCC))}:
        pytest.skip(f"the answers were made with {builds}, this nvcc is another build")
    nvcc, log = counting_nvcc(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    assert nvcc_path() == nvcc  # the asset's own lookup finds the counting wrapper
    records = compile_sample(
        48,
        DEFAULT_SIM_SEED,
        tmp_path / "w",
        jobs=2,
        cache_dir=tmp_path / "cold",
        shipped=load_shipped_answers(),
    )
    assert runs(log) == 0
    assert {r["answer"] for r in records if r["checker"] == "nvcc"} == {"shipped"}
