"""The parameter vector of an RC network fit: what each entry means and how to unpack it.

Both RC fits (:mod:`.rc_equation_error`, :mod:`.rc_open_loop`) search the logarithms of the
network's capacities and conductances, so every value stays positive and the network stable
(``A = -C⁻¹G`` with ``G`` positive definite; docs/METHODS.md section 11). The input gains and the
ambient are linear in the model's output and solved exactly inside each evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RCLayout:
    """Nonlinear parameters of an RC fit: log capacities (node 0 fixed at 1: the overall capacity
    scale is not identifiable from temperatures alone), log pair conductances, log ambient
    conductances. The input map and the ambient are linear."""

    n: int      # nodes (sensors + hidden)
    M: int      # inputs

    @property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and column indices of every node pair ``i < j``."""
        return np.triu_indices(self.n, 1)

    @property
    def size(self) -> int:
        """Number of nonlinear (log) parameters."""
        return (self.n - 1) + len(self.pairs[0]) + self.n

    @property
    def n_linear(self) -> int:
        """Number of linear parameters: the input map of every node and the ambient."""
        return self.n * self.M + 1

    def unpack(self, log_params: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(capacities [n], pair conductances [n, n] (symmetric), ambient conductances [n])``."""
        n = self.n
        capacity = np.exp(np.concatenate([[0.0], log_params[: n - 1]]))
        n_pairs = len(self.pairs[0])
        conductance = np.zeros((n, n))
        conductance[self.pairs] = np.exp(log_params[n - 1: n - 1 + n_pairs])
        conductance = conductance + conductance.T
        ambient_conductance = np.exp(log_params[n - 1 + n_pairs:])
        return capacity, conductance, ambient_conductance
