"""Check a model's cut points before planning: export and ``run --check`` at many boundaries.

A search picks one plan; a user may pick any other boundary. :func:`sweep_boundaries` chooses a
spread of boundaries of the op view: 0 and L (all on the server, all on the phone), boundaries
inside residual blocks (more than one tensor crosses), right after reshapes, around custom and
shape-computing operators, where an integer, boolean or scalar tensor would cross, and evenly
spaced ones up to the number asked for. :func:`sweep_cases` makes splits at every boundary and
two- and three-stage pipelines over the interior ones; :func:`run_case` exports each
(:func:`~optimizer.plan.export.export_plan`, which loads every part it writes) and runs it with
the single-file check (:func:`~optimizer.runtime.pipeline.run_plan`), recording one of:

* ``passed``: exported, loaded, and every output agrees with the single-file model at least
  ``min_agreement`` (top-1 agreement of :mod:`optimizer.runtime.check`);
* ``refused``: export refused the cut with one line saying why it is impossible (a boundary
  through a variable tensor, a control-flow subgraph, a part computing only constants);
* ``failed``: a part does not load or run, or export broke without such a line;
* ``disagrees``: the parts run but compute something else than the single-file model;
* ``no kernel``: a part holds a custom operator this LiteRT has no kernel for, so neither it nor
  the single file can run here (export says so and keeps it).

Results are kept in a JSON-lines journal, rewritten atomically after each case: an interrupted
sweep resumes where it stopped (:func:`export_sweep`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, DnnplanError, PartLoadError
from ..plan.part_load import NO_KERNEL
from ..graph.layergraph import LayerGraph

if TYPE_CHECKING:
    from ..plan.tflite_convert import ConversionMemo

#: interior boundaries chosen by default besides 0 and L
DEFAULT_BETWEEN = 8
KINDS = ("split", "pipeline2", "pipeline3")
#: boundaries placed only to spread the sweep over the network (each farthest from those chosen)
SPREAD = 3
#: operator types that compute shapes rather than activations (ONNX, TFLite)
SHAPE_OPS = frozenset({"Shape", "Size", "ConstantOfShape", "Range", "SHAPE", "RANGE", "FILL"})


@dataclass(frozen=True)
class Boundary:
    """A boundary of the op view (layers ``0..index-1`` before it) and why it was chosen."""

    index: int
    why: str


@dataclass(frozen=True)
class SweepCase:
    """One plan of the sweep: a split at ``cuts[0]``, or a pipeline with boundaries ``cuts``."""

    kind: str  # split | pipeline
    cuts: tuple[int, ...]

    @property
    def key(self) -> str:
        return f"{self.kind}:{','.join(map(str, self.cuts))}"


@dataclass
class CaseResult:
    """What exporting and checking one :class:`SweepCase` gave."""

    model: str
    dtype: str
    kind: str
    cuts: list[int]
    status: str  # passed | refused | failed | disagrees
    reason: str = ""
    agreement: float | None = None
    max_abs_diff: float | None = None
    sqnr_db: float | None = None
    parts: int = 0
    crossing: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def key(self) -> str:
        return SweepCase(self.kind, tuple(self.cuts)).key

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sweep_boundaries(graph: LayerGraph, between: int = DEFAULT_BETWEEN) -> list[Boundary]:
    """0, L and at least ``between`` interior boundaries of the op-view ``graph`` (see the module
    docstring), in increasing order; every boundary when the graph has fewer.

    Boundaries between runtime kernels are preferred (``LayerGraph.kernel_anchors``: a cut that
    separates a batch-norm or activation from its convolution makes the parts compute one more
    INT8 rounding than the single file, which ``export`` notes); one such kernel split is chosen
    on purpose."""
    n = len(graph)
    if n < 1:
        raise ConfigError(f"{graph.name}: the graph has no layers to cut")
    anchors = graph.kernel_anchors
    chosen: dict[int, str] = {0: "server only", n: "phone only"}

    def clean(b: int) -> bool:
        return b >= n or int(anchors[b]) == b

    def pick(cands: Iterable[int], why: str, most: int, kernels_only: bool = True) -> None:
        """Up to ``most`` of ``cands`` spread over the network."""
        found = sorted({c for c in cands if 0 < c < n and c not in chosen and (clean(c) or not kernels_only)})
        for k in range(most):
            if found:
                chosen[found[(2 * k + 1) * len(found) // (2 * most)]] = why

    layers = graph.layers
    crossing = {k: graph.cut_tensors(k) for k in range(1, n)}
    pick((k for k, ts in crossing.items() if len(ts) > 1), "inside a block", 2)
    pick((k + 1 for k, la in enumerate(layers) if la.op == "reshape"), "after a reshape", 2)
    custom = [k for k, la in enumerate(layers) if la.op == "custom"]
    pick(custom, "before a custom op", 1, kernels_only=False)
    pick((k + 1 for k in custom), "after a custom op", 1, kernels_only=False)
    pick((k + 1 for k, la in enumerate(layers) if la.op_type in SHAPE_OPS), "after a shape op", 2,
         kernels_only=False)
    pick((k for k, ts in crossing.items() if any(len(t.shape) < 2 for t in ts)), "a vector crosses", 1)
    pick((k for k in range(1, n) if not clean(k)), "inside a kernel", 1, kernels_only=False)
    spread = 0
    while spread < SPREAD or len(chosen) - 2 < min(between, n - 1):
        spots = ([b for b in range(1, n) if clean(b) and b not in chosen]
                 or [b for b in range(1, n) if b not in chosen])  # kernel splits only when nothing else is left
        if not spots:
            break
        far = max(spots, key=lambda b: min(abs(b - c) for c in chosen))  # farthest from every chosen one
        chosen[far] = "spread"
        spread += 1
    return [Boundary(k, chosen[k]) for k in sorted(chosen)]


def parse_boundaries(text: str, n: int) -> list[int]:
    """``"0,17,L"`` → ``[0, 17, n]`` (``L`` is the layer count); refuses boundaries outside 0..n."""
    out = []
    for item in (s.strip() for s in text.split(",")):
        if item.upper() == "L":
            out.append(n)
            continue
        try:
            value = int(item)
        except ValueError:
            raise ConfigError(f"--boundaries {text!r}: {item!r} is not a boundary; give integers in 0..{n} "
                              "or L, e.g. --boundaries 0,17,L") from None
        if not 0 <= value <= n:
            raise ConfigError(f"--boundaries {text!r}: {value} is outside 0..{n} (the model has {n} op layers)")
        out.append(value)
    return sorted(set(out))


def sweep_cases(boundaries: Iterable[int], n: int, kinds: Iterable[str] = KINDS) -> list[SweepCase]:
    """Splits at every boundary; 2-stage pipelines at every interior boundary; 3-stage pipelines
    over consecutive pairs of interior boundaries (each interior boundary in one of them)."""
    kinds = list(kinds)
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ConfigError(f"--kinds {','.join(kinds)}: unknown kind {bad[0]!r}; expected some of {', '.join(KINDS)}")
    bounds = sorted(set(boundaries))
    interior = [b for b in bounds if 0 < b < n]
    cases = []
    if "split" in kinds:
        cases += [SweepCase("split", (b,)) for b in bounds]
    if "pipeline2" in kinds:
        cases += [SweepCase("pipeline", (b,)) for b in interior]
    if "pipeline3" in kinds:
        pairs = [tuple(interior[k:k + 2]) for k in range(0, len(interior) - 1, 2)]
        if len(interior) % 2 and len(interior) > 1:
            pairs.append(tuple(interior[-2:]))
        cases += [SweepCase("pipeline", p) for p in pairs]
    return cases


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def run_case(model: str, graph: LayerGraph, case: SweepCase, workdir: Path, *, dtype: str = "fp32",
             input_shapes: dict[str, tuple[int, ...]] | None = None, variant: dict[str, Any] | None = None,
             frames: int = 3, min_agreement: float = 0.99, seed: int = 0, samples: int = 16,
             keras_model: Any = None, memo: ConversionMemo | None = None) -> CaseResult:
    """Export ``case`` of ``model`` into a folder under ``workdir`` and run it with the
    single-file check (see the module docstring for the statuses); the folder is removed.
    ``keras_model``: the zoo network already built (:func:`~optimizer.plan.keras_model.load_plan_model`),
    so that every case does not build it and re-estimate its batch norm again; ``memo``: the
    :class:`~optimizer.plan.tflite_convert.ConversionMemo` of parts the earlier cases converted."""
    from ..plan.export import export_plan
    from ..plan.manual_plan import plan_for_boundaries
    from .pipeline import run_plan

    t0 = time.perf_counter()
    res = CaseResult(model=graph.name, dtype=dtype, kind=case.kind, cuts=list(case.cuts), status="failed")
    art = Path(tempfile.mkdtemp(prefix="sweep-", dir=workdir)) / "art"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plan = plan_for_boundaries(model, list(case.cuts), kind=case.kind, dtype=dtype, variant=variant,
                                       input_shapes=input_shapes, graph=graph)
            notes: list[str] = []
            try:
                manifest = export_plan(plan, art, model=keras_model, seed=seed, samples=samples,
                                       keep_reference=True, note=notes.append, memo=memo)
            except PartLoadError as exc:
                res.reason = f"export: {_first_line(exc)}"
                return res
            except DnnplanError as exc:
                res.status, res.reason = "refused", _first_line(exc)
                return res
            res.parts = len(manifest.parts)
            res.crossing = [{"name": t.name, "dtype": t.dtype, "shape": t.shape}
                            for p in manifest.parts[1:] for t in p.inputs]
            unrunnable = [line for line in notes if NO_KERNEL in line]
            if unrunnable:
                res.status, res.reason = "no kernel", unrunnable[0]
                return res
            report = run_plan(plan, art, frames=frames, pin=False, seed=seed, check_min_agreement=min_agreement)
        check = report.check
        assert check is not None
        res.agreement = check.agreement
        res.max_abs_diff = max(o.max_abs_diff for o in check.outputs)
        sq = [o.sqnr_db for o in check.outputs if o.sqnr_db is not None]
        res.sqnr_db = min(sq) if sq else None
        res.status = "passed" if check.passed else "disagrees"
    except Exception as exc:  # noqa: BLE001 - recorded: a sweep reports every failure, it does not stop
        res.reason = f"{type(exc).__name__}: {_first_line(exc)}"
        if not isinstance(exc, DnnplanError):
            res.reason += " @ " + " < ".join(f"{Path(f.filename).name}:{f.lineno}"
                                             for f in reversed(traceback.extract_tb(exc.__traceback__)[-3:]))
    finally:
        shutil.rmtree(art.parent, ignore_errors=True)
        res.seconds = time.perf_counter() - t0
    return res


def read_journal(path: Path | None) -> dict[str, CaseResult]:
    """Finished cases of an earlier run (key → result); empty without a journal."""
    if path is None or not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = CaseResult(**json.loads(line))
            out[f"{r.model}|{r.dtype}|{r.key}"] = r
    return out


def export_sweep(model: str, graph: LayerGraph, cases: list[SweepCase], *, dtype: str = "fp32",
                 input_shapes: dict[str, tuple[int, ...]] | None = None, variant: dict[str, Any] | None = None,
                 frames: int = 3, min_agreement: float = 0.99, seed: int = 0, samples: int = 16,
                 journal: Path | None = None,
                 progress: Callable[[SweepCase, CaseResult | None], None] | None = None,
                 time_limit_s: float | None = None) -> list[CaseResult]:
    """Run every case (:func:`run_case`); cases already in ``journal`` are not run again, and each
    new result is added to it (the file is rewritten atomically after each case). A zoo network's
    sub-models are converted once per sweep (a :class:`~optimizer.plan.tflite_convert.ConversionMemo`:
    every case ships the same single-file reference, and a 3-stage pipeline's first stage is a
    2-stage pipeline's). With
    ``time_limit_s``, no new case starts once that many seconds have passed: the results returned
    then lack the cases not run (a later call with the same journal resumes)."""
    from ..fileio import atomic_write_bytes

    started = time.perf_counter()

    done = read_journal(journal)
    results = []
    keras_model: Any = None
    memo: ConversionMemo | None = None
    if graph.fmt == "zoo" and any(f"{graph.name}|{dtype}|{c.key}" not in done for c in cases):
        from ..plan.keras_model import load_plan_model
        from ..plan.manual_plan import plan_for_boundaries

        keras_model, _, _ = load_plan_model(plan_for_boundaries(model, [], variant=variant, graph=graph), seed=seed)
    with tempfile.TemporaryDirectory(prefix="dnnplan-sweep-") as work:
        if keras_model is not None:
            from ..plan.tflite_convert import ConversionMemo

            memo = ConversionMemo(Path(work) / "conversions")
        for case in cases:
            key = f"{graph.name}|{dtype}|{case.key}"
            if key in done:
                results.append(done[key])
                if progress:
                    progress(case, done[key])
                continue
            if time_limit_s is not None and time.perf_counter() - started > time_limit_s:
                break
            if progress:
                progress(case, None)
            res = run_case(model, graph, case, Path(work), dtype=dtype, input_shapes=input_shapes, variant=variant,
                           frames=frames, min_agreement=min_agreement, seed=seed, samples=samples,
                           keras_model=keras_model, memo=memo)
            results.append(res)
            done[key] = res
            if journal is not None:
                atomic_write_bytes(journal, "".join(json.dumps(r.to_dict()) + "\n" for r in done.values()).encode())
            if progress:
                progress(case, res)
    return results
