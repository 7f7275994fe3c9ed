"""Training the learned cost backend from measured tables (``dnnplan cost --backend learned``).

Each measured table names its network in its header (``# model:``, ``# granularity:``,
``# variant:``, ``# dtype:``, as ``dnnplan measure`` writes them); the network is imported
again and paired with its table, and :func:`optimizer.cost.learned.fit_learned_model` fits the
kernel-term regression on the pairs (nn-Meter's per-kernel prediction, Zhang et al. MobiSys'21).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any


def learned_model_from_tables(tables: Sequence[str | os.PathLike[str]]) -> Any:
    """A learned cost model fitted on measured ``tables`` (at the first table's dtype).

    Raises
    ------
    ConfigError
        No table given, or a table without a ``# model:`` header.
    """
    from ..cost.learned import fit_learned_model
    from ..cost.measured import read_measured_table
    from ..errors import ConfigError
    from ..graph import load_graph

    if not tables:
        raise ConfigError("--backend learned needs --table FILE (one or more measured tables to train on)")
    pairs = []
    for path in tables:
        mt = read_measured_table(path)
        name = mt.meta.get("model")
        if not name:
            raise ConfigError(f"{path}: the table has no '# model: ...' header; cannot find its network")
        graph = load_graph(str(name), str(mt.meta.get("granularity", "op")), **dict(mt.meta.get("variant") or {}))
        pairs.append((graph, mt))
    return fit_learned_model(pairs, dtype=str(pairs[0][1].meta.get("dtype", "fp32")))
