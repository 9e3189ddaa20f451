"""The only code that talks to Slurm: read the queue and nodes, apply actions, parse Slurm strings, and run a
local development cluster."""
