"""The journal's stores: one small class per purpose, all on one SQLite connection (``stores.db``).

events (job starts and ends), jobs (what was seen of each job), ticks, decisions (with rounds and the
allocation X), candidates, intents (actions from intent to confirmation), state (the scheduler's memory) and
measurements (throughputs jobs reported). No SQL is written outside these modules.
"""
