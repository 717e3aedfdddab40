"""simbrokers."""
