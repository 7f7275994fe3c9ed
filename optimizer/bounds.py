"""Documented bounds of the size flags and of the batch task fields that mean the same thing.

A flag that sets how much a command simulates, runs or holds in memory is checked when it is
parsed, before any work starts (a Typer callback in ``optimizer.cli.bounds``, like the
output-path checks): out of range is one line naming the flag, the value, the range and why,
exit 2. A batch task's solver setting of the same meaning is held to the same bound when the job
is planned (:data:`TASK_SETTINGS`, checked by ``optimizer.batch.tasks.check_tasks``). The upper
bounds keep one command within a workstation's memory and a few minutes (figures measured on
the project's 2-core host):

=====================  ==================  ==================================================
command flag           range               why the upper bound
=====================  ==================  ==================================================
simulate --duration    (0, 604800] s       7 days: the series keep every governor period
schedule --duration    (0, 3600] s         1 h: every request is tracked (~50 s, ~1.1 GB at
                                           30 FPS for the person finder)
schedule --fps         (0, 240] FPS        camera rates; requests per run grow with the rate
shift --duration       (0, 86400] s        1 day (10 h took 55 s and 1.2 GB)
shift --fps            (0, 1000] req/s
shift --reload         [0, 60] s
tadf --theta           (0, 10] °C          a bisection tolerance
run --frames           [1, 5000]           synthetic inputs are held in memory (float32:
                                           3 GB of 224x224x3 frames at the bound)
run --fps              (0, 10000] FPS
quantize --samples     [1, 4096]           calibration samples are held in memory (float32:
                                           2.5 GB of 224x224x3 images at the bound)
quantize --heldout     [0, 4096]           as --samples
quantize --runs        [1, 10000]
quantize --warmup      [0, 1000]
export --samples       [1, 4096]           as quantize --samples
map --generations      [1, 100000]
map --population       [2, 10000]
map --measure-frames   [1, 5000]           as run --frames
split --generations    [1, 100000]
split --population     [2, 10000]
measure --repeats      [1, 10000]
measure --warmup       [0, 1000]
=====================  ==================  ==================================================

Batch task fields bounded like the flag of the same meaning (:data:`TASK_SETTINGS`):

=====================================  ===================
task field                             bound of
=====================================  ===================
map task ``settings.population``       map --population
map task ``settings.max_generations``  map --generations
split task ``settings.population``     split --population
split task ``settings.generations``    split --generations
=====================================  ===================

A job expands to at most :data:`MAX_JOB_TASKS` (100,000) tasks.

``thermal eval --horizons`` is bounded by the data: a horizon longer than the longest segment of
the evaluated trace scores nothing and is refused (``optimizer.cli.thermal``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError


@dataclass(frozen=True)
class Bound:
    """``low < value <= high`` (``low <= value`` when ``low_inclusive``), in ``unit``."""

    low: float
    high: float
    unit: str = ""
    low_inclusive: bool = True
    why: str = ""

    def describe(self) -> str:
        u = f" {self.unit}" if self.unit else ""
        return f"{'[' if self.low_inclusive else '('}{self.low:g}, {self.high:g}]{u}"

    def contains(self, value: float) -> bool:
        ok_low = value >= self.low if self.low_inclusive else value > self.low
        return math.isfinite(value) and ok_low and value <= self.high


_DAY, _HOUR = 86_400.0, 3_600.0
#: (command, flag) -> bound; the table of the module docstring
BOUNDS: dict[tuple[str, str], Bound] = {
    ("simulate", "--duration"): Bound(0, 7 * _DAY, "s", False, "7 days of simulated time"),
    ("schedule", "--duration"): Bound(0, _HOUR, "s", False, "1 h: every request of the run is tracked"),
    ("schedule", "--fps"): Bound(0, 240, "FPS", False, "camera rates"),
    ("shift", "--duration"): Bound(0, _DAY, "s", False, "1 day of simulated time"),
    ("shift", "--fps"): Bound(0, 1000, "req/s", False),
    ("shift", "--reload"): Bound(0, 60, "s"),
    ("tadf", "--theta"): Bound(0, 10, "°C", False, "a bisection tolerance"),
    ("run", "--frames"): Bound(1, 5000, "frames", why="synthetic inputs are held in memory"),
    ("run", "--fps"): Bound(0, 10_000, "FPS", False),
    ("quantize", "--samples"): Bound(1, 4096, "samples", why="calibration samples are held in memory"),
    ("quantize", "--heldout"): Bound(0, 4096, "samples", why="held-out samples are held in memory"),
    ("quantize", "--runs"): Bound(1, 10_000, "runs"),
    ("quantize", "--warmup"): Bound(0, 1000, "runs"),
    ("export", "--samples"): Bound(1, 4096, "samples", why="calibration samples are held in memory"),
    ("map", "--generations"): Bound(1, 100_000),
    ("map", "--population"): Bound(2, 10_000),
    ("map", "--measure-frames"): Bound(1, 5000, "frames", why="inputs are held in memory"),
    ("split", "--generations"): Bound(1, 100_000),
    ("split", "--population"): Bound(2, 10_000),
    ("measure", "--repeats"): Bound(1, 10_000, "runs"),
    ("measure", "--warmup"): Bound(0, 1000, "runs"),
}


def check_bound(command: str, flag: str, value: float | None) -> None:
    """Raise :class:`ConfigError` if ``value`` of ``dnnplan COMMAND FLAG`` is outside its bound."""
    if value is None:
        return
    b = BOUNDS[command, flag]
    if not b.contains(float(value)):
        why = f" ({b.why})" if b.why else ""
        raise ConfigError(f"{flag} {value:g}: out of range; dnnplan {command} accepts {flag} in "
                          f"{b.describe()}{why}: give a value in that range")


#: tasks one batch job may expand to (each is a search; the task list is held in memory)
MAX_JOB_TASKS = 100_000

#: (task kind, solver setting) -> the (command, flag) whose bound it takes
TASK_SETTINGS: dict[tuple[str, str], tuple[str, str]] = {
    ("map", "population"): ("map", "--population"),
    ("map", "max_generations"): ("map", "--generations"),
    ("split", "population"): ("split", "--population"),
    ("split", "generations"): ("split", "--generations"),
}


def check_task_settings(kind: str, settings: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` naming ``settings.<name>`` for a task setting outside the bound
    of its flag (:data:`TASK_SETTINGS`); a setting that is not a number is left to the solver."""
    for name, value in settings.items():
        flag = TASK_SETTINGS.get((kind, name))
        if flag is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        b = BOUNDS[flag]
        if not b.contains(float(value)):
            why = f" ({b.why})" if b.why else ""
            raise ConfigError(f"settings.{name} {value:g}: out of range; a {kind} task accepts it in {b.describe()}, "
                              f"as 'dnnplan {flag[0]} {flag[1]}'{why}: give a value in that range")
