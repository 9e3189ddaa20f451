"""Predicting throughput and memory of training jobs: catalogs, plan space, memory, Rubick model and fit,
pipeline partitioning, Crius cells, EasyScale mixed-type data parallelism. Entry point for other rooms:
``slurmplan.perf.candidates.job_candidates``."""
