"""Schedule spaces, cost model, search, tasks, partition search, tuning records, sweeps and the CLI."""
