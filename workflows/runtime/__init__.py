"""What runs in the scheduler and worker processes: jobs, claims, execution, advancing.

`transitions` is the one module that changes a node's or a run's status.
"""
