"""The worker process: arq and the pump started and stopped together (runner.py), the typed
context its jobs receive (context.py), the job functions (jobs.py)."""
