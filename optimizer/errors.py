"""One exception hierarchy for every user-facing error.

The CLI catches :class:`DnnplanError`, prints its one-line message and exits with status 2
(``--debug`` shows the traceback). Messages name the input, the problem and the fix.
"""

from __future__ import annotations


class DnnplanError(Exception):
    """Base class of all errors caused by the user's input or environment."""

    exit_code = 2


class InputFileError(DnnplanError):
    """A file or directory is missing, unreadable or of the wrong kind."""


class ModelFormatError(DnnplanError):
    """A model file is corrupt or not the format its name says."""


class UnknownNameError(DnnplanError):
    """A name (zoo network, device, processor, network link...) is not known."""

    def __init__(self, kind: str, name: str, valid: list[str] | tuple[str, ...], where: str = "") -> None:
        self.kind, self.name, self.valid = kind, name, list(valid)
        loc = f" in {where}" if where else ""
        super().__init__(f"unknown {kind} {name!r}{loc}; valid: {', '.join(sorted(self.valid))}")


class UnsupportedOperatorError(DnnplanError):
    """An operator the importer or converter cannot handle."""


class SchemaError(DnnplanError):
    """A JSON/YAML document does not match its schema (the message names file and field)."""


class ConfigError(DnnplanError):
    """A setting or command-line value is invalid."""


def check_between(label: str, value: float | None, low: float, high: float, what: str) -> None:
    """Raise a one-line :class:`ConfigError` naming ``label`` unless ``low <= value <= high``
    (None passes: the default applies; NaN fails)."""
    if value is not None and not low <= value <= high:
        raise ConfigError(f"{label} {value!r}: expected {what} between {low:g} and {high:g}")


class ConstraintError(DnnplanError):
    """A constraint no candidate can satisfy (the message names the best value reachable)."""


class MeasurementError(DnnplanError):
    """A measurement command or runner failed, hung or replied garbage."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, re-raised with what was finished (e.g. ``"32 done, 68 remaining;
    re-run to resume"``) for the CLI's one line ``interrupted: ...`` and exit status 130."""


class CustomOperatorWarning(UserWarning):
    """A model holds custom or unknown operators: imported as CPU-only ``custom`` layers."""


class InputShapeNote(UserWarning):
    """A model's dynamic batch dimension was set to 1 (no ``--input-shape`` given for it)."""
