"""`nanobench tune`: race the step's configurations; name the ones that cannot be told from the best."""
