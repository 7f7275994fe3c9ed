"""YAML input with errors that name the file, the line and the field.

``load_model_yaml(path, Model)`` parses a YAML file, validates it with a pydantic model and
turns any failure into one :class:`~optimizer.errors.SchemaError` line such as
``jobs/grid.yaml line 7: field 'grid.seeds[1]': Input should be a valid integer (got 'x')``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import InputFileError, SchemaError

M = TypeVar("M", bound=BaseModel)


def _node_at(node: yaml.Node | None, loc: tuple[Any, ...]) -> yaml.Node | None:
    """The deepest YAML node reachable along a pydantic error location."""
    best = node
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if getattr(k, "value", None) == str(part)), None)
            if nxt is None:  # unknown key errors: point at the key itself
                nxt = next((k for k, _ in node.value if getattr(k, "value", None) == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            nxt = node.value[part]
        else:
            nxt = None
        if nxt is None:
            break
        node = best = nxt
    return best


def line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> str:
    """`` line N`` of the YAML node at ``loc`` (empty when unknown)."""
    target = _node_at(node, loc)
    return f" line {target.start_mark.line + 1}" if target is not None else ""


def format_loc(loc: tuple[Any, ...]) -> str:
    """``("grid", "seeds", 1)`` -> ``grid.seeds[1]``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe_validation_error(exc: ValidationError) -> str:
    """First pydantic error as ``field 'a.b[2]': message (got VALUE) (+N more)``; missing and
    unknown keys get their own wording."""
    err = exc.errors(include_url=False)[0]
    loc = format_loc(tuple(err["loc"]))
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    if err["type"] == "missing":
        return f"field {loc!r} is missing (required){more}"
    if err["type"] == "extra_forbidden":
        return f"field {loc!r} is not allowed here (unknown key; check the spelling){more}"
    got = err.get("input")
    got_txt = f" (got {got!r})" if isinstance(got, (str, int, float)) and not isinstance(got, bool) else ""
    msg = err["msg"].removeprefix("Value error, ")
    return f"{'field ' + repr(loc) + ': ' if loc else ''}{msg}{got_txt}{more}"


#: the largest YAML file read (device, job, workload files are a few kB)
MAX_YAML_BYTES = 16 << 20
#: nodes a document may have once its aliases are expanded: an alias is a reference, but every
#: reader that walks the data (validation, JSON) sees the expansion, which nested anchors make
#: exponential in the file's size ("billion laughs"); safe loaders of untrusted YAML bound it
MAX_YAML_NODES = 100_000


def _expanded_nodes(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes of ``node``'s tree with every alias expanded (counted once per node object)."""
    key = id(node)
    if key not in memo:
        if isinstance(node, yaml.MappingNode):
            memo[key] = 1 + sum(_expanded_nodes(k, memo) + _expanded_nodes(v, memo) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            memo[key] = 1 + sum(_expanded_nodes(v, memo) for v in node.value)
        else:
            memo[key] = 1
    return memo[key]


def _parse(text: str, where: Path) -> tuple[Any, yaml.Node | None]:
    """Compose ``text`` once, refuse it past :data:`MAX_YAML_NODES` expanded nodes, then build
    the data from the same node tree."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        size = _expanded_nodes(node, {})
        if size > MAX_YAML_NODES:
            raise SchemaError(f"{where}: its aliases expand to {size:,} YAML nodes, over the limit of "
                              f"{MAX_YAML_NODES:,}; write the repeated parts out or use fewer nested anchors")
        return loader.construct_document(node), node
    finally:
        loader.dispose()


def read_yaml(path: str | os.PathLike[str]) -> tuple[Any, yaml.Node | None]:
    """Parse ``path`` within :data:`MAX_YAML_BYTES` and :data:`MAX_YAML_NODES`; returns (data,
    node tree for line lookups)."""
    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: no such file")
    if p.stat().st_size > MAX_YAML_BYTES:
        raise SchemaError(f"{p}: {p.stat().st_size:,} bytes, over the {MAX_YAML_BYTES >> 20} MiB a YAML input "
                          "may have; expected a device, job or workload file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SchemaError(f"{p}: not a UTF-8 text file; expected YAML") from None
    try:
        data, node = _parse(text, p)
    except RecursionError:
        raise SchemaError(f"{p}: YAML nested too deeply to read; expected a device, job or workload file") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise SchemaError(f"{p}{line}: malformed YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise SchemaError(f"{p}: malformed YAML: {exc}") from None
    return data, node


def load_model_yaml(path: str | os.PathLike[str], model: type[M], *, context: dict[str, Any] | None = None) -> M:
    """Parse and validate ``path`` as ``model``; errors name file, line and field."""
    data, node = read_yaml(path)
    if data is None:
        raise SchemaError(f"{path}: the file is empty; expected a YAML mapping for {model.__name__}")
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        line = line_of(node, tuple(exc.errors()[0]["loc"]))
        raise SchemaError(f"{path}{line}: {describe_validation_error(exc)}") from None
