"""Deprecated since 0.2.3, removed in 0.4.0: use :mod:`harnessgrid.trajectory`.

Trajectories are data that every layer and plugin reads, so they moved to the contract layer.
Every name asked of this module comes from there, with a DeprecationWarning naming the new
path (the table in ``harnessgrid._deprecated``).
"""

from harnessgrid._deprecated import module_getattr

__getattr__ = module_getattr(__name__)
