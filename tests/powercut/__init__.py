"""The power-cut layer and the runs on it (issue 22)."""
