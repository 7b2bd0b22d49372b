"""`python -m ragline_cli`."""

from ragline_cli import main

main()
