"""The daemon: one tick = observe (Slurm) -> decide (``slurmplan.tick.decide``) -> act (Slurm), journaled.

Modules: ``config`` (the YAML file), ``journal`` (SQLite), ``lock`` (no two ticks overlap), ``observe``
(snapshot -> managed jobs), ``act`` (intents -> applied -> confirmed), ``runner`` (one tick, the loop),
``explain`` (operator views), ``commands`` (CLI).
"""
