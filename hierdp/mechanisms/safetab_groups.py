"""Old import path; SafeTab's group helpers live in :mod:`hierdp.mechanisms.safetab.groups`."""

from hierdp.mechanisms.safetab.groups import *  # noqa: F401,F403
from hierdp.mechanisms.safetab.groups import __all__  # noqa: F401
