"""A plan against its device: every processor it names exists there, and the device is the one
the plan was made with (``validate``, ``export``, ``run`` and ``serve`` check this).

A stage may also name one core of a CPU processor by suffixing its index (``cpu0``, ``cpu1`` of a
device whose CPU processor is ``cpu``): the reference runtime pins such stages to this host's CPUs
(:mod:`optimizer.runtime.pipeline`), as the hand-made plans of
:func:`optimizer.plan.manual_plan.plan_for_boundaries` do.

The device's identity, the SHA-256 of its validated content as canonical JSON (so comments and
formatting of the YAML file do not count, units do not either: ``2.8 GHz`` and ``2800 MHz`` are one
value), is recorded in the plan's ``provenance.inputs["device"]`` when the plan is made (schema
v1's map of input hashes: plans without it are still read, only not compared).
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings

from ..errors import ConfigError, DnnplanError
from ..hardware.loader import load_device
from ..hardware.schema import Device
from .manifest import Manifest
from .schema import Plan

#: key of the device file's hash in ``provenance.inputs``
DEVICE_INPUT = "device"


def device_sha256(device: Device) -> str:
    """The device's identity: SHA-256 of its validated content as canonical (key-sorted) JSON."""
    text = json.dumps(device.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def plan_processors(plan: Plan) -> list[tuple[str, str]]:
    """(field, processor name) of every processor the plan runs something on."""
    used = [(f"stages[{k}].processor", st.processor) for k, st in enumerate(plan.stages or [])]
    if plan.split is not None and plan.split.head_processor is not None:
        used.append(("split.head_processor", plan.split.head_processor))
    for field in ("preprocess", "postprocess"):
        host = getattr(plan, field)
        if host is not None:
            used.append((f"{field}.processor", host.processor))
    return used


def check_processors(device_name: str, used: list[tuple[str, str]], where: str,
                     recorded_sha256: str | None = None) -> None:
    """Refuse ``used`` (field, processor) naming a processor device ``device_name`` lacks; warn
    when the device cannot be found (processors then unchecked) or its identity differs from
    ``recorded_sha256``.

    Raises
    ------
    ConfigError
        ``<where>: stages[0].processor 'quantum' is not a processor of device 'pixel6' (cpu, gpu, tpu); ...``
    """
    try:
        device = load_device(device_name)
    except DnnplanError as exc:
        warnings.warn(f"{where}: processors not checked: {str(exc).splitlines()[0]} (give the device file's "
                      "folder with --search-spaces DIR)", stacklevel=3)
        return
    names = device.processor_names
    cpus = {p.name for p in device.processors if p.kind == "cpu"}
    for field, proc in used:
        core = re.fullmatch(r"(.+?)(\d+)", proc)
        if proc not in names and not (core and core.group(1) in cpus):
            raise ConfigError(f"{where}: {field} {proc!r} is not a processor of device {device_name!r} "
                              f"({', '.join(names)}); re-plan for this device or fix the plan")
    now = device_sha256(device)
    if recorded_sha256 is not None and recorded_sha256 != now:
        warnings.warn(f"{where}: device {device_name!r} changed since the plan was made (sha256 "
                      f"{recorded_sha256[:12]}... then, {now[:12]}... now): its predictions may no longer hold; "
                      "re-plan to refresh them", stacklevel=3)


def check_plan_device(plan: Plan, where: str = "plan") -> None:
    """:func:`check_processors` of every processor of ``plan`` against its device, and its
    recorded device identity."""
    check_processors(plan.device, plan_processors(plan), where, plan.provenance.inputs.get(DEVICE_INPUT))


def check_manifest_device(manifest: Manifest, where: str = "manifest") -> None:
    """:func:`check_processors` of the device parts of an export against its device."""
    used = [(f"parts[{k}].processor", p.processor) for k, p in enumerate(manifest.parts) if p.location == "device"]
    check_processors(manifest.device, used, where)
