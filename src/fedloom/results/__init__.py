"""Reading runs: run folders loaded, compared and rendered (tables, reports, figures)."""
