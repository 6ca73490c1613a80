"""`nanobench capture`: record once per shape, replay after; the replay timing and the pool table."""
