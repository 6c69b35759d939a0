def round_total(x):
    """Round a total for display."""
    return int(x)
