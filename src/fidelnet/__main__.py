"""``python -m fidelnet`` runs the command line."""

from fidelnet.cli.main import main

main()
