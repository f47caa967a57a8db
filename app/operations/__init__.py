"""Operating Herald: bulk redrive, retention, fleet gauges, metrics and health."""
