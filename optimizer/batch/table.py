"""Write a collected batch table as Parquet or CSV (atomically)."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..fileio import atomic_write_bytes


def write_table(df: Any, path: str | os.PathLike[str]) -> int:
    """Write ``df`` to ``path`` by its suffix (``.csv`` or ``.parquet``); returns the row count."""
    p = Path(path)
    buf = io.BytesIO()
    if p.suffix == ".csv":
        df.to_csv(buf, index=False)
    elif p.suffix == ".parquet":
        try:
            df.to_parquet(buf, index=False)
        except ImportError:
            raise ConfigError(f"{p}: writing Parquet needs pyarrow, which is not installed; "
                              "use a .csv output") from None
    else:
        raise ConfigError(f"{p}: unknown table format {p.suffix or '(none)'!r}; expected .csv or .parquet")
    atomic_write_bytes(p, buf.getvalue())
    return len(df)
