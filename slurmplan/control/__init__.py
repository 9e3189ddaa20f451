"""The daemon: one tick = observe (Slurm) -> decide (``slurmplan.tick.decide``) -> act (Slurm), journaled.

Modules: ``config`` (the YAML file), ``journal`` (SQLite, WAL; ``Journal(path).events.record`` for the Slurm
hook), ``state_store`` (SchedulerState <-> journal), ``reports`` (jobs' throughput reports -> measurements),
``lock`` (no two ticks overlap), ``observe`` (snapshot -> managed jobs with candidates), ``act`` (intents ->
applied -> confirmed, roll-forward), ``runner`` (``Daemon.tick()`` and ``Daemon.run()``), ``explain``
(operator views), ``commands`` (``slurmplan tick|daemon|explain|history``), ``codec`` (JSON forms).
"""
