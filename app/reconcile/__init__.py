"""Reconcile: the sweep that brings back due and abandoned work after Redis or a worker is lost."""
