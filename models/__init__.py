"""The dnnplan model zoo: one Keras 3 builder module per network (see :mod:`optimizer.graph.zoo`).

Modules whose name starts with an underscore hold shared helpers and are not zoo entries.
"""
