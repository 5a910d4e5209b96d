"""The Flower runtime: the same algorithm objects carried by Flower 1.42 messages (Message API)."""
