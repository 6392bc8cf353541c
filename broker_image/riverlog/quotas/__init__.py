"""Client quotas enforced as Kafka enforces them: rates over sampled windows (``rate.py``), which
quota applies to a user and client id (``resolution.py``), and the broker's per-entity sensors
with their throttle times and metrics (``manager.py``)."""
