"""Allocation policies: ``load_policy(name_or_path).allocate(problem) -> Allocation``."""

from slurmplan.policy.base import Policy, PolicyConfig
from slurmplan.policy.registry import list_policies, load_policy

__all__ = ["Policy", "PolicyConfig", "list_policies", "load_policy"]
