"""What every rank-driven collective shares: ranks reach it one by one, each at most once."""

from __future__ import annotations

from typing import Self

import numpy as np

from moesim.errors import ConfigError


class RankStarted:
    """Tracks which ranks have reached the collective; subclasses act in ``_on_start``."""

    def _init_ranks(self, n_ranks: int) -> None:
        self._started = np.zeros(n_ranks, dtype=bool)

    def start(self) -> Self:
        """Every rank reaches the collective now; returns self (for chaining)."""
        for r in range(self._started.size):
            self.start_rank(r)
        return self

    def start_rank(self, rank: int) -> None:
        """Rank ``rank`` reaches the collective now (a second time is an error)."""
        if self._started[rank]:
            raise ConfigError("collective.start_rank", f"rank {rank} already started")
        self._started[rank] = True
        self._on_start(rank)

    def _on_start(self, rank: int) -> None:
        raise NotImplementedError
