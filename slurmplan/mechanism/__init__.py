"""From a policy's allocation X to a concrete round: priorities, stickiness, placement and Slurm actions.

Callers use ``slurmplan.tick.decide``; its stages are plain functions over domain values, one module each:

- ``state``: attained time and current configuration carried from tick to tick;
- ``problem``: the AllocationProblem (columns = Cells) and the node pool managed jobs may use;
- ``priorities``: Gavel's X / received share;
- ``reconfig``: Rubick's reconfiguration-cost rule, weighed against the gain of a move;
- ``round``: the greedy round with stickiness (``plan_round``);
- ``placement`` and ``layout``: nodes for the chosen jobs, repacking and refilling;
- ``actions``: the diff from what each job is to what it should be (``plan_actions``);
- ``engine``: the stages wired together.
"""
