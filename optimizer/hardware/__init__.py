"""Hardware descriptions: devices, servers and network links (docs/ARCHITECTURE.md, ``hardware/``).

``load_device("pixel6")``, ``load_server("smartsplit_i5")`` and ``load_link("wifi_10")`` read
the YAML files in ``search_spaces/``; units are parsed at the edge (:mod:`.units`).
"""

from __future__ import annotations

from .loader import (
    device_names,
    link_names,
    load_device,
    load_link,
    load_server,
    search_spaces_dir,
    server_names,
)
from .schema import (
    DTYPES,
    PROCESSOR_KINDS,
    Device,
    Handoff,
    HandoffCost,
    Link,
    PowerModel,
    Processor,
    RadioPower,
)
from .units import parse_quantity

__all__ = [
    "DTYPES", "PROCESSOR_KINDS", "Device", "Handoff", "HandoffCost", "Link", "PowerModel",
    "Processor", "RadioPower", "device_names", "link_names", "load_device", "load_link",
    "load_server", "parse_quantity", "search_spaces_dir", "server_names",
]
