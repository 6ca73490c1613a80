"""Reports: CSV schemas, terminal tables and matplotlib diagrams drawn from measured rows."""
