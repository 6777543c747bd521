"""Hardware configs, workloads, schedules, kernel simulators, subgraph costing and the device runtime."""
