"""Paper 004 (SafeTab, Haney et al.): ``tables`` (Tables 1, 2, 4), ``real`` (TV16 coverage),
``military`` (scale test on 1.4 M records)."""
