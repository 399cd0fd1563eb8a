"""Reports: tables, Chrome/Perfetto trace events and matplotlib plots."""
