"""``slurmplan replay``: a trace run on a real Slurm cluster, with the real daemon, measured against a prediction.

Parts: ``schedule`` (trace -> sbatch submissions), ``payload`` (the emulated training job, on the launcher's own
signal, checkpoint, requeue and report code), ``harness`` (the run loop), ``faults``, ``measure`` (events ->
``SimResult``, so ``sim.metrics`` and ``sim.report`` apply), ``commands`` (the CLI). Only the CLI imports this room.
"""
