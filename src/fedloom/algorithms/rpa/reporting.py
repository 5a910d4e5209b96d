"""What RPA reports, named once: the keys of its per-round diagnostics (`RPA.diagnostics`, in every
round's ``diagnostics`` in metrics.jsonl), of its clients' per-round metrics, and the end-of-run file and
heatmap of `RPA.final_report` (``routes.json``, ``routes.png``). `fedloom.results` reads them by these names."""

ROUTE_ENTROPY = "route_entropy"  # mean normalized entropy of the uploaded routes (seed 000 §4.4)
COLLAPSE_RATE = "collapse_rate"  # share of routes with one prototype above the collapse threshold
PROTOTYPE_LOAD = "prototype_load"  # mean route weight per prototype
LOAD_IMBALANCE = "load_imbalance"
PROTOTYPE_UPDATE_NORM = "prototype_update_norm"
WARM_START_CLUSTERS = "warm_start_clusters"
ROUTES = "routes"  # each uploading client's route (diagnostics); the final routes (file and heatmap)
ROUTE_CHANGE = "route_change"  # a client's L1 route change in its local step (train metrics)
