"""The driver's machinery: job table, process launch, environment, recording."""
