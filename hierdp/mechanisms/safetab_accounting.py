"""Old import path; SafeTab's accounting lives in :mod:`hierdp.mechanisms.safetab.accounting`."""

from hierdp.mechanisms.safetab.accounting import *  # noqa: F401,F403
from hierdp.mechanisms.safetab.accounting import __all__  # noqa: F401
