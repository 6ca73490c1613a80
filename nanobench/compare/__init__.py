"""`nanobench compare OLD NEW`: two saved runs of one command, compared column by column."""
