"""The statements of ordered delivery."""
