"""``python -m optimizer.cli`` runs the ``dnnplan`` command line."""

from . import entry

entry()
