"""dnnplan's shipped search spaces: data only (devices, networks, servers, thermal specs, workloads,
jobs, bandwidth traces, published calibration points, the Odroid-XU3 trace).

A package so that the wheel carries the files and :func:`importlib.resources.files` finds them in
a checkout, an editable install and an installed wheel alike; read it through
:mod:`optimizer.shipped`, which also overlays the user's folders (``$DNNPLAN_SEARCH_SPACES``,
``dnnplan --search-spaces DIR``).
"""
