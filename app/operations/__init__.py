"""Operating Herald: retention, fleet gauges, metrics and health. (Bulk redrive is the
delivery domain's: app/delivery/service/redrive.py.)"""
