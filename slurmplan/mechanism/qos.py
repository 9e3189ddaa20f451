"""The site's QOS in the round: a running job is displaced only for jobs that Slurm would let preempt it.

Slurm (``PreemptType=preempt/qos``) lets a job of QOS A preempt a job of QOS B only when B is in A's ``Preempt``
list, and a site gives its important work a QOS of higher priority. The daemon stops, requeues and shrinks running
jobs for others all the time (that is its job), so it keeps to the same rule: a running job's GPUs go only to jobs
of its own QOS, or of a QOS of at least its priority whose ``Preempt`` list names its QOS (``displaces``). Its
GPUs are reserved against every other job while the round's greedy picks (:class:`Shield`), and such a job is
not shrunk while any job it is protected from is in the round. Without QOS rules (``TickConfig.qos_preemption``
empty: no accounting, the simulator) nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

Rules = Mapping[str, tuple[int, tuple[str, ...]]]


def displaces(names: Sequence[str], rules: Rules) -> np.ndarray:
    """``d[k, j]``: a job of QOS ``names[k]`` may take the GPUs of a running job of QOS ``names[j]``. A QOS the
    rules do not know has priority 0 and preempts nothing."""
    out = np.zeros((len(names), len(names)), dtype=bool)
    for k, qk in enumerate(names):
        pk, may = rules.get(qk, (0, ()))
        for j, qj in enumerate(names):
            out[k, j] = qk == qj or (pk >= rules.get(qj, (0, ()))[0] and qj in may)
    return out


@dataclass
class Shield:
    """Running jobs' GPUs held back, per GPU type and QOS, from the jobs that may not displace them."""

    qos: np.ndarray
    """Per row: its QOS's index in ``may``."""
    may: np.ndarray
    reserved: np.ndarray
    """GPUs per (type, QOS) of running rows not yet given a column."""
    shielded: np.ndarray
    """Per row: running, and some job in the round may not displace it (so it is not shrunk either)."""
    names: tuple[str, ...]

    def free_for(self, k: int, t: int, cap: int) -> int:
        """GPUs of type ``t`` that row ``k`` may take (``cap`` free ones, less those reserved against it)."""
        return int(cap - self.reserved[t, ~self.may[self.qos[k]]].sum())

    def holders(self, k: int, t: int) -> str:
        """The QOS whose running jobs hold GPUs of type ``t`` back from row ``k`` (for its note)."""
        q = [self.names[i] for i in np.flatnonzero((self.reserved[t] > 0) & ~self.may[self.qos[k]]).tolist()]
        return ", ".join(q)

    def release(self, j: int, t: int, gpus: int) -> None:
        self.reserved[t, self.qos[j]] -= gpus


def shield(
    qos_names: Sequence[str],
    rules: Rules,
    running: np.ndarray,
    current: np.ndarray,
    col_type: np.ndarray,
    gpus: np.ndarray,
    types: int,
    competing: np.ndarray,
) -> Shield | None:
    """The round's :class:`Shield`, or None without rules or when every job may displace every other."""
    if not rules or len(qos_names) == 0:
        return None
    names, qos, may = _table(qos_names, rules)
    if may.all():
        return None
    reserved = np.zeros((types, len(names)), dtype=np.int64)
    for j in np.flatnonzero(running).tolist():
        reserved[col_type[current[j]], qos[j]] += gpus[current[j]]
    return Shield(qos, may, reserved, running & _protected(qos, may, competing)[qos], names)


def frozen_rows(qos_names: Sequence[str] | None, rules: Rules, running: np.ndarray, rows: Sequence[int]) -> frozenset:
    """Running rows that repacking may not move to other nodes: some job among ``rows`` (the round's waiting
    requests, which a repack would seat) has a QOS that may not displace them. Moving a running job to other
    nodes is a requeue, so the QOS rule above covers it."""
    if not rules or qos_names is None or len(qos_names) == 0:
        return frozenset()
    _, qos, may = _table(qos_names, rules)
    protected = _protected(qos, may, np.asarray(rows, dtype=np.int64))
    return frozenset(j for j in np.flatnonzero(running).tolist() if protected[qos[j]])


def _table(qos_names: Sequence[str], rules: Rules) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """The round's QOS names, each row's index among them, and :func:`displaces` over them."""
    names = tuple(sorted(set(qos_names)))
    index = {q: i for i, q in enumerate(names)}
    return names, np.array([index[q] for q in qos_names], dtype=np.int64), displaces(names, rules)


def _protected(qos: np.ndarray, may: np.ndarray, competing: np.ndarray) -> np.ndarray:
    """Per QOS: some competing row's QOS may not displace it (``competing``: a row mask or row indices)."""
    present = np.zeros(may.shape[0], dtype=bool)
    present[qos[competing]] = True
    return ~may[present].all(axis=0)
