"""What runs in the scheduler and worker processes: jobs, claims, execution, advancing.

`transitions` (with `transitions_runs`, `transitions_maps`, `transitions_waits`, `transitions_forks`) is the one module family that
changes a node's or a run's status. Imports the store and the core (and `handlers`, the
registry of the same layer); reaches the domain only through the seams it offers: node kinds
(`kinds.register`) and periodic duties (`duties.register`), filled in by workflows/apps.py.
"""
