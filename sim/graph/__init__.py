"""Whole graphs on the device: what a partitioned model costs and how a packed plan runs.

- ``subgraph``: costing offloaded subgraphs (kernels, on-chip intermediates, spills) and whole
  partitioned models (``cost_graph``);
- ``transfer``: the one rule for what a tensor weighs on the link and on the device;
- ``runtime``: the simulated device runtime that loads a packed module and runs it.
"""
