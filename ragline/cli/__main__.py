"""`python -m ragline.cli`."""

from ragline.cli import main

main()
