"""`nanobench explain`: graphs, breaks, ops and break reasons of one decode forward."""
