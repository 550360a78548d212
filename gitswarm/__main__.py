"""`python -m gitswarm`: the command line."""

from gitswarm.cli.main import main

main()
