"""Command-line front door: ``fidelnet`` and its subcommands."""
