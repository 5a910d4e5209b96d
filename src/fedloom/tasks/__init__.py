"""What a client computes on its data: task heads, losses, predictions, and the local learner."""
