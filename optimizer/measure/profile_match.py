"""Rows of a per-operator profile matched to a LayerGraph's layers: the one job of this module.

The rows come from :mod:`optimizer.measure.profile_formats`. Matching (:func:`match_profile`):
a row's tensor/node names are looked up among the layer names
(:func:`optimizer.measure.ort_profile.attribute_node`); when fewer than half of the per-node
rows match by name, rows are matched by op type in execution order instead. A row anchored on
a fused activation reaches back to the kernel it was fused into; layers that are not kernels
of their own (batch-norm, activation, padding: ``dispatched`` False) join the kernel before
them, as TFLite and onnxruntime fuse them; a delegate row whose names match nothing covers the
layers between its neighbours; a "Summary by node type" row covers every layer of its op
family. A time that covers several layers is split by the modeled share (the analytic latency
of the layers on the target processor, else their MACs, else bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..graph.layergraph import LayerGraph
from ..graph.tflite_import import OP_FAMILY as TFLITE_OP_FAMILY
from .profile_formats import Profile, ProfileRecord

#: data-movement operators: on a layer the model costs at zero (a fused reshape, a batch-norm a
#: converter's layout transpose is named after) their time is kept apart, not put on a kernel
LAYOUT_OPS: frozenset[str] = frozenset({
    "Transpose", "ReorderInput", "ReorderOutput", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Cast",
    "Identity", "TRANSPOSE", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "CAST",
})

#: TFLite operator -> LayerGraph op family: the TFLite importer's own table
#: (:data:`optimizer.graph.tflite_import.OP_FAMILY`, so a profile row and the imported layer of
#: one operator agree), plus the operators a profile shows that the importer files under
#: ``other`` or as custom ops
TFLITE_FAMILIES: dict[str, str] = {
    **TFLITE_OP_FAMILY, "GATHER": "reshape", "QUANTIZE": "other", "DEQUANTIZE": "other",
    "TFLite_Detection_PostProcess": "custom",
}


@dataclass
class ProfileMatch:
    """Per-layer times [L] of one profile matched to ``graph`` and how they were obtained."""

    profile: Profile
    graph: LayerGraph
    latency_s: np.ndarray  # [L], NaN where no row covers the layer
    mode: str  # "name", "order" or "summary"
    rows_matched: int
    unmatched_rows: list[ProfileRecord] = field(default_factory=list)
    unmatched_layers: list[int] = field(default_factory=list)
    single: np.ndarray | None = None  # [L] bool: the layer's time is one row's own (not a split)
    notes: list[str] = field(default_factory=list)

    owner: np.ndarray | None = None  # [L] index of the row covering each layer, -1 for none
    #: [L] seconds of data-movement rows on layers the model costs at zero (in ``latency_s`` too)
    unmodeled_s: np.ndarray | None = None

    @property
    def covered(self) -> np.ndarray:
        """[L] bool: a profile row covers the layer."""
        return self.owner >= 0 if self.owner is not None else self.latency_s > 0

    def warnings(self) -> list[str]:
        """One line per unmatched row and per unmatched layer, then the notes."""
        where = self.profile.path
        out = [f"{where}: row {record.op_type} {record.name[:80]!r} ({record.time_s * 1e3:.3f} ms) matches no layer of "
               f"{self.graph.name!r}; its time is left out" for record in self.unmatched_rows]
        out += [f"{where}: layer {i} {self.graph.layers[i].name!r} ({self.graph.layers[i].op}) has no profile row "
                "(fused by the runtime into a neighbour, or not profiled); counted as 0 ms"
                for i in self.unmatched_layers]
        return out + [f"{where}: {note}" for note in self.notes]


def table_match(table: Any, graph: LayerGraph, processor: str = "cpu", dtype: str = "fp32") -> ProfileMatch:
    """A per-layer measured table (``dnnplan measure``'s onnxruntime table,
    :func:`optimizer.measure.host.measure_model`) as the :class:`ProfileMatch` the profile fit
    takes: every layer covered by its own row (a layer the runtime fused away timed at 0), each
    kernel layer timed on its own (``single``).

    The table's layer times already hold the executor's own time (one thread: they sum to the
    run's CPU time, :mod:`optimizer.measure.ort_profile`), so no invoke overhead is set apart.

    Raises
    ------
    ConfigError
        The table's rows do not name ``graph``'s layers in order
        (:func:`optimizer.cost.measured.check_matches`).
    """
    from ..cost.features import layer_arrays
    from ..cost.measured import check_matches

    layer_s = np.nan_to_num(check_matches(table, graph, processor), nan=0.0)
    where = table.path or f"{graph.name} measured table"
    meta = table.meta
    profile = Profile(where, str(meta.get("backend", "measured")), (), meta.get("whole_median_s"), meta.get("repeats"))
    single = _kernels(layer_arrays(graph, dtype)) & (layer_s > 0)
    n = len(graph.layers)
    return ProfileMatch(profile, graph, layer_s, "name", n, single=single, owner=np.arange(n))  # row i times layer i


def _kernels(arrays: Any) -> np.ndarray:
    """[L] bool: the layers a runtime runs as kernels of their own (dispatched, not an identity)."""
    out = np.asarray(arrays.dispatched, dtype=bool).copy()
    if arrays.identity is not None:
        out &= ~np.asarray(arrays.identity, dtype=bool)
    return out


def layer_family(graph: LayerGraph, index: int) -> str:
    """The kernel family (conv1x1, convkxk, dwconv_s1, ...: :mod:`optimizer.graph.kernel_families`)
    a layer's efficiency is keyed by."""
    from ..graph.kernel_families import kernel_family

    return kernel_family(graph.layers[index], graph.fmt)


def match_profile(profile: Profile, graph: LayerGraph, weights: np.ndarray | None = None,
                  dtype: str = "fp32") -> ProfileMatch:
    """Match ``profile``'s rows to ``graph``'s layers (module docstring).

    Parameters
    ----------
    weights : ndarray [L], optional
        Modeled time of every layer, used to split a time that covers several layers (None:
        MACs, else bytes moved).

    Raises
    ------
    ConfigError
        When more rows match no layer than match one (not a profile of this model).
    """
    from ..cost.features import layer_arrays

    arrays = layer_arrays(graph, dtype)
    n = len(graph.layers)
    dispatched = _kernels(arrays)
    layer_weights = np.asarray(weights, dtype=np.float64) if weights is not None else None
    owner = np.full(n, -1)  # first row covering each layer
    records = list(profile.records)
    spans: list[list[int]] = [[] for _ in records]  # layers each row covers
    unmatched: list[int] = []
    notes: list[str] = []
    if records and all(record.summary for record in records):
        mode = _summary_spans(records, graph, dispatched, owner, spans, unmatched, notes)
    else:
        mode = _anchored_spans(profile, records, graph, dispatched, owner, spans, unmatched)
    _fill_gaps(records, owner, spans, unmatched, dispatched)
    layout = {row for row, record in enumerate(records) if record.op_type in LAYOUT_OPS and spans[row]
              and not dispatched[spans[row]].any()}
    _attach_fused(owner, spans, layout, dispatched)
    latency, unmodeled, single = _distribute(records, spans, layout, dispatched, layer_weights, arrays)
    matched_rows = sum(1 for span in spans if span)
    bad_rows = [records[row] for row in sorted(set(unmatched))]
    if not matched_rows or len(bad_rows) > matched_rows:
        raise ConfigError(
            f"{profile.path}: {len(bad_rows)} of {len(records)} profile rows match no layer of {graph.name!r} "
            f"({n} layers; matched {matched_rows}); is this a profile of {graph.name!r}? Give the model it "
            "profiled (--model)")
    uncovered = [i for i in range(n) if owner[i] < 0 and dispatched[i]]
    latency[owner < 0] = 0.0
    match = ProfileMatch(profile, graph, latency, mode, matched_rows, bad_rows, uncovered, single, notes, owner, unmodeled)
    for record, span in zip(records, spans, strict=True):
        n_covered = len(set(span))
        if n_covered > 1 and (record.delegate or record.summary):
            match.notes.append(f"{record.op_type} row {record.name[:60]!r} covers {n_covered} layers: its "
                               f"{record.time_s * 1e3:.3f} ms are split by the modeled share")
    return match


def _summary_spans(records: list[ProfileRecord], graph: LayerGraph, dispatched: np.ndarray, owner: np.ndarray,
                   spans: list[list[int]], unmatched: list[int], notes: list[str]) -> str:
    """"Summary by node type" rows: each covers every kernel layer of its op family."""
    n = len(graph.layers)
    for row, record in enumerate(records):
        family = TFLITE_FAMILIES.get(record.op_type)
        hits = [i for i in range(n) if graph.layers[i].op == family and dispatched[i]] if family else []
        if record.delegate:
            continue  # placed in the gaps later
        if not hits:
            unmatched.append(row)
            continue
        if record.count != len(hits):
            notes.append(f"{record.op_type}: the profile ran {record.count} such nodes, {graph.name!r} has {len(hits)} "
                         f"{family} layers (a converter's rewrite, or another model?)")
        spans[row] = hits
        owner[hits] = row
    return "summary"


def _anchored_spans(profile: Profile, records: list[ProfileRecord], graph: LayerGraph, dispatched: np.ndarray,
                    owner: np.ndarray, spans: list[list[int]], unmatched: list[int]) -> str:
    """Per-node rows: anchored by name when most names match, else by op type in execution order;
    returns the mode used (name, order or delegate)."""
    by_name = {layer.name: layer.index for layer in graph.layers}
    anchors = [_name_anchor(record, graph, by_name) for record in records]
    plain = [row for row, record in enumerate(records) if not record.delegate]
    named = sum(1 for row in plain if anchors[row] is not None)
    if not plain and not any(anchor is not None for anchor in anchors):
        mode = "delegate"
    elif profile.format == "ort_json" or (plain and named * 2 >= len(plain)) or not plain:
        mode = "name"
    else:
        mode = "order"
        anchors = _order_anchors(records, graph, dispatched)
    for row, anchor in enumerate(anchors):
        if anchor is None:
            if not records[row].delegate:
                unmatched.append(row)
            continue
        if records[row].op_type in LAYOUT_OPS and not dispatched[anchor]:
            spans[row] = [anchor]  # a layout op of its own, not part of the kernel before it
        else:
            spans[row] = _reach_back(anchor, owner, dispatched)  # several rows may share a layer: times add
        owner[[i for i in spans[row] if owner[i] < 0]] = row
    return mode


def _attach_fused(owner: np.ndarray, spans: list[list[int]], layout: set[int], dispatched: np.ndarray) -> None:
    """Fused layers (not kernels of their own) join the kernel before them (then leading ones the
    kernel after them); a layout row keeps to its own layer."""
    n = len(owner)
    for step, order in ((-1, range(1, n)), (1, range(n - 2, -1, -1))):
        for i in order:
            if owner[i] >= 0 or dispatched[i]:
                continue
            neighbour = i + step
            while 0 <= neighbour < n and owner[neighbour] in layout:
                neighbour += step
            if 0 <= neighbour < n and owner[neighbour] >= 0:
                owner[i] = owner[neighbour]
                spans[int(owner[neighbour])].append(i)


def _distribute(records: list[ProfileRecord], spans: list[list[int]], layout: set[int], dispatched: np.ndarray,
                layer_weights: np.ndarray | None, arrays: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(latency, unmodeled layout time, single-row kernel) per layer: each row's time split over
    the layers it covers by the modeled share."""
    n = len(dispatched)
    latency = np.zeros(n)
    unmodeled = np.zeros(n)
    rows_on = np.zeros(n, dtype=int)
    for row, record in enumerate(records):
        members = np.array(sorted(set(spans[row])), dtype=int)
        if members.size == 0:
            continue
        part = record.time_s * _share(members, layer_weights, arrays)
        latency[members] += part
        if row in layout:
            unmodeled[members] += part
        rows_on[members] += 1
    single = np.zeros(n, dtype=bool)
    for row, record in enumerate(records):
        kernels = [i for i in set(spans[row]) if dispatched[i]]
        if len(kernels) == 1 and not record.summary and not record.delegate and rows_on[kernels[0]] == 1:
            single[kernels[0]] = True
    return latency, unmodeled, single


def _name_anchor(record: ProfileRecord, graph: LayerGraph, by_name: dict[str, int]) -> int | None:
    """Last layer the row's names point at (a fused node is named after its last op)."""
    from .ort_profile import attribute_node

    hits = [attribute_node(name, record.op_type, graph, by_name) for name in record.tensor_names]
    found = [hit for hit in hits if hit is not None]
    return max(found) if found else None


def _order_anchors(records: list[ProfileRecord], graph: LayerGraph, dispatched: np.ndarray,
                   lookahead: int = 12) -> list[int | None]:
    """Anchor each non-delegate row on the next layer of its op family in execution order.

    A row whose family does not come up within ``lookahead`` layers matches nothing (and the
    cursor stays); delegate rows are left to :func:`_fill_gaps`."""
    out: list[int | None] = []
    cursor = 0
    n = len(graph.layers)
    for record in records:
        family = TFLITE_FAMILIES.get(record.op_type)
        if record.delegate or family is None:
            out.append(None)
            continue
        hit = next((i for i in range(cursor, min(n, cursor + lookahead)) if graph.layers[i].op == family), None)
        out.append(hit)
        if hit is not None:
            cursor = hit + 1
    return out


def _reach_back(anchor: int, owner: np.ndarray, dispatched: np.ndarray) -> list[int]:
    """``anchor`` plus, when it is a fused op (activation after a conv), the unowned layers back
    to and including the kernel it was fused into."""
    span = [anchor]
    if dispatched[anchor]:
        return span
    i = anchor - 1
    while i >= 0 and owner[i] < 0:
        span.append(i)
        if dispatched[i]:
            break
        i -= 1
    else:
        return [anchor]
    return span if dispatched[span[-1]] else [anchor]


def _fill_gaps(records: list[ProfileRecord], owner: np.ndarray, spans: list[list[int]], unmatched: list[int],
               dispatched: np.ndarray) -> None:
    """Give each unplaced delegate row the unowned layers between its placed neighbours in row
    order (all layers when no row is placed and it is the only delegate row)."""
    gaps = [row for row, record in enumerate(records) if record.delegate and not spans[row]]
    if not gaps:
        return
    n = len(owner)
    if not any(spans):
        if len(gaps) == 1:
            spans[gaps[0]] = list(range(n))
            owner[:] = gaps[0]
        else:
            unmatched.extend(gaps)
        return
    for row in gaps:
        first = max((max(spans[other]) for other in range(row) if spans[other]), default=-1) + 1
        end = min((min(spans[other]) for other in range(row + 1, len(records)) if spans[other]), default=n)
        free = [i for i in range(first, end) if owner[i] < 0]
        if not any(dispatched[i] for i in free):
            unmatched.append(row)
            continue
        spans[row] = free
        owner[free] = row


def _share(members: np.ndarray, weights: np.ndarray | None, arrays: Any) -> np.ndarray:
    """Fractions of a row's time for its ``members`` layers: by ``weights``, else MACs, else bytes
    moved (the first with a positive sum over them), else equal."""
    for candidate in (weights, arrays.macs, arrays.moved_bytes):
        if candidate is None:
            continue
        values = np.nan_to_num(np.asarray(candidate, dtype=np.float64)[members], nan=0.0, posinf=0.0)
        if values.sum() > 0:
            return values / values.sum()
    return np.full(members.size, 1.0 / members.size)


def family_totals(match: ProfileMatch) -> dict[str, float]:
    """Profiled seconds per kernel family of the covered layers."""
    out: dict[str, float] = {}
    for i in np.flatnonzero(match.covered):
        family = layer_family(match.graph, int(i))
        out[family] = out.get(family, 0.0) + float(match.latency_s[i])
    return {name: seconds for name, seconds in out.items() if seconds > 0}

