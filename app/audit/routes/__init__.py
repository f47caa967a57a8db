"""HTTP routes: parse, authorise, call the service, answer. No SQL, no workflow."""
