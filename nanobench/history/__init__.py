"""`nanobench history`: the earlier runs this machine's intervals borrow from, listed and cleared."""
