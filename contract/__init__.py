"""What the load side and the analysis agree on: record schema, window figures, policy, settings."""
