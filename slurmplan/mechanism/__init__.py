"""From a policy's allocation X to a concrete round: priorities, stickiness, placement and Slurm actions.

Entry point for callers is ``slurmplan.tick.decide``; the stages are plain functions over domain values:
``problem.build_problem`` -> policy -> ``round.plan_round`` -> ``placement.place`` -> ``actions.job_actions``.
"""
