"""Network compiler: network IR -> DLA support checks -> hardware layers -> register programs."""
