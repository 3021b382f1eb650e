"""``python -m harnessgrid.plugins.tasks.generated``: rewrite the shipped split index after
changing a generator (see :mod:`.splits`)."""

from .splits import write_index

print(write_index())
