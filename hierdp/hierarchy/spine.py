"""Geographic spines (paper 003): the :mod:`hierdp.spines` package, re-exported here."""

from hierdp.spines import *
from hierdp.spines import __all__
