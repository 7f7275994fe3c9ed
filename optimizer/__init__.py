"""dnnplan: offline design-space exploration for deploying DNNs on phones.

The import package is ``optimizer``; the console script is ``dnnplan``. docs/ARCHITECTURE.md gives
the one-way data flow: model file -> graph -> cost -> search -> plan -> simulate/runtime/report.
"""

__version__ = "0.1.0"
