"""``python -m harnessgrid`` is the same as the ``harnessgrid`` command."""

from harnessgrid.cli import main

main()
