"""Reference runtime: execute exported plans on this host (docs/ARCHITECTURE.md, ``runtime/``).

* :func:`run_plan` — pipeline stages as threads with bounded queues; split/joint tails over a
  real loopback TCP socket; measured FPS, latency percentiles and busy time per stage.
* :class:`TailServer` / :class:`SplitClient` — the split transport (:mod:`.wire`).
* :func:`run_parts` — sequential execution, the reference for equivalence checks.
"""

from .client import SplitClient, TokenBucket, parse_bandwidth, parse_server
from .pipeline import RunReport, StageReport, core_groups, input_frames, run_parts, run_plan
from .server import TailServer, check_loopback
from .tensors import PartRunner, Value, convert_tensor

__all__ = ["PartRunner", "RunReport", "SplitClient", "StageReport", "TailServer", "TokenBucket",
           "Value", "check_loopback", "convert_tensor", "core_groups", "input_frames",
           "parse_bandwidth", "parse_server", "run_parts", "run_plan"]
