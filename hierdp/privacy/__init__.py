"""Privacy layer: noise samplers, accounting conversions, typed budgets.

* :mod:`~hierdp.privacy.rng` - :func:`make_rng` (seeded numpy for experiments,
  ``secure=True`` for real releases) and :class:`SecureRandom`.
* :mod:`~hierdp.privacy.samplers` - vectorized discrete Laplace / geometric, discrete Gaussian
  (exact CKS20 rejection sampler) and Laplace noise.
* :mod:`~hierdp.privacy.conversions` - pure DP / zCDP / RDP / (eps, delta) conversions
  (paper 004 eq. 6-8).
* :mod:`~hierdp.privacy.budget` - :class:`Budget` (immutable, composable, splittable) and
  :class:`Accountant` (a ledger that refuses overspending).
* :mod:`~hierdp.privacy.unit` - :class:`PrivacyUnit` (neighbouring relation, contributions) and
  the sensitivities that follow from it.
* :mod:`~hierdp.privacy.spec` - :class:`PrivacySpec` (what a mechanism spends), the guarantees a
  spend implies in every calculus, and the one function that words them.
* :mod:`~hierdp.privacy.calibration` - the one calibration API: noise scales rounded in the safe
  direction, checked exactly, and the int64 limits of every sampler.
* :mod:`~hierdp.privacy.noise` - :class:`~hierdp.privacy.noise.NoiseModel` (discrete Gaussian,
  geometric): calibrate, then draw; every family measures through it.
* :mod:`~hierdp.privacy.guarantees` - the guarantees a spend implies in every calculus.
* :mod:`~hierdp.privacy.domain` - the public-domain check every mechanism runs before noise.
* :mod:`~hierdp.privacy.rdp_geometric` - exact RDP of the geometric mechanism (paper 004 Lemma 8
  corrected), :mod:`~hierdp.privacy.parallel` - generalized parallel composition (Lemmas 9-12),
  :mod:`~hierdp.privacy.moe` - margins of error <-> noise parameters (Cor. 2, Cor. 4).
"""

from hierdp.privacy.conversions import (
    approx_dp_to_zcdp,
    check_delta,
    check_epsilon,
    check_rho,
    pure_rdp_curve,
    pure_to_zcdp,
    rdp_epsilon_term,
    rdp_to_approx_dp,
    zcdp_rdp_curve,
    zcdp_to_approx_dp,
)
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.calibration import delivered_epsilon, delivered_rho, gaussian_sigma2, laplace_scale
from hierdp.privacy.domain import ObservedDomainError, check_public_domain
from hierdp.privacy.errors import BudgetExceeded, PrivacyError, PrivacyParameterError
from hierdp.privacy.moe import (
    discrete_gaussian_moe,
    discrete_gaussian_rho_for_moe,
    geometric_epsilon_for_moe,
    geometric_moe,
)
from hierdp.privacy.parallel import StabilityError, check_stability, max_degree, parallel_compose
from hierdp.privacy.rdp_geometric import geometric_rdp_exact
from hierdp.privacy.rng import SecureRandom, make_rng
from hierdp.privacy.samplers import discrete_gaussian, discrete_laplace, geometric, laplace
from hierdp.privacy.guarantees import Guarantee, implied_guarantees
from hierdp.privacy.spec import PrivacySpec, describe_guarantee
from hierdp.privacy.unit import PrivacyUnit

__all__ = [
    "Accountant",
    # budgets, units, specs, calibration, domains
    "Budget",
    "BudgetExceeded",
    "Guarantee",
    "ObservedDomainError",
    # errors
    "PrivacyError",
    "PrivacyParameterError",
    "PrivacySpec",
    "PrivacyUnit",
    "SecureRandom",
    "StabilityError",
    "approx_dp_to_zcdp",
    "check_delta",
    "check_epsilon",
    "check_public_domain",
    "check_rho",
    "check_stability",
    "delivered_epsilon",
    "delivered_rho",
    "describe_guarantee",
    "discrete_gaussian",
    "discrete_gaussian_moe",
    "discrete_gaussian_rho_for_moe",
    "discrete_laplace",
    "gaussian_sigma2",
    "geometric",
    "geometric_epsilon_for_moe",
    "geometric_moe",
    # paper 004 extras
    "geometric_rdp_exact",
    "implied_guarantees",
    "laplace",
    "laplace_scale",
    # randomness and samplers
    "make_rng",
    "max_degree",
    "parallel_compose",
    "pure_rdp_curve",
    # accounting
    "pure_to_zcdp",
    "rdp_epsilon_term",
    "rdp_to_approx_dp",
    "zcdp_rdp_curve",
    "zcdp_to_approx_dp",
]
