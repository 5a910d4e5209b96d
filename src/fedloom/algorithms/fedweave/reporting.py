"""What FedWeave reports at the end of a run, named once: the alignment audit file (``alignment.json``, and
``alignment`` in summary.json) and the task × expert routing heatmap (``task_expert.png``) of
`FedWeave.final_report`. `fedloom.results` reads them by these names."""

ALIGNMENT = "alignment"
TASK_EXPERT = "task_expert"
