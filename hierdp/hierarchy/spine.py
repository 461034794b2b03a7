"""Geographic spines (paper 003): the :mod:`hierdp.spines` package, re-exported here."""

from hierdp.spines import *  # noqa: F401,F403
from hierdp.spines import __all__  # noqa: F401
