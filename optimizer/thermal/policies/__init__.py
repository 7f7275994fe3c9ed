"""Thermal-aware policies from the literature, run on the thermal simulator of :mod:`optimizer.thermal`.

* :mod:`.splash` — SPLASH multi-DNN scheduling over phone processors and the cloud (Jeong 2023):
  a run (:mod:`.splash`), its dispatch rules (:mod:`.splash_policies`), what it learns online
  (:mod:`.splash_model`) and its dispatcher (:mod:`.splash_dispatch`); workloads in :mod:`.workload`;
* :mod:`.tadf` — TADF frequency selection and HSWD CPU/GPU layer splitting (Zhang et al. 2023);
* :mod:`.shifting` — Play It Cool dynamic model shifting (Zhou, Liang, Chin, Marculescu).
"""
