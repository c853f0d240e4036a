"""results.md, the fused-ops section and the plots, from results.json."""
