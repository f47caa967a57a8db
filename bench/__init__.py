"""`make bench`: Herald's figures, each beside a baseline measured in the same run (bench/run.py)."""
