"""The config-prediction benchmark: pick a launch config, scored by measured regret.

The offline reward users can train against without a GPU (issue 38). A *task* is one
measured latency table (``datasets.measured_configs``: one tuned row on one GPU, its
candidate configs and their times): given the kernel, the deployment (repo, quantisation,
M, N, K, E, top-k, GPU) and the table's candidate configs, a predictor picks one. Its
score is the **regret** ``t(pick) / t_best - 1``, where ``t_best`` is the best time
measured in that table (the best *known* time: the tables are partial, so regret is a
lower bound of the regret against the true optimum). A pick that did not run (any status
but ``ok``) is a failure: it is counted, and its regret is the table's slowest ``ok``
time (so a failure is never cheaper than the worst config that ran).

Where a table holds an exhaustive search (every launchable config of the upstream
tuner's space, ``gpu.space``; ``Task.exhaustive``), its candidates are the space's
results alone (one device session; older neighbour timings of the same row are left
aside), ``t_best`` is the true optimum over that space and the regret is exact, not a
lower bound. One row timed under skewed
routing is a task of its own (``Task.routing``), held out with its shape.

Tasks come from the shipped batches alone (``rewards.measured.read_shipped``), with
superseded tables left out (``mark_superseded``: measured on a grid the engine would not
use) and tables with fewer than two ``ok`` candidates left out (no choice to make).

Splits (deterministic; ``SPLIT_VERSION``):

* ``held_out_shape``: a *shape* is everything but M (kernel, repo, quantisation, block
  shape, E, N, K, top-k, fused shared experts, the GEMMs timed); a shape is held out when
  the first byte of the SHA-256 of its key is below 256/5 (about a fifth of the shapes,
  every M of a held-out shape with it, on every GPU). Train on the rest.
* ``held_out_gpu``: train on the tables measured on one GPU, test on those measured on
  the other (each direction is reported once tables of two GPUs exist).

Predictors (``PREDICTORS``): the upstream ``tuned`` config, the engine's ``default``
heuristic, ``nearest_shape`` (the nearest training shape on the same GPU, M included:
its table's ranking of the configs both tables measured), ``same_shape_other_gpu`` (the
same shape and nearest M measured on another GPU; held-out-GPU split only) and two
small learned models in numpy: ``ridge`` (ridge regression of ``log(t / t_tuned)`` on how
a config differs from the tuned one, times shape features, per kernel kind) and
``knn_moves`` (the nearest training tables of the same family vote on each move from the
tuned config, ``BLOCK_SIZE_M*2`` and the like, by its mean ``log(t / t_tuned)``; ``KNN_K``
chosen by cross-validation inside the training shapes, ``cv_knn``). Neighbour predictors
fall back to the tuned config when no neighbour can vote; the fallback count is reported.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

SPLIT_VERSION = "1"
HELD_OUT_SHARE = 5  # one shape in HELD_OUT_SHARE is held out


@dataclass(frozen=True)
class Candidate:
    label: str
    key: str  # canonical config text
    config: dict[str, int]
    t_us: float | None  # None: did not run


@dataclass(frozen=True)
class Task:
    """One measured latency table: what a predictor sees, and the times that score it."""

    row_id: str
    measured_on: str
    kernel: str
    repo: str
    quant: str
    M: int
    N: int
    K: int
    E: int
    top_k: int
    n_shared: int
    moe_gemms: str
    block_shape: tuple[int, ...]
    candidates: tuple[Candidate, ...]
    #: the inputs' token-to-expert distribution (``gpu.routing``): a table of its own
    routing: str = "uniform"
    #: every candidate of the upstream tuner's pruned space has a result
    #: (``gpu.space``): ``t_best`` is then the true optimum, not the best of a partial table
    exhaustive: bool = False

    @property
    def shape_key(self) -> str:
        """Everything but M and the GPU (``held_out_shape`` groups by it)."""
        return "|".join(
            map(
                str,
                (
                    self.kernel,
                    self.repo,
                    self.quant,
                    self.block_shape,
                    self.E,
                    self.N,
                    self.K,
                    self.top_k,
                    self.n_shared,
                    self.moe_gemms,
                ),
            )
        )

    @property
    def t_best(self) -> float:
        return min(c.t_us for c in self.candidates if c.t_us is not None)

    @property
    def t_worst(self) -> float:
        return max(c.t_us for c in self.candidates if c.t_us is not None)

    def index_of(self, label: str) -> int:
        return next(i for i, c in enumerate(self.candidates) if c.label == label)

    def relative(self) -> dict[str, float]:
        """``t / t_best`` of every config that ran, by config key."""
        best = self.t_best
        return {c.key: c.t_us / best for c in self.candidates if c.t_us is not None}


def _int(v: Any) -> int:
    return int(v) if v is not None else 0


def tasks_from_frame(raw: pl.DataFrame) -> list[Task]:
    """Tasks of a ``RAW_SCHEMA`` frame as the lake keeps it (``measured.merge_results``): one per
    (row, GPU measured on), superseded tables and tables with < 2 ``ok`` left out."""
    live = raw.filter(pl.col("superseded_reason").is_null() & pl.col("measured_on").is_not_null())
    for col, dtype in (("routing", pl.String()), ("exhaustive_space", pl.String())):
        if col not in live.columns:
            live = live.with_columns(pl.lit(None, dtype=dtype).alias(col))
    if "space_size" not in live.columns:
        live = live.with_columns(pl.lit(None, dtype=pl.Int64()).alias("space_size"))
    live = live.with_columns(pl.col("routing").fill_null("uniform"))
    keys = ["row_id", "measured_on", "routing"]
    complete = {
        (r[0], r[1], r[2])
        for r in live.group_by(keys)
        .agg(
            (pl.col("exhaustive_space").is_not_null().sum() >= pl.col("space_size").max())
            .fill_null(False)
            .alias("_complete")
        )
        .filter(pl.col("_complete"))
        .select(keys)
        .iter_rows()
    }
    out: list[Task] = []
    for key, g in live.sort("cand_index").group_by(keys, maintain_order=True):
        task = _task(g, exhaustive=tuple(key) in complete)
        if sum(c.t_us is not None for c in task.candidates) >= 2:
            out.append(task)
    return sorted(out, key=lambda t: (t.row_id, t.measured_on, t.routing))


def _task(g: pl.DataFrame, exhaustive: bool = False) -> Task:
    """The task of one table's results; ``exhaustive``: its space is complete (every
    candidate stamped with the space has a result: the dataset's ``exhaustive``)."""
    if exhaustive:  # one session's times: the space's, not older neighbours beside them
        g = g.filter(pl.col("exhaustive_space").is_not_null())
    first = g.row(0, named=True)
    cands = []
    for r in g.iter_rows(named=True):
        cfg = json.loads(r["config"] or "{}")
        key = json.dumps(cfg, sort_keys=True, separators=(",", ":"))
        ok = r["status"] == "ok" and r["t_us"] is not None and r["t_us"] > 0
        cands.append(Candidate(r["label"], key, cfg, float(r["t_us"]) if ok else None))
    return Task(
        row_id=first["row_id"],
        measured_on=first["measured_on"],
        kernel=first["kernel"],
        repo=first["repo"],
        quant=first["quant"] or "",
        M=_int(first["M"]),
        N=_int(first["N"]),
        K=_int(first["K"]),
        E=_int(first["E"]),
        top_k=_int(first["top_k"]),
        n_shared=_int(first["n_shared"]),
        moe_gemms=first["moe_gemms"] or "",
        block_shape=tuple(first["block_shape"] or ()),
        candidates=tuple(cands),
        routing=str(first.get("routing") or "uniform"),
        exhaustive=exhaustive,
    )


def shipped_tasks(root: Path | None = None) -> list[Task]:
    """Every task of the batches shipped in the package (no lake, no GPU)."""
    from dagster_project.rewards.measured import merge_results, read_shipped, shipped_batches

    return tasks_from_frame(merge_results(read_shipped(shipped_batches(root))))


# -- splits ---------------------------------------------------------------------------


def shape_held_out(task: Task) -> bool:
    """``held_out_shape``: the first byte of SHA-256 of the shape key below 256/5."""
    return hashlib.sha256(task.shape_key.encode()).digest()[0] < 256 // HELD_OUT_SHARE


@dataclass(frozen=True)
class Split:
    name: str
    train: list[Task]
    test: list[Task]


def splits(tasks: Sequence[Task]) -> list[Split]:
    """``held_out_shape`` always; ``held_out_gpu:<train> -> <test>`` for every ordered
    pair of GPUs the tasks were measured on."""
    out = [
        Split(
            "held_out_shape",
            [t for t in tasks if not shape_held_out(t)],
            [t for t in tasks if shape_held_out(t)],
        )
    ]
    gpus = sorted({t.measured_on for t in tasks})
    for a in gpus:
        for b in gpus:
            if a != b:
                out.append(
                    Split(
                        f"held_out_gpu:{a} -> {b}",
                        [t for t in tasks if t.measured_on == a],
                        [t for t in tasks if t.measured_on == b],
                    )
                )
    return out


# -- predictors -----------------------------------------------------------------------


@dataclass
class Pick:
    index: int
    fallback: bool = False


Predictor = Callable[[Sequence[Task]], Callable[[Task], Pick]]


def by_label(label: str) -> Predictor:
    """The candidate with this label (``tuned``, ``default``): every table has both."""

    def fit(_train: Sequence[Task]) -> Callable[[Task], Pick]:
        def predict(task: Task) -> Pick:
            if any(c.label == label for c in task.candidates):
                return Pick(task.index_of(label))
            return Pick(task.index_of("tuned"), fallback=True)

        return predict

    return fit


def _log2(v: int) -> float:
    return math.log2(max(1, v))


def shape_distance(a: Task, b: Task) -> float:
    """Distance between two deployments: octaves of M, N, K and E apart, plus one per
    differing top-k or quantisation block shape."""
    d = sum(abs(_log2(x) - _log2(y)) for x, y in ((a.M, b.M), (a.N, b.N), (a.K, b.K), (a.E, b.E)))
    return d + (a.top_k != b.top_k) + (a.block_shape != b.block_shape)


def transfer(task: Task, neighbours: Sequence[Task], limit: int = 5) -> Pick:
    """The task's candidate that ran fastest (relative to its own table's best) in the
    nearest neighbour table sharing a config with the task; the tuned config when none
    of the first ``limit`` neighbours shares one."""
    keys = {c.key: i for i, c in enumerate(task.candidates)}
    for nb in neighbours[:limit]:
        rel = {k: v for k, v in nb.relative().items() if k in keys}
        if rel:
            return Pick(keys[min(rel, key=lambda k: (rel[k], k))])
    return Pick(task.index_of("tuned"), fallback=True)


def _family(t: Task) -> tuple[str, str, str, str]:
    return (t.kernel, t.repo, t.quant, t.moe_gemms)


def nearest_shape(train: Sequence[Task]) -> Callable[[Task], Pick]:
    """Nearest training table of the same family (kernel, repo, quantisation, GEMMs) on
    the same GPU."""
    pool: dict[tuple, list[Task]] = {}
    for t in train:
        pool.setdefault((*_family(t), t.measured_on), []).append(t)

    def predict(task: Task) -> Pick:
        cands = pool.get((*_family(task), task.measured_on), [])
        ranked = sorted(cands, key=lambda t: (shape_distance(task, t), t.row_id))
        return transfer(task, [t for t in ranked if t.row_id != task.row_id])

    return predict


def same_shape_other_gpu(train: Sequence[Task]) -> Callable[[Task], Pick]:
    """The same shape measured on another GPU, nearest M first (the same tuned row
    measured on the other GPU when there is one)."""
    pool: dict[str, list[Task]] = {}
    for t in train:
        pool.setdefault(t.shape_key, []).append(t)

    def predict(task: Task) -> Pick:
        cands = [t for t in pool.get(task.shape_key, []) if t.measured_on != task.measured_on]
        ranked = sorted(
            cands,
            key=lambda t: (t.row_id != task.row_id, abs(_log2(t.M) - _log2(task.M)), t.row_id),
        )
        return transfer(task, ranked)

    return predict


# -- the learned model: ridge regression in numpy ------------------------------------

CONFIG_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps")
RIDGE_LAMBDA = 1.0


def _config_vector(cfg: Mapping[str, int]) -> list[float]:
    return [_log2(int(cfg.get(k, 1))) for k in CONFIG_KEYS] + [float(cfg.get("num_stages", 3))]


def features(task: Task, cfg: Mapping[str, int], tuned: Mapping[str, int]) -> np.ndarray:
    """How a config differs from the row's tuned config (log2 ratio of each tile, group
    and warps; stages) and how far (its absolute value), alone and times each shape
    feature (log2 M, N, K, E and pairs per expert). No bias: the tuned config itself
    scores exactly 0, so the model moves away from it only where it predicts a gain."""
    per_expert = task.M * max(1, task.top_k + task.n_shared) / task.E if task.E else task.M
    shape = [_log2(task.M), _log2(task.N), _log2(task.K), _log2(task.E), math.log2(per_expert)]
    delta = [a - b for a, b in zip(_config_vector(cfg), _config_vector(tuned), strict=True)]
    size = [abs(d) for d in delta]  # moving either way costs (a linear model alone would
    # always find one direction of every key predicted faster than the tuned config)
    both = [*delta, *size]
    return np.array([*both, *(s * d for s in shape for d in both)], dtype=np.float64)


@dataclass
class Ridge:
    """``log(t / t_tuned)`` ~ ``features``, one weight vector per kernel kind (MoE /
    matmul). A config that did not run is a sample too, at the failure penalty of
    ``regret`` (the table's slowest time), so the model learns to avoid failures."""

    weights: dict[str, np.ndarray] = field(default_factory=dict)

    @staticmethod
    def kind(task: Task) -> str:
        return "moe" if task.E else "mm"

    @staticmethod
    def tuned(task: Task) -> Candidate | None:
        return next((c for c in task.candidates if c.label == "tuned"), None)

    def fit(self, train: Sequence[Task]) -> Ridge:
        xs: dict[str, list[np.ndarray]] = {}
        ys: dict[str, list[float]] = {}
        for t in train:
            tuned = self.tuned(t)
            if tuned is None or tuned.t_us is None:
                continue
            worst = t.t_worst
            for c in t.candidates:
                xs.setdefault(self.kind(t), []).append(features(t, c.config, tuned.config))
                ys.setdefault(self.kind(t), []).append(math.log((c.t_us or worst) / tuned.t_us))
        for kind, rows in xs.items():
            x = np.stack(rows)
            a = x.T @ x + RIDGE_LAMBDA * np.eye(x.shape[1])
            self.weights[kind] = np.linalg.solve(a, x.T @ np.array(ys[kind]))
        return self

    def predict(self, task: Task) -> Pick:
        tuned = self.tuned(task)
        w = self.weights.get(self.kind(task))
        if tuned is None or w is None:
            return Pick(task.index_of("tuned"), fallback=True)
        scores = [float(features(task, c.config, tuned.config) @ w) for c in task.candidates]
        return Pick(int(np.argmin(scores)))


def ridge(train: Sequence[Task]) -> Callable[[Task], Pick]:
    return Ridge().fit(train).predict


# -- the second learned model: a nearest-neighbour vote on moves from the tuned config --

KNN_K = 20  # chosen by 4-fold CV over the training shapes of held_out_shape (RESULTS)
OTHER_GPU_DISTANCE = 2.0  # a table of another GPU counts as this many octaves further


def moves(task: Task) -> dict[str, float]:
    """``log(t / t_tuned)`` of every other candidate by label (``BLOCK_SIZE_M*2``,
    ``default``, ...): labels name the same move from the tuned config in every table. A
    candidate that did not run counts at the table's slowest time (``regret``'s
    penalty). Empty when the tuned config did not run."""
    tuned = next((c for c in task.candidates if c.label == "tuned"), None)
    if tuned is None or tuned.t_us is None:
        return {}
    worst = task.t_worst
    return {
        c.label: math.log((c.t_us or worst) / tuned.t_us)
        for c in task.candidates
        if c.label != "tuned"
    }


def knn_moves(train: Sequence[Task], k: int = KNN_K) -> Callable[[Task], Pick]:
    """The ``k`` nearest training tables of the same family (``shape_distance``, a
    table of another GPU ``OTHER_GPU_DISTANCE`` further) vote on each move by its mean
    ``log(t / t_tuned)``; the best move is taken when its mean is a gain, else the tuned
    config stays."""
    pool: dict[tuple, list[tuple[Task, dict[str, float]]]] = {}
    for t in train:
        m = moves(t)
        if m:
            pool.setdefault(_family(t), []).append((t, m))

    def distance(task: Task, other: Task) -> float:
        far = OTHER_GPU_DISTANCE if other.measured_on != task.measured_on else 0.0
        return shape_distance(task, other) + far

    def predict(task: Task) -> Pick:
        near = sorted(
            (x for x in pool.get(_family(task), []) if x[0].row_id != task.row_id),
            key=lambda x: (distance(task, x[0]), x[0].row_id),
        )[:k]
        votes: dict[str, list[float]] = {}
        for _t, m in near:
            for label, v in m.items():
                votes.setdefault(label, []).append(v)
        labels = {c.label for c in task.candidates}
        means = {k: sum(v) / len(v) for k, v in votes.items() if k in labels}
        if not means:
            return Pick(task.index_of("tuned"), fallback=True)
        label = min(means, key=lambda k: (means[k], k))
        return Pick(task.index_of(label if means[label] < 0 else "tuned"))

    return predict


PREDICTORS: dict[str, Predictor] = {
    "tuned": by_label("tuned"),
    "default": by_label("default"),
    "nearest_shape": nearest_shape,
    "same_shape_other_gpu": same_shape_other_gpu,
    "ridge": ridge,
    "knn_moves": knn_moves,
}


# -- scoring --------------------------------------------------------------------------


def regret(task: Task, pick: Pick) -> tuple[float, bool]:
    """(regret, failed): ``t(pick) / t_best - 1``; a pick that did not run scores the
    table's slowest ``ok`` time."""
    c = task.candidates[pick.index]
    if c.t_us is None:
        return task.t_worst / task.t_best - 1.0, True
    return c.t_us / task.t_best - 1.0, False


@dataclass(frozen=True)
class Score:
    split: str
    predictor: str
    n: int
    mean_regret: float
    p90_regret: float
    zero_regret_share: float
    failed: int
    fallback: int


def score(split: Split, name: str, predictor: Predictor) -> Score | None:
    """One predictor on one split; ``None`` when it does not apply (no test tasks, or a
    cross-GPU predictor on a single-GPU split)."""
    if not split.test or (
        name == "same_shape_other_gpu" and not split.name.startswith("held_out_gpu")
    ):
        return None
    predict = predictor(split.train)
    regrets: list[float] = []
    failed = fallback = 0
    for task in split.test:
        pick = predict(task)
        r, f = regret(task, pick)
        regrets.append(r)
        failed += f
        fallback += pick.fallback
    arr = np.array(regrets)
    return Score(
        split.name,
        name,
        len(regrets),
        float(arr.mean()),
        float(np.quantile(arr, 0.9)),
        float((arr <= 1e-12).mean()),
        failed,
        fallback,
    )


def benchmark(tasks: Sequence[Task]) -> list[Score]:
    """Every predictor on every split, in ``PREDICTORS`` order."""
    out = []
    for split in splits(tasks):
        for name, predictor in PREDICTORS.items():
            s = score(split, name, predictor)
            if s is not None:
                out.append(s)
    return out


def split_sizes(tasks: Sequence[Task]) -> dict[str, tuple[int, int]]:
    """(train, test) tasks per split, for the report."""
    return {s.name: (len(s.train), len(s.test)) for s in splits(tasks)}


def cv_knn(train: Sequence[Task], ks: Sequence[int], folds: int = 4) -> dict[int, float]:
    """Mean regret of ``knn_moves`` per ``k`` in ``folds``-fold cross-validation over the
    training shapes (fold = the second byte of the shape key's SHA-256 modulo ``folds``),
    so ``KNN_K`` is chosen without looking at the held-out shapes."""

    def fold(t: Task) -> int:
        return hashlib.sha256(t.shape_key.encode()).digest()[1] % folds

    out = {}
    for k in ks:
        regrets = []
        for f in range(folds):
            predict = knn_moves([t for t in train if fold(t) != f], k)
            regrets += [regret(t, predict(t))[0] for t in train if fold(t) == f]
        out[k] = float(np.mean(regrets))
    return out
