"""Site history: a cluster's past jobs, read from Slurm's accounting (``sacct``), turned into a trace.

``sacct.py`` parses ``sacct --json`` and ``sacct --parsable2`` (pure: no process here; ``slurm/sacct.py`` runs
sacct), ``speeds.py`` holds the per-GPU-type speed table for jobs without a model, ``convert.py`` makes trace
jobs and the import report, ``commands.py`` is ``slurmplan trace import``.
"""
