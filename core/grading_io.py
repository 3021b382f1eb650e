"""Deprecated since 0.2.0, removed in 0.3.0: use :mod:`harnessgrid.sandboxing.grading_io`.

In-process graders' reads moved there when ``core/`` was split into layers. Every name asked of
this module comes from there, with a DeprecationWarning naming the new path (the table in
``harnessgrid._deprecated``).
"""

from harnessgrid._deprecated import module_getattr

__getattr__ = module_getattr(__name__)
