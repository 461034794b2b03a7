"""How a TopDown level's noise is drawn: a noise model turns a budget into a noise scale and draws.

* :class:`DiscreteGaussianNoise` - ρ-zCDP: σ² = Δ₂² / (2ρ) on the level's histogram (Canonne,
  Kamath & Steinke 2020, Thm 4; paper 000 Thm 6), L2 sensitivity from the privacy unit.
* :class:`GeometricNoise` - pure ε-DP: the geometric (discrete Laplace) mechanism, scale
  b = Δ₁ / ε with the histogram's L1 sensitivity (paper 001's TopDown baseline at equal privacy).

Both round their scale up (:mod:`hierdp.privacy.calibration`), so the exact privacy delivered by
the float that is used never exceeds the budget part; both draw through
:mod:`hierdp.privacy.samplers`, whole arrays at once (numpy generator) or exactly (secure mode).
A new model subclasses :class:`NoiseModel` and sets :attr:`NoiseModel.calculus`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any

import numpy as np

from hierdp.privacy import calibration, samplers
from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.unit import PrivacyUnit

__all__ = ["DiscreteGaussianNoise", "GeometricNoise", "NoiseModel", "noise_model"]


class NoiseModel(ABC):
    """Turns a budget part into a noise parameter, and draws integer noise with it."""

    #: registry-style name, e.g. ``"discrete_gaussian"``
    name: str = ""
    #: the calculus its budgets live in: ``"zcdp"`` (ρ) or ``"pure"`` (ε)
    calculus: str = ""
    #: the parameter's name in accounting tables: ``"sigma2"`` or ``"scale"``
    parameter_name: str = ""
    #: the sensitivity's name: ``"l2_sensitivity"`` or ``"l1_sensitivity"``
    sensitivity_name: str = ""

    @abstractmethod
    def sensitivity(self, unit: PrivacyUnit, *, finest: bool, count: bool = False) -> int:
        """The exact sensitivity this model calibrates to (squared for L2): a level's histogram, or
        one count (``count=True``: the unbounded root)."""

    @abstractmethod
    def calibrate(self, amount: Fraction, sensitivity: int, *, culprit: str) -> float:
        """The noise parameter for budget ``amount`` (exact), rounded in the safe direction."""

    @abstractmethod
    def delivered(self, parameter: float, sensitivity: int) -> Fraction:
        """The exact budget a parameter delivers (never above the amount it was calibrated for)."""

    @abstractmethod
    def draw(self, parameter: float | np.ndarray, size: int | tuple[int, ...], rng: Any) -> np.ndarray:
        """int64 noise of shape ``size`` (``parameter`` scalar or one per value)."""

    def sensitivity_value(self, sensitivity: int) -> float:
        """The sensitivity as the tables print it (L2: the square root)."""
        return float(sensitivity)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class DiscreteGaussianNoise(NoiseModel):
    """Discrete Gaussian noise, ρ-zCDP (see the module docstring)."""

    name = "discrete_gaussian"
    calculus = "zcdp"
    parameter_name = "sigma2"
    sensitivity_name = "l2_sensitivity"

    def sensitivity(self, unit: PrivacyUnit, *, finest: bool, count: bool = False) -> int:
        if count:
            return unit.contributions ** 2
        return unit.l2_sensitivity_sq(finest=finest)

    def calibrate(self, amount: Fraction, sensitivity: int, *, culprit: str = "rho") -> float:
        return calibration.gaussian_sigma2(amount, sensitivity, culprit=culprit)

    def delivered(self, parameter: float, sensitivity: int) -> Fraction:
        return calibration.delivered_rho(parameter, sensitivity)

    def draw(self, parameter: float | np.ndarray, size: int | tuple[int, ...], rng: Any) -> np.ndarray:
        return samplers.discrete_gaussian(parameter, size, rng)

    def sensitivity_value(self, sensitivity: int) -> float:
        return float(np.sqrt(sensitivity))


class GeometricNoise(NoiseModel):
    """Geometric (discrete Laplace) noise, pure ε-DP (see the module docstring)."""

    name = "geometric"
    calculus = "pure"
    parameter_name = "scale"
    sensitivity_name = "l1_sensitivity"

    def sensitivity(self, unit: PrivacyUnit, *, finest: bool, count: bool = False) -> int:
        return unit.contributions if count else unit.l1_sensitivity()

    def calibrate(self, amount: Fraction, sensitivity: int, *, culprit: str = "epsilon") -> float:
        return calibration.laplace_scale(amount, sensitivity, culprit=culprit)

    def delivered(self, parameter: float, sensitivity: int) -> Fraction:
        return calibration.delivered_epsilon(parameter, sensitivity)

    def draw(self, parameter: float | np.ndarray, size: int | tuple[int, ...], rng: Any) -> np.ndarray:
        return samplers.discrete_laplace(parameter, size, rng)


_MODELS: dict[str, type[NoiseModel]] = {"discrete_gaussian": DiscreteGaussianNoise, "gaussian": DiscreteGaussianNoise,
           "geometric": GeometricNoise, "discrete_laplace": GeometricNoise}


def noise_model(noise: str | NoiseModel) -> NoiseModel:
    """A :class:`NoiseModel` from a name (``"discrete_gaussian"``, ``"geometric"``) or an instance."""
    if isinstance(noise, NoiseModel):
        return noise
    if noise not in _MODELS:
        raise PrivacyParameterError(
            f"noise must be 'discrete_gaussian' or 'geometric' (or a NoiseModel), got {noise!r}")
    return _MODELS[noise]()
