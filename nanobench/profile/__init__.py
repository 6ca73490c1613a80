"""`nanobench profile`: where each mode's steady step goes, category by category and kernel by kernel."""
