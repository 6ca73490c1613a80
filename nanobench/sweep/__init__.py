"""`nanobench sweep`: a grid of command points, locally or on a Ray cluster, with a ledger."""
