"""The report's SVG charts (report/svg.py) against matplotlib's SVG backend, same data.

Why this exists: issue 24 asks to keep our own charts only if they beat matplotlib's SVG
backend on size and clarity. For the three chart kinds the report draws (a log2-axis
histogram with p10/median/p90 markers, a 20-bar horizontal bar chart with a reference
line, a 3-series monthly line chart), it renders both at the same pixel size and prints
bytes (raw, gzip, and base64 as the Markdown/metadata data URI carries them), element
counts, whether the text stays text (searchable, selectable, readable by a screen
reader) and whether values have hover tooltips. PNG screenshots for a look by eye are
written with ``--png DIR`` (headless Chromium).

matplotlib is not a kernelhouse dependency; install it anywhere on PYTHONPATH to run this:
    pip install --target /tmp/mpl --no-deps matplotlib cycler fonttools kiwisolver
    PYTHONPATH=/tmp/mpl python benchmarks/bench_report_charts.py [--png /tmp/charts]
"""

from __future__ import annotations

import argparse
import base64
import gzip
import io
import math
import random
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dagster_project.report import svg  # noqa: E402


def data() -> dict:
    rng = random.Random(24)
    speedups = [math.exp(rng.gauss(0.25, 0.5)) for _ in range(1200)]
    qs = sorted(speedups)
    markers = {"p10": qs[120], "median": qs[600], "p90": qs[1080]}
    gpus = [
        f"{g} (n={n})"
        for g, n in zip(
            [
                "H100",
                "A100",
                "H200",
                "MI300X",
                "L40S",
                "B200",
                "A10",
                "RTX 4090",
                "GH200",
                "L4",
                "V100",
                "T4",
                "MI250",
                "RTX 5090",
                "A6000",
                "H20",
                "MI325X",
                "B100",
                "A800",
                "L20",
            ],
            range(200, 0, -10),
            strict=True,
        )
    ]
    medians = [round(0.8 + rng.random() * 1.2, 3) for _ in gpus]
    months = [f"{2023 + i // 12}-{i % 12 + 1:02d}" for i in range(36)]
    lines = {
        r: [float(rng.randint(0, 60)) for _ in months] for r in ("vllm", "sglang", "flashinfer")
    }
    return {
        "speedups": speedups,
        "markers": markers,
        "gpus": gpus,
        "medians": medians,
        "months": months,
        "lines": lines,
    }


def ours(d: dict) -> dict[str, str]:
    return {
        "histogram": svg.histogram(
            d["speedups"],
            bins=24,
            log_x=True,
            markers=d["markers"],
            title="vllm · kernel",
            x_label="speedup (log2 axis)",
        ),
        "bar": svg.bar_chart(
            d["gpus"],
            d["medians"],
            title="median speedup by GPU",
            x_label="median speedup",
            reference=1.0,
        ),
        "line": svg.line_chart(
            d["months"], d["lines"], title="rows per month", x_label="month", y_label="rows"
        ),
    }


def mpl(d: dict, fonttype: str) -> dict[str, str]:
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = fonttype  # "path" (default) or "none" (text stays text)
    plt.rcParams["svg.hashsalt"] = "kernelhouse"
    out: dict[str, str] = {}
    dpi = 100

    def save(fig) -> str:
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
        plt.close(fig)
        return buf.getvalue()

    fig, ax = plt.subplots(figsize=(6.4, 3.0), dpi=dpi)
    logs = [math.log2(v) for v in d["speedups"]]
    ax.hist(logs, bins=24, color="#0072B2")
    for name, v in d["markers"].items():
        ax.axvline(math.log2(v), color="#D55E00", ls="--", lw=1)
        ax.text(math.log2(v), ax.get_ylim()[1] * 0.95, name, fontsize=8)
    ticks = [t for t in range(math.floor(min(logs)), math.ceil(max(logs)) + 1)]
    ax.set_xticks(ticks, [f"{2.0**t:g}×" for t in ticks])
    ax.set(title="vllm · kernel", xlabel="speedup (log2 axis)", ylabel="count")
    fig.tight_layout()
    out["histogram"] = save(fig)

    n = len(d["gpus"])
    fig, ax = plt.subplots(figsize=(6.4, (40 + 18 * n + 40) / dpi), dpi=dpi)
    ax.barh(range(n), d["medians"], color="#0072B2")
    ax.set_yticks(range(n), d["gpus"], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="#444444", lw=1)
    for i, v in enumerate(d["medians"]):
        ax.text(v, i, f" {v:g}", va="center", fontsize=7)
    ax.set(title="median speedup by GPU", xlabel="median speedup")
    fig.tight_layout()
    out["bar"] = save(fig)

    fig, ax = plt.subplots(figsize=(6.4, 3.0), dpi=dpi)
    colors = ["#0072B2", "#E69F00", "#009E73"]
    for (name, ys), c in zip(d["lines"].items(), colors, strict=True):
        ax.plot(range(len(d["months"])), ys, label=name, color=c, marker="o", ms=2)
    ax.set_xticks(range(0, len(d["months"]), 6), d["months"][::6])
    ax.legend(fontsize=8)
    ax.set(title="rows per month", xlabel="month", ylabel="rows")
    fig.tight_layout()
    out["line"] = save(fig)
    return out


def measure(doc: str) -> dict:
    raw = doc.encode("utf-8")
    return {
        "bytes": len(raw),
        "gzip": len(gzip.compress(raw, 9)),
        "data_uri": len(base64.b64encode(raw)),
        "elements": len(re.findall(r"<[a-zA-Z]", doc)),
        "text_elems": len(re.findall(r"<text\b", doc)),
        "tooltips": len(re.findall(r"<title>", doc)),
    }


def screenshot(doc: str, path: Path) -> None:
    html = path.with_suffix(".html")
    html.write_text(f"<html><body style='margin:0;background:#fff'>{doc}</body></html>")
    for exe in ("chromium", "chromium-browser", "google-chrome"):
        try:
            subprocess.run(
                [
                    exe,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    f"--screenshot={path}",
                    "--window-size=700,520",
                    str(html),
                ],
                capture_output=True,
                timeout=60,
                check=False,
            )
            return
        except FileNotFoundError:
            continue


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--png", type=Path, default=None)
    args = ap.parse_args()
    d = data()
    t0 = time.perf_counter()
    mine = ours(d)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs_path = mpl(d, "path")
    t_mpl = time.perf_counter() - t0
    theirs_text = mpl(d, "none")
    print(
        f"render time for the 3 charts: ours {t_ours * 1000:.1f} ms, "
        f"matplotlib {t_mpl * 1000:.0f} ms"
        " (first call includes its import)"
    )
    hdr = (
        f"{'chart':10s} {'renderer':26s} {'bytes':>8s} {'gzip':>7s} {'data URI':>9s} "
        f"{'elements':>9s} {'<text>':>7s} {'tooltips':>9s}"
    )
    print(hdr)
    for kind in mine:
        for name, doc in (
            ("ours (svg.py)", mine[kind]),
            ("matplotlib, text as paths", theirs_path[kind]),
            ("matplotlib, text as text", theirs_text[kind]),
        ):
            m = measure(doc)
            print(
                f"{kind:10s} {name:26s} {m['bytes']:8,d} {m['gzip']:7,d} {m['data_uri']:9,d} "
                f"{m['elements']:9,d} {m['text_elems']:7d} {m['tooltips']:9d}"
            )
            if args.png:
                args.png.mkdir(parents=True, exist_ok=True)
                screenshot(
                    doc,
                    args.png
                    / (
                        f"{kind}-{name.split()[0].strip(',')}-"
                        f"{'path' if 'paths' in name else 'text'}.png"
                    ),
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
