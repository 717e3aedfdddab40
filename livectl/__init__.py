"""The livectl command line and local services."""
