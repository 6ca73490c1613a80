"""`nanobench startup`: cold, warm and hot starts per mode, each in a fresh process, by phase."""
