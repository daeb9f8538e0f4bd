"""`python -m sidewatch` is the `sidewatch` command."""

from sidewatch.cli.main import main

main()
