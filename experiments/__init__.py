"""Scripts that reproduce the papers' tables and figures; one package per paper, run as modules:

    python -m experiments.paper000_inftda.synthetic --quick
    python -m experiments.paper004_safetab.tables
    python -m experiments.bench.solvers

Not part of the installed library. Every script writes under :data:`experiments.common.RESULTS`.
"""
