"""The flagship inside the site's fairshare (issue 26): account weights move the due order, nothing else."""

from __future__ import annotations

import numpy as np
from test_flagship import one_gpu_problem  # tests/policy is on sys.path (rootdir import mode)

from slurmplan.policy import load_policy
from slurmplan.policy.flagship_order import account_scale


def two_accounts(weights):
    """Two 6-minute jobs for one GPU: ``heavy``'s submitted 30 s before ``light``'s."""
    return one_gpu_problem([[10.0], [10.0]], {"v100": 1}, steps_remaining=np.array([3_600.0, 3_600.0]),
                           submit_time=np.array([0.0, 30.0]), accounts=("heavy", "light"),
                           account_weights=weights)  # fmt: skip


def test_the_account_that_used_more_waits_behind_the_one_that_used_less():
    policy = load_policy("slurmplan")
    assert policy.allocate(two_accounts(None)).x[:, 0].tolist() == [1, 0], "without weights: submission order"
    # fairshare weights as slurmctld gives them (shares x 2^(-usage/shares)): heavy used more than its share
    alloc = policy.allocate(two_accounts({"heavy": 0.125, "light": 0.5}))
    assert alloc.x[:, 0].tolist() == [0, 1]
    assert "account heavy's fairshare weight 0.40x the mean" in alloc.notes[0]
    assert "account light's fairshare weight 1.60x the mean" in alloc.notes[1]
    # only the ratio counts, and equal weights change nothing
    assert policy.allocate(two_accounts({"heavy": 1.0, "light": 4.0})).x[:, 0].tolist() == [0, 1]
    same = policy.allocate(two_accounts({"heavy": 2.0, "light": 2.0}))
    assert same.x[:, 0].tolist() == [1, 0] and "fairshare" not in same.notes[0]


def test_account_scale_is_relative_clipped_and_neutral_for_unknown_accounts():
    p = two_accounts({"heavy": 1e-9, "light": 1.0, "other": 5.0})
    np.testing.assert_allclose(account_scale(p), [1 / 8, 2.0])
    q = two_accounts({"light": 1.0, "other": 3.0})  # heavy has no weight: it counts the mean (2.0)
    np.testing.assert_allclose(account_scale(q), [2.0 / 1.5, 1.0 / 1.5])
