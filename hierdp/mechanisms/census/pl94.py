"""The 2020 redistricting (PL 94-171) persons release of the Census DAS as a query strategy.

Histogram (2,016 cells): HHGQ (8) x voting age (2) x Hispanic (2) x CENRACE (63), the DAS's
``PL94_2020_SCHEMA`` (``programs/schema/schemas/schemamaker.py`` of
``uscensusbureau/DAS_2020_Redistricting_Production_Code``).

Query groups and per-geolevel shares: the production strategy of the US persons run,
``ProductionCandidate20210527US_mult8_add02_dsepJune3`` (``programs/strategies/strategies.py``,
named by ``configs/production/pl94/person_US.ini``): total, cenrace, hispanic, votingage,
hhinstlevels (HHGQ recoded to household / institutional (levels 1-4) / non-institutional (5-7),
``hhgq_person_simple.py``'s ``recodeHHnstLevels``), hhgq, hispanic x cenrace, votingage x cenrace,
votingage x hispanic, votingage x hispanic x cenrace, detailed; the US geolevel has no total query
(its total is invariant). Geolevel budget proportions (``person_US.ini``, ``geolevel_budget_prop``)
US 104/4099, State 1440/4099, County 447/4099, Tract 687/4099, Block_Group 1256/4099, Block
165/4099; ``global_scale = 339/542`` (``person_default.ini``), so the total ρ is
``1 / global_scale² = (542/339)² ≈ 2.556`` (``das2020_driver.py``), discrete Gaussian noise.

The numbers are read from the public production code (reference only). The DAS's own spine
(optimized block groups, bypass) is not rebuilt here: :func:`pl94_geolevel_proportions` gives the
conventional spine's per-geolevel proportions to use with :class:`~hierdp.spines.Spine`.
"""

from __future__ import annotations

from fractions import Fraction as Fr

from hierdp.mechanisms.census.strategy import QueryStrategy

__all__ = ["PL94_GEOLEVELS", "PL94_RHO", "pl94_geolevel_proportions", "pl94_strategy"]

#: the DAS's geolevels, top down (``geolevel_names`` of ``person_US.ini``, reversed)
PL94_GEOLEVELS = ("US", "State", "County", "Tract", "Block_Group", "Block")
#: 1 / global_scale² with global_scale = 339/542
PL94_RHO = Fr(542, 339) ** 2

_GROUPS = {
    "total": (), "cenrace": (3,), "hispanic": (2,), "votingage": (1,), "hhinstlevels": (), "hhgq": (0,),
    "hispanic * cenrace": (2, 3), "votingage * cenrace": (1, 3), "votingage * hispanic": (1, 2),
    "votingage * hispanic * cenrace": (1, 2, 3), "detailed": (0, 1, 2, 3),
}
_INSTLEVELS = (0, 1, 1, 1, 1, 2, 2, 2)
_ORDER = ("total", "cenrace", "hispanic", "votingage", "hhinstlevels", "hhgq", "hispanic * cenrace",
          "votingage * cenrace", "votingage * hispanic", "votingage * hispanic * cenrace", "detailed")
_LEVEL_SHARES = {
    "US": (0, Fr(52, 4097), Fr(26, 4097), Fr(26, 4097), Fr(26, 4097), Fr(26, 4097), Fr(130, 4097), Fr(130, 4097),
           Fr(26, 4097), Fr(26, 241), Fr(189, 241)),
    "State": (Fr(3773, 4097), Fr(6, 4097), Fr(6, 4097), Fr(6, 4097), Fr(6, 4097), Fr(6, 4097), Fr(12, 4097),
              Fr(12, 4097), Fr(6, 4097), Fr(2, 241), Fr(230, 4097)),
    "County": (Fr(3126, 4097), Fr(10, 4097), Fr(10, 4097), Fr(10, 4097), Fr(10, 4097), Fr(10, 4097), Fr(28, 4097),
               Fr(28, 4097), Fr(10, 4097), Fr(101, 4097), Fr(754, 4097)),
    "Tract": (Fr(1567, 4102), Fr(4, 2051), Fr(5, 4102), Fr(5, 4102), Fr(5, 4102), Fr(5, 4102), Fr(1933, 4102),
              Fr(10, 2051), Fr(5, 4102), Fr(67, 4102), Fr(241, 2051)),
    "Block_Group": (Fr(1705, 4099), Fr(3, 4099), Fr(3, 4099), Fr(3, 4099), Fr(3, 4099), Fr(3, 4099),
                    Fr(1055, 4099), Fr(9, 4099), Fr(3, 4099), Fr(24, 4099), Fr(1288, 4099)),
    "Block": (Fr(5, 4097), Fr(9, 4097), Fr(5, 4097), Fr(5, 4097), Fr(5, 4097), Fr(5, 4097), Fr(21, 4097),
              Fr(21, 4097), Fr(5, 4097), Fr(71, 4097), Fr(3945, 4097)),
}
_GEOLEVEL_PROP = {"US": Fr(104, 4099), "State": Fr(1440, 4099), "County": Fr(447, 4099), "Tract": Fr(687, 4099),
                  "Block_Group": Fr(1256, 4099), "Block": Fr(165, 4099)}


def pl94_strategy(geolevels: dict[str, str] | None = None) -> QueryStrategy:
    """The production PL94 strategy (module docstring).

    Args:
        geolevels: the spine's geolevel name for each DAS geolevel (default: the DAS names, e.g.
            ``{"US": "US", "State": "state", ...}`` for a spine whose levels are lower case).
    """
    names = geolevels or {g: g for g in PL94_GEOLEVELS}
    level_shares = {names[lev]: dict(zip(_ORDER, sh, strict=False)) for lev, sh in _LEVEL_SHARES.items() if lev in names}
    return QueryStrategy((8, 2, 2, 63), dict(_GROUPS), dict(zip(_ORDER, _LEVEL_SHARES["Block"], strict=False)),
                         attribute_names=("hhgq", "votingage", "hispanic", "cenrace"),
                         recodes={"hhinstlevels": {0: _INSTLEVELS}}, level_shares=level_shares)


def pl94_geolevel_proportions() -> dict[str, Fr]:
    """The production per-geolevel budget proportions (exact; they sum to 1)."""
    return dict(_GEOLEVEL_PROP)
