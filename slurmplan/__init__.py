"""slurmplan: heterogeneity- and plan-aware scheduling of deep-learning training on Slurm."""

__version__ = "0.1.0"
