"""What a run may spend and has spent: budgets with reservations, prices and spend, estimates, resource limits."""
