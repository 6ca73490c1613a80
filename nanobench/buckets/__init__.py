"""`nanobench buckets`: price a closed shape set and a capture list before capturing anything."""
