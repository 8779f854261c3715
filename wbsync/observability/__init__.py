"""What a process tells: per-task context (correlation id, job, deferral threshold), the
Prometheus metrics, the JSON logs and whether its dependencies answer.
"""
